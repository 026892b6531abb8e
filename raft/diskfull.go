package raft

import (
	"errors"
	"fmt"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/shaledb/shale/storage"
)

// A full disk (docs/durability.md, "A full disk").
//
// A write the engine refuses for lack of space (ENOSPC, or the background
// error an ENOSPC in a flush left) wrote nothing that counts: the engine
// cuts its WAL back to the last whole record when it resumes. So such a
// write is not fatal. The writer tells the disk monitor (which marks the
// node full, so that new client writes are refused, and releases the
// reserve file so that this write finds room), resumes the engine and
// writes the same batch again, until it succeeds or the store stops.
// Nothing that depended on the write happened meanwhile: the log writer
// delivers the acknowledgements and votes of a batch only after the batch
// is durable, and an apply completes its proposals only after its batch
// is written, exactly as when the disk is merely slow. A replica whose
// write waits is a slow replica, which Raft tolerates.
//
// While the node is full it also stops taking on new data from peers: it
// drops appends that carry entries and refuses incoming snapshots (Raft
// resends both), so that its leaders elsewhere cannot fill the disk past
// the reserve; it keeps answering heartbeats, so it does not disturb
// elections. Its own proposals are refused by the node before they reach
// Raft.

// noSpaceRetryMax bounds the wait between attempts of a write the disk
// had no room for.
const noSpaceRetryMax = time.Second

// isNoSpace says whether err is the engine refusing a write for lack of
// space.
func (s *Store) isNoSpace(err error) bool {
	if errors.Is(err, storage.ErrNoSpace) {
		return true
	}
	if !errors.Is(err, storage.ErrBackgroundError) {
		return false
	}
	st, serr := s.cfg.Engine.Stats()
	return serr == nil && errors.Is(st.BackgroundError, storage.ErrNoSpace)
}

// writeEngine writes b, waiting out a full disk (see above). It returns
// the engine's error for any other failure, and ErrStopped if the store
// stops while the disk is full.
func (s *Store) writeEngine(b *storage.Batch, wo storage.WriteOptions) error {
	if f := s.cfg.Testing.OnEngineWrite; f != nil {
		f(s.cfg.NodeID, b)
	}
	return s.retryNoSpace("an engine write", func() error { return s.cfg.Engine.Write(b, wo) })
}

// retryNoSpace runs write until it succeeds, fails with something other
// than a full disk, or the store stops.
func (s *Store) retryNoSpace(what string, write func() error) error {
	wait := 10 * time.Millisecond
	for attempt := 0; ; attempt++ {
		err := write()
		if err == nil || !s.isNoSpace(err) {
			if err == nil && attempt > 0 {
				s.cfg.Logger.Info("disk space is back: a write that waited for it is done", "write", what, "attempts", attempt+1)
			}
			return err
		}
		if attempt == 0 {
			s.metrics.noSpaceWrites.Inc()
			s.cfg.Logger.Warn("the disk is full: waiting for space to write", "write", what, "err", err)
		}
		released := s.cfg.Disk.NoteNoSpace(err)
		if !released {
			select {
			case <-s.stopped:
				return fmt.Errorf("%s: %w while waiting for disk space: %w", what, ErrStopped, err)
			case <-s.after(wait):
			}
			wait = min(2*wait, noSpaceRetryMax)
		}
		if rerr := s.cfg.Engine.Resume(); rerr != nil {
			s.cfg.Logger.Debug("resuming the engine", "err", rerr)
		}
	}
}

// refuseForFullDisk says whether an incoming message would make this node
// store new data while its disk is full: an append that carries entries.
// Raft resends what is dropped.
func (s *Store) refuseForFullDisk(m *pb.Message) bool {
	if m.GetType() != pb.MsgApp || len(m.GetEntries()) == 0 {
		return false
	}
	return s.cfg.Disk.Full()
}
