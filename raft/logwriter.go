package raft

import (
	"sync"

	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/shaledb/shale/api/raftrpcpb"
	"github.com/shaledb/shale/raft/logstore"
	"github.com/shaledb/shale/storage"
)

// The log writer is the node's one "append thread" (etcd-io/raft's
// LocalAppendThread): it persists the MsgStorageAppend messages of every
// replica, in the order they were produced. It takes everything queued at
// once and writes it as ONE engine batch with ONE fsync (cross-range group
// commit; while it syncs, the next appends queue up behind it). Once the
// batch is durable it makes the entries visible to each replica's
// raft.Storage and delivers the messages that waited for the write: the
// replica's own acknowledgements are stepped into its RawNode, the rest
// (append acknowledgements to a leader, votes) go to their peers. A write
// the disk has no room for waits for room (diskfull.go); any other failed
// write is fatal: Raft would otherwise count on entries that are not on
// disk.

// appendQueue is the FIFO of work for the log writer.
type appendQueue struct {
	mu      sync.Mutex
	cond    *sync.Cond
	works   []*appendWork
	stopped bool
}

func newAppendQueue() *appendQueue {
	q := &appendQueue{}
	q.cond = sync.NewCond(&q.mu)
	return q
}

func (q *appendQueue) push(ws []*appendWork) {
	if len(ws) == 0 {
		return
	}
	q.mu.Lock()
	q.works = append(q.works, ws...)
	q.mu.Unlock()
	q.cond.Signal()
}

// next blocks until work is queued and takes all of it; nil once stopped.
func (q *appendQueue) next() []*appendWork {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.works) == 0 && !q.stopped {
		q.cond.Wait()
	}
	if q.stopped {
		return nil
	}
	ws := q.works
	q.works = nil
	return ws
}

func (q *appendQueue) stop() {
	q.mu.Lock()
	q.stopped = true
	q.mu.Unlock()
	q.cond.Broadcast()
}

// staged is one appendWork's part of a batch.
type staged struct {
	w      *appendWork
	hasApp bool
	app    logstore.Append
	sa     logstore.SnapshotApply
	skip   bool // the replica was destroyed meanwhile
}

func (s *Store) logWriterLoop() {
	defer s.wg.Done()
	b := storage.NewBatch(64 << 10)
	for {
		works := s.appendQ.next()
		if works == nil {
			return
		}
		s.writeAppends(works, b)
	}
}

// writeAppends persists works in one batch and delivers their responses.
func (s *Store) writeAppends(works []*appendWork, b *storage.Batch) {
	b.Reset()
	sync, snap := false, false
	st := make([]staged, len(works))
	for i, w := range works {
		r := w.r
		r.raftMu.Lock()
		st[i] = r.stageAppendLocked(w, b)
		if st[i].skip {
			r.logWrites--
		} else {
			m := w.m
			sync = sync || len(m.GetEntries()) > 0 || w.snap != nil ||
				(m.Term != nil && (m.GetTerm() != r.ls.HardState().GetTerm() || m.GetVote() != r.ls.HardState().GetVote()))
			snap = snap || w.snap != nil
		}
		r.raftMu.Unlock()
	}
	if d := s.cfg.TestingLogWriteDelay; d > 0 {
		<-s.after(d)
	}
	if !b.Empty() {
		s.metrics.logBatchBytes.Observe(float64(b.Len()))
		start := s.now()
		// A full disk is waited out (diskfull.go): nothing of this
		// batch is acknowledged until it is written.
		// Each try's disk work is timed for stall detection
		// (writeDurably, diskstall.go); a wait for space between tries is
		// not a stall.
		if err := s.retryNoSpace("the Raft log", func() error {
			return s.writeDurably(b, sync, snap)
		}); err != nil {
			s.fatal("writing the Raft log", err)
			return
		}
		s.metrics.logWriteSeconds.Observe(since(s.cfg.Clock, start).Seconds())
		if sync {
			s.metrics.logSyncs.Inc()
		}
	}
	byNode := make(map[uint64][]*raftrpcpb.RangeMessage)
	touched := make(map[*Replica]struct{}, len(works))
	for i, w := range works {
		if st[i].skip {
			continue
		}
		r := w.r
		r.raftMu.Lock()
		r.logWrites--
		if r.rn == nil {
			r.raftMu.Unlock()
			continue
		}
		if err := r.commitAppendLocked(&st[i]); err != nil {
			r.raftMu.Unlock()
			s.fatal("loading state after a snapshot", err)
			return
		}
		for _, resp := range w.m.GetResponses() {
			if resp.GetTo() == r.replicaID {
				if err := r.rn.Step(resp); err != nil {
					s.cfg.Logger.Debug("stepping an append response", "range", r.rangeID, "type", resp.GetType().String(), "err", err)
				}
				continue
			}
			if rm := r.rangeMessageLocked(resp); rm != nil {
				byNode[rm.GetToNodeId()] = append(byNode[rm.GetToNodeId()], rm)
			}
		}
		r.raftMu.Unlock()
		if w.snap != nil {
			w.snap.done <- nil
		}
		touched[r] = struct{}{}
	}
	for node, msgs := range byNode {
		s.metrics.messagesSent.Add(float64(len(msgs)))
		if f := s.cfg.Testing.OnSend; f != nil {
			f(s.cfg.NodeID, msgs)
		}
		s.transport.Send(node, msgs)
	}
	for r := range touched {
		s.sched.enqueue(r)
	}
}

// writeDurably writes the log writer's batch, durably if sync.
//
// A synced engine write holds the engine's write queue through its fsync,
// so the apply batches of the processing round (written without sync, and
// under their replica's raftMu) would wait a whole fsync behind it, and the
// round with them: profiles of a write load showed the round blocked there
// a third of the time. So the batch is written without sync, which takes
// the queue only for the WAL append, and then made durable with SyncWAL,
// which syncs outside the queue. Nothing waiting on this batch (Raft's
// storage, the responses) sees it before SyncWAL returns. A batch carrying
// a snapshot keeps the synced write: it replaces range data that readers
// of the engine could otherwise see before it is durable.
//
// Stall detection (diskstall.go) times the disk's work only: the fsync
// (SyncWAL) or the synced write of a snapshot. The unsynced write before
// the fsync waits for the engine's write queue and its write stalls,
// which a heavy write load causes on a healthy disk.
func (s *Store) writeDurably(b *storage.Batch, sync, snap bool) error {
	if f := s.cfg.Testing.OnEngineWrite; f != nil {
		f(s.cfg.NodeID, b)
	}
	if !sync {
		return s.cfg.Engine.Write(b, storage.NoSync)
	}
	if snap {
		s.beginLogWrite(s.now())
		defer func() { s.endLogWrite(s.now()) }()
		return s.cfg.Engine.Write(b, storage.WriteOptions{Sync: true})
	}
	if err := s.cfg.Engine.Write(b, storage.NoSync); err != nil {
		return err
	}
	s.beginLogWrite(s.now())
	defer func() { s.endLogWrite(s.now()) }()
	return s.cfg.Engine.SyncWAL()
}

// stageAppendLocked stages one MsgStorageAppend (snapshot, entries,
// HardState) into b.
// REQUIRES: raftMu.
func (r *Replica) stageAppendLocked(w *appendWork, b *storage.Batch) staged {
	st := staged{w: w}
	if r.rn == nil {
		st.skip = true
		return st
	}
	m := w.m
	var hs *pb.HardState
	if m.Term != nil {
		hs = &pb.HardState{Term: new(m.GetTerm()), Vote: new(m.GetVote()), Commit: new(m.GetCommit())}
	}
	if w.snap != nil {
		st.sa = r.stageSnapshotLocked(b, w.snap, hs)
		hs = nil // written with the snapshot
	}
	if len(m.GetEntries()) > 0 || (hs != nil && !etcdraft.IsEmptyHardState(hs)) {
		st.app = r.ls.StageAppend(b, m.GetEntries(), hs)
		st.hasApp = true
	}
	return st
}

// commitAppendLocked makes a durable append visible to the replica's
// raft.Storage.
// REQUIRES: raftMu.
func (r *Replica) commitAppendLocked(st *staged) error {
	if st.w.snap != nil {
		if err := r.commitSnapshotLocked(st.w.snap, st.sa); err != nil {
			return err
		}
	}
	if st.hasApp {
		r.ls.CommitAppend(st.app)
	}
	return nil
}

// rangeMessageLocked addresses a message of this replica to its node; nil
// (and Raft told) when the node is unknown.
// REQUIRES: raftMu.
func (r *Replica) rangeMessageLocked(m *pb.Message) *raftrpcpb.RangeMessage {
	to := r.nodeForLocked(m.GetTo())
	if to == 0 || to == r.store.cfg.NodeID {
		if r.rn != nil {
			r.rn.ReportUnreachable(m.GetTo())
		}
		return nil
	}
	rm := &raftrpcpb.RangeMessage{RangeId: r.rangeID, FromNodeId: r.store.cfg.NodeID, ToNodeId: to, Message: m}
	if m.GetType() == pb.MsgHeartbeat && !r.peerHoldsReplicaLocked(m.GetTo()) {
		// Lets a node that has no replica yet (a new learner) create it
		// when its leader first reaches it. A peer that acknowledged
		// entries and answers holds its replica: a busy range's every
		// heartbeat carried the descriptor, marshalled and unmarshalled
		// per range and tick for nothing.
		rm.RangeDescriptor = r.desc
	}
	return rm
}
