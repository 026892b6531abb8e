package raft

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/api/raftrpcpb"
	"github.com/shaledb/shale/raft/apply"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/raft/logstore"
	"github.com/shaledb/shale/raft/transport"
	"github.com/shaledb/shale/storage"
)

// Snapshots (docs/replication.md, "Snapshots").
//
// Raft asks for a snapshot when a follower needs entries the leader's log
// no longer has (a new replica, or one that fell behind a truncation).
// Storage.Snapshot only names the applied position; the data is produced
// when the snapshot is sent: the sender takes an engine snapshot, reads the
// range's applied state, ConfState and descriptor from it, rewrites the
// MsgSnap's metadata to that (possibly newer) position, and streams every
// key of the range's replicated spans (range-local state, then data) at
// that engine snapshot, in chunks, under the transport's rate limit.
//
// The receiver checks that every key belongs to the range, then steps the
// MsgSnap into Raft. If Raft accepts it (the Ready carries it), the round
// replaces the range's replicated state and log in the same batch as every
// other range's log writes: range deletions over the old and new spans,
// the received keys, the truncated state at the snapshot's position, all
// atomic and fsync'd. Data is staged in memory until then (bounded by
// Config.MaxSnapshotBytes); SST ingestion will replace that when the
// engine supports it.
//
// Chunk data encoding (the engine iterator's batch encoding):
//
//	chunk := entry*
//	entry := key_len:fixed32 value_len:fixed32 key value   (little-endian)

// incomingSnapshot is a received snapshot waiting for Raft's verdict.
type incomingSnapshot struct {
	msg  *pb.Message
	desc *kvpb.RangeDescriptor
	kvs  [][2][]byte
	done chan error // capacity 1
}

func (in *incomingSnapshot) index() uint64 {
	return in.msg.GetSnapshot().GetMetadata().GetIndex()
}

// HandleSnapshot implements transport.Handler.
func (s *Store) HandleSnapshot(ctx context.Context, h *raftrpcpb.SnapshotHeader, sr *transport.SnapshotReader) error {
	msg, desc := h.GetMessage(), h.GetRangeDescriptor()
	meta := msg.GetSnapshot().GetMetadata()
	if msg.GetType() != pb.MsgSnap || meta.GetIndex() == 0 || desc.GetRangeId() != h.GetRangeId() {
		return fmt.Errorf("raft: malformed snapshot header for range %d", h.GetRangeId())
	}
	me := apply.ReplicaOnNode(desc, s.cfg.NodeID)
	if me == nil || me.GetReplicaId() != msg.GetTo() {
		return fmt.Errorf("raft: snapshot of range %d for replica %d, which the descriptor does not place on node %d", h.GetRangeId(), msg.GetTo(), s.cfg.NodeID)
	}
	if err := s.cfg.Disk.Err(); err != nil {
		// diskfull.go: the sender retries once the disk has room.
		s.metrics.appendsRefused.Inc()
		return fmt.Errorf("raft: refusing a snapshot of range %d: %w", h.GetRangeId(), err)
	}
	if err := s.checkSnapshotOverlap(desc); err != nil {
		return err
	}
	r, err := s.getOrCreateReplica(h.GetRangeId(), msg.GetTo())
	if err != nil {
		return err
	}
	spans := keys.ReplicatedSpans(desc)
	in := &incomingSnapshot{msg: msg, desc: desc, done: make(chan error, 1)}
	staged := stagedSnapshot{m: s.snapMem} // snapshot_memory.go
	defer staged.release()
	var total int64
	for {
		chunk, err := sr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if err := staged.take(ctx, h.GetRangeId(), int64(len(chunk))); err != nil {
			return err
		}
		total += int64(len(chunk))
		if total > s.cfg.MaxSnapshotBytes {
			return fmt.Errorf("raft: snapshot of range %d is larger than %d bytes", h.GetRangeId(), s.cfg.MaxSnapshotBytes)
		}
		if in.kvs, err = decodeSnapshotChunk(in.kvs, chunk, spans); err != nil {
			return fmt.Errorf("raft: snapshot of range %d: %w", h.GetRangeId(), err)
		}
	}
	if uint64(len(in.kvs)) != sr.TotalEntries() {
		return fmt.Errorf("raft: snapshot of range %d has %d entries, the sender sent %d", h.GetRangeId(), len(in.kvs), sr.TotalEntries())
	}
	if err := checkSnapshotState(in); err != nil {
		return fmt.Errorf("raft: snapshot of range %d: %w", h.GetRangeId(), err)
	}
	s.metrics.snapshotsReceived.Inc()
	s.metrics.snapshotBytesReceived.Add(float64(total))
	r.in.Lock()
	r.in.snaps = append(r.in.snaps, in)
	r.in.Unlock()
	s.sched.enqueue(r)
	select {
	case err := <-in.done:
		s.stepBarrier()
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-s.stopped:
		return ErrStopped
	}
}

// decodeSnapshotChunk appends the entries of chunk to kvs, checking that
// every key lies in one of spans. The slices alias chunk.
func decodeSnapshotChunk(kvs [][2][]byte, chunk []byte, spans []keys.Span) ([][2][]byte, error) {
	for len(chunk) > 0 {
		if len(chunk) < 8 {
			return kvs, errors.New("truncated entry header")
		}
		kl, vl := binary.LittleEndian.Uint32(chunk), binary.LittleEndian.Uint32(chunk[4:])
		if uint64(len(chunk)-8) < uint64(kl)+uint64(vl) {
			return kvs, errors.New("entry runs past the end of its chunk")
		}
		k := chunk[8 : 8+kl : 8+kl]
		v := chunk[8+kl : 8+kl+vl : 8+kl+vl]
		chunk = chunk[8+kl+vl:]
		in := false
		for _, sp := range spans {
			if sp.Contains(k) {
				in = true
				break
			}
		}
		if !in {
			return kvs, fmt.Errorf("key %x is outside the range's spans", k)
		}
		kvs = append(kvs, [2][]byte{k, v})
	}
	return kvs, nil
}

// checkSnapshotState checks that the snapshot's data holds the applied
// state its metadata names and the descriptor of its header.
func checkSnapshotState(in *incomingSnapshot) error {
	rangeID := in.desc.GetRangeId()
	meta := in.msg.GetSnapshot().GetMetadata()
	var sawApplied, sawDesc bool
	for _, kv := range in.kvs {
		switch string(kv[0]) {
		case string(keys.AppliedStateKey(rangeID)):
			p, _, _, err := logstore.DecodeAppliedState(kv[1])
			if err != nil {
				return err
			}
			if p.Index != meta.GetIndex() || p.Term != meta.GetTerm() {
				return fmt.Errorf("applied state %v does not match the snapshot position %d/%d", p, meta.GetIndex(), meta.GetTerm())
			}
			sawApplied = true
		case string(keys.DescriptorKey(rangeID)):
			d, err := logstore.DecodeDescriptor(kv[1])
			if err != nil {
				return err
			}
			if !proto.Equal(d, in.desc) {
				return errors.New("the descriptor in the data differs from the header's")
			}
			sawDesc = true
		}
	}
	if !sawApplied || !sawDesc {
		return errors.New("the data lacks the applied state or the descriptor")
	}
	return nil
}

// stageSnapshotLocked stages the application of an accepted snapshot into
// the round's batch: the range's replicated state and log are replaced.
// REQUIRES: raftMu.
func (r *Replica) stageSnapshotLocked(b *storage.Batch, in *incomingSnapshot, hs *pb.HardState) logstore.SnapshotApply {
	del := func(sp keys.Span) { b.DeleteRange(sp.Start, sp.End) }
	del(keys.RangeLocalSpan(r.rangeID))
	if r.desc != nil {
		del(keys.DataSpan(r.desc))
	}
	del(keys.DataSpan(in.desc))
	for _, kv := range in.kvs {
		b.Put(kv[0], kv[1])
	}
	b.Put(keys.ReplicaIDKey(r.rangeID), logstore.EncodeReplicaID(r.replicaID))
	return r.ls.StageSnapshot(b, in.msg.GetSnapshot().GetMetadata(), hs)
}

// commitSnapshotLocked makes a durable snapshot application visible: the
// log, the applied state and the descriptor are the snapshot's.
// REQUIRES: raftMu.
func (r *Replica) commitSnapshotLocked(in *incomingSnapshot, sa logstore.SnapshotApply) error {
	r.ls.CommitSnapshot(sa)
	r.failOutlivedLocked("a snapshot replaced the log before the write applied")
	if err := r.sm.Restore(); err != nil {
		return err
	}
	r.syncDescriptorLocked()
	r.mu.Lock()
	r.mu.leaseExpiry = time.Time{}
	r.mu.Unlock()
	r.publishAppliedLocked()
	r.store.cfg.Logger.Info("applied snapshot", "range", r.rangeID, "index", in.index(), "entries", len(in.kvs))
	return nil
}

// sendSnapshot produces and streams the snapshot Raft asked for in m, and
// reports the outcome to Raft. It runs on its own goroutine.
func (s *Store) sendSnapshot(r *Replica, m *pb.Message, toNode uint64) {
	defer s.wg.Done()
	select {
	case s.snapSem <- struct{}{}:
		defer func() { <-s.snapSem }()
	case <-s.stopped:
		return
	}
	start := s.now()
	n, err := s.streamSnapshot(r, m, toNode)
	if err != nil {
		s.cfg.Logger.Warn("sending snapshot failed", "range", r.rangeID, "to_node", toNode, "to_replica", m.GetTo(), "err", err)
	} else {
		s.cfg.Logger.Info("sent snapshot", "range", r.rangeID, "to_node", toNode, "to_replica", m.GetTo(),
			"entries", n, "took", since(s.cfg.Clock, start).Round(time.Millisecond))
		s.metrics.snapshotsSent.Inc()
	}
	r.in.Lock()
	r.in.snapStatus = append(r.in.snapStatus, snapStatus{to: m.GetTo(), failed: err != nil})
	r.in.Unlock()
	s.sched.enqueue(r)
}

func (s *Store) streamSnapshot(r *Replica, m *pb.Message, toNode uint64) (uint64, error) {
	snap, err := s.cfg.Engine.NewSnapshot()
	if err != nil {
		return 0, err
	}
	defer snap.Close()
	applied, cs, err := logstore.LoadAppliedState(snap, r.rangeID)
	if err != nil {
		return 0, err
	}
	desc, err := logstore.LoadDescriptor(snap, r.rangeID)
	if err != nil {
		return 0, err
	}
	if desc == nil || cs == nil || applied.Index == 0 {
		return 0, fmt.Errorf("range %d has no applied state to snapshot", r.rangeID)
	}
	msg := proto.Clone(m).(*pb.Message)
	msg.Snapshot = &pb.Snapshot{Metadata: &pb.SnapshotMetadata{
		Index: new(applied.Index), Term: new(applied.Term), ConfState: cs,
	}}
	h := &raftrpcpb.SnapshotHeader{RangeId: r.rangeID, ToNodeId: toNode, Message: msg, RangeDescriptor: desc}
	chunkSize := s.transport.SnapshotChunkBytes()
	var count uint64
	src := func(emit func([]byte) error) (uint64, error) {
		buf := make([]byte, 0, chunkSize+4096)
		for _, sp := range keys.ReplicatedSpans(desc) {
			it, err := snap.NewIter(&storage.IterOptions{LowerBound: sp.Start, UpperBound: sp.End})
			if err != nil {
				return 0, err
			}
			for ok := it.First(); ok; ok = it.Next() {
				k, v := it.UnsafeKey(), it.UnsafeValue()
				buf = binary.LittleEndian.AppendUint32(buf, uint32(len(k)))
				buf = binary.LittleEndian.AppendUint32(buf, uint32(len(v)))
				buf = append(append(buf, k...), v...)
				count++
				if len(buf) >= chunkSize {
					s.metrics.snapshotBytesSent.Add(float64(len(buf)))
					if err := emit(buf); err != nil {
						it.Close()
						return 0, err
					}
					buf = make([]byte, 0, chunkSize+4096)
				}
			}
			err = it.Error()
			it.Close()
			if err != nil {
				return 0, err
			}
		}
		if len(buf) > 0 {
			s.metrics.snapshotBytesSent.Add(float64(len(buf)))
			if err := emit(buf); err != nil {
				return 0, err
			}
		}
		return count, nil
	}
	ctx, cancel := s.withTimeout(s.ctx, snapshotTimeout)
	defer cancel()
	return count, s.transport.SendSnapshot(ctx, h, src)
}

// snapshotTimeout bounds one snapshot transfer.
const snapshotTimeout = 30 * time.Minute
