package raft

import (
	"errors"
	"fmt"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/shaledb/shale/raft/logstore"
	"github.com/shaledb/shale/storage"
)

// One apply write per round (docs/replication.md, "The Ready loop").
//
// Applying one range's committed entries used to end with its own engine
// write, so a round that applied entries of N ranges made N writes, each a
// cgo crossing and a pass through the engine's write path, for a few
// entries each once writes spread over many ranges. Now the client writes
// of every range a worker handles in the round go to the engine together:
//
//   - A replica whose apply message holds only client writes
//     (StateMachine.Plain) stages them, with its applied state, in its own apply
//     batch as before, but does not write it. The message's completion
//     (the applied index, the responses stepped back into Raft, the
//     proposers' answers) is recorded as pending, and the replica is
//     parked: the worker keeps its raftMu when it moves on to the next
//     replica, so nothing sees the replica between staging and completion.
//   - At the end of its share of the round the worker appends every parked
//     replica's batch to one batch (storage.Batch.Append: no re-encoding),
//     writes it in one call, then completes each parked replica in the
//     order its messages came and releases it.
//   - Anything else (a configuration change, a split, a merge, a meta or
//     dedup-GC command) first writes and completes every replica parked by
//     the worker, its own pending applies included, and then applies
//     exactly as before, with its own write. So the triggers of splits
//     and merges run at the same point as before, a merge can lock its
//     right-hand replica (which the worker might otherwise hold), and a
//     replica's applied index never goes back.
//
// Each replica's writes keep their order (its batch is appended whole,
// pending applies in order), and different ranges write disjoint keys, so
// the combined write is the same state as the separate ones.

// applyGroup is one worker's parked replicas in a round.
type applyGroup struct {
	store  *Store
	batch  *storage.Batch
	parked []*Replica
}

// pendingApply is an apply message staged and not yet written.
type pendingApply struct {
	pos   logstore.LogPosition
	acks  []applied
	resps []*pb.Message
	start time.Time
}

func newApplyGroups(s *Store, n int) []*applyGroup {
	gs := make([]*applyGroup, n)
	for i := range gs {
		gs[i] = &applyGroup{store: s, batch: storage.NewBatch(64 << 10)}
	}
	return gs
}

// stageMessageLocked stages a MsgStorageApply of client writes into the
// replica's apply batch and parks the replica in its round's group.
// REQUIRES: raftMu, r.group set.
func (r *Replica) stageMessageLocked(m *pb.Message) error {
	start := r.store.now()
	ents := m.GetEntries()
	acks, _, pos, _, _, err := r.stageCommittedLocked(ents) // client writes: no descriptor changes
	if err != nil {
		return fmt.Errorf("range %d: applying entries: %w", r.rangeID, err)
	}
	r.store.metrics.entriesApplied.Add(float64(len(ents)))
	r.pending = append(r.pending, pendingApply{pos: pos, acks: acks, resps: m.GetResponses(), start: start})
	if !r.parked {
		r.parked = true
		r.group.parked = append(r.group.parked, r)
	}
	return nil
}

// finishPendingLocked completes the replica's pending applies, in order,
// once their writes are in the engine.
// REQUIRES: raftMu.
func (r *Replica) finishPendingLocked() error {
	if len(r.pending) == 0 {
		return nil
	}
	m := r.store.metrics
	for _, pa := range r.pending {
		r.ls.SetApplied(pa.pos, nil)
		r.resolveOutlivedLocked(pa.pos.Term)
		for _, resp := range pa.resps {
			if err := r.rn.Step(resp); err != nil {
				return fmt.Errorf("range %d: stepping an apply response: %w", r.rangeID, err)
			}
		}
	}
	r.publishAppliedLocked()
	now := r.store.now()
	for i, pa := range r.pending {
		m.applyLatency.Observe(now.Sub(pa.start).Seconds())
		for _, a := range pa.acks {
			if !a.p.proposedAt.IsZero() {
				m.commitLatency.Observe(pa.start.Sub(a.p.proposedAt).Seconds())
				m.writeRounds.Observe(float64(r.store.roundSeq.Load() - a.p.proposedRound))
			}
			a.p.finish(proposalResult{res: a.res, index: a.index})
		}
		r.pending[i] = pendingApply{}
	}
	r.pending = r.pending[:0]
	return nil
}

// flush writes the parked replicas' batches in one engine write, completes
// them and releases them, except cur (the replica the worker is handling,
// whose raftMu it keeps): cur is completed but stays locked. Every
// replica is released even after an error, which is fatal to the node.
func (g *applyGroup) flush(cur *Replica) error {
	if len(g.parked) == 0 {
		return nil
	}
	s := g.store
	b := g.batch
	b.Reset()
	for _, r := range g.parked {
		b.Append(r.sm.Batch())
	}
	var err error
	if !b.Empty() {
		if err = s.writeEngine(b, storage.WriteOptions{}); err != nil {
			err = fmt.Errorf("writing the applied entries of %d ranges: %w", len(g.parked), err)
		} else {
			s.metrics.applyWrites.Inc()
		}
	}
	for i, r := range g.parked {
		r.parked = false
		if err == nil {
			r.sm.Written()
			if r.rn != nil {
				err = r.finishPendingLocked()
			}
		}
		if r != cur {
			if err == nil && r.rn != nil && r.rn.HasReady() {
				s.sched.enqueue(r)
			}
			r.raftMu.Unlock()
		}
		g.parked[i] = nil
	}
	g.parked = g.parked[:0]
	if b.Len() > 1<<20 {
		// Do not keep a buffer grown by one large round.
		g.batch = storage.NewBatch(64 << 10)
	}
	return err
}

// completeBeforeApplyLocked writes and completes every replica the
// worker parked, this one's pending applies first among them, before this
// replica applies anything that is not a plain client write.
// REQUIRES: raftMu.
func (r *Replica) completeBeforeApplyLocked() error {
	if r.group != nil {
		return r.group.flush(r)
	}
	if len(r.pending) > 0 {
		return errors.New("pending applies outside a round")
	}
	return nil
}
