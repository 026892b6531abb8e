package raft

import (
	"fmt"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/shaledb/shale/api/raftrpcpb"
	"github.com/shaledb/shale/storage"
)

// The processing round (docs/replication.md, "The Ready loop").
//
// One loop drives every replica of the node. Each round takes every
// replica the scheduler has queued and, following the ordering rules of
// the etcd-io/raft README ("Usage", steps 1-4):
//
//  1. collects: each replica (in parallel on the worker pool) feeds its
//     inbox into Raft (messages, proposals, ticks, reads) and takes its
//     Ready;
//  2. persists, for ALL those replicas together, their entries,
//     HardStates and accepted snapshots in ONE engine batch with ONE fsync
//     (step 1, "Write Entries, HardState and Snapshot to persistent
//     storage": cross-range group commit). Leaders' appends and
//     heartbeats were handed to the transport just before (the thesis
//     10.2.1 exception, see splitMessagesLocked); a failed write is fatal
//     to the node, since Raft believes nothing it cannot read back;
//  3. sends the remaining messages, grouped per destination node (step 2:
//     only now is the HardState durable); snapshots go to the snapshot
//     stream;
//  4. applies committed entries (in parallel per replica; step 3) and
//     calls Advance (step 4), then publishes state and answers waiters.
//
// A replica that still has a Ready after Advance is queued for the next
// round, as is any replica that receives work meanwhile.

// batchRef wraps the round's batch so it can be reused across rounds.
type batchRef struct {
	b *storage.Batch
}

func (s *Store) processLoop() {
	defer s.wg.Done()
	b := &batchRef{b: storage.NewBatch(64 << 10)}
	for {
		reps := s.sched.next()
		if reps == nil {
			return
		}
		s.processRound(reps, b)
	}
}

func (s *Store) processRound(reps []*Replica, b *batchRef) {
	s.metrics.rounds.Inc()
	work := make([]*readyWork, len(reps))
	errs := make([]error, len(reps))

	// Phase 1: inbox into Raft, take Ready.
	s.pool.each(len(reps), func(i int) {
		r := reps[i]
		r.raftMu.Lock()
		if r.rn == nil { // destroyed
			r.failInboxLocked()
			r.raftMu.Unlock()
			return
		}
		r.handleInboxLocked()
		if r.removed {
			// Removed without applying its removal (a peer told it): no
			// Ready of this replica matters any more.
			if err := s.destroyReplicaLocked(r); err != nil {
				errs[i] = fmt.Errorf("range %d: destroying the removed replica: %w", r.rangeID, err)
			}
			r.rn = nil
			r.raftMu.Unlock()
			return
		}
		if !r.rn.HasReady() {
			r.raftMu.Unlock()
			return
		}
		w := &readyWork{r: r}
		if err := r.takeReadyLocked(w); err != nil {
			errs[i] = err
		}
		work[i] = w
	})
	ready := work[:0]
	for i, w := range work {
		if errs[i] != nil {
			s.fatal("taking a Ready", errs[i])
		}
		if w != nil {
			ready = append(ready, w)
		}
	}
	if len(ready) == 0 {
		return
	}

	// Leaders' appends may go out while their own entries are written,
	// and entries durable before this round may be applied (see
	// splitMessagesLocked and splitCommittedLocked).
	s.sendMessages(ready, true)
	s.pool.each(len(ready), func(i int) {
		if err := ready[i].r.applyEarlyLocked(ready[i]); err != nil {
			errs[i] = err
		}
	})
	for _, err := range errs[:len(ready)] {
		if err != nil {
			s.fatal("applying committed entries", err)
		}
	}

	// Phase 2: one batch, one fsync, for every range.
	b.b.Reset()
	sync := false
	for _, w := range ready {
		w.r.stageLocked(w, b)
		sync = sync || w.rd.MustSync || w.snap != nil
	}
	if !b.b.Empty() {
		s.metrics.logBatchBytes.Observe(float64(b.b.Len()))
		if err := s.cfg.Engine.Write(b.b, storage.WriteOptions{Sync: sync}); err != nil {
			s.fatal("writing the Raft log", err)
		}
		if sync {
			s.metrics.logSyncs.Inc()
		}
	}
	for _, w := range ready {
		if err := w.r.commitStagedLocked(w); err != nil {
			s.fatal("loading state after a snapshot", err)
		}
	}

	// Phase 3: everything else, now that the HardState is durable.
	s.sendMessages(ready, false)

	// Phase 4: apply, advance, publish.
	s.pool.each(len(ready), func(i int) {
		w := ready[i]
		r := w.r
		defer r.raftMu.Unlock()
		if err := r.finishReadyLocked(w); err != nil {
			errs[i] = err
			return
		}
		if r.removed {
			if err := s.destroyReplicaLocked(r); err != nil {
				errs[i] = fmt.Errorf("range %d: destroying the removed replica: %w", r.rangeID, err)
			}
			r.rn = nil
			return
		}
		if r.rn.HasReady() {
			s.sched.enqueue(r)
		}
	})
	for _, err := range errs[:len(ready)] {
		if err != nil {
			s.fatal("applying committed entries", err)
		}
	}
}

// sendMessages hands the early or late messages of every Ready to the
// transport, one call per destination node. MsgSnap messages start a
// snapshot transfer instead.
// REQUIRES: the replicas' raftMu.
func (s *Store) sendMessages(ready []*readyWork, early bool) {
	byNode := make(map[uint64][]*raftrpcpb.RangeMessage)
	for _, w := range ready {
		r := w.r
		msgs := w.late
		if early {
			msgs = w.early
		}
		for _, m := range msgs {
			to := r.nodeForLocked(m.GetTo())
			if to == 0 || to == s.cfg.NodeID {
				r.rn.ReportUnreachable(m.GetTo())
				continue
			}
			if m.GetType() == pb.MsgSnap {
				s.wg.Add(1)
				go s.sendSnapshot(r, m, to)
				continue
			}
			rm := &raftrpcpb.RangeMessage{RangeId: r.rangeID, FromNodeId: s.cfg.NodeID, ToNodeId: to, Message: m}
			if m.GetType() == pb.MsgHeartbeat {
				// Lets a node that has no replica yet create it (a new
				// learner) when its leader first reaches it.
				rm.Descriptor_ = r.desc
			}
			byNode[to] = append(byNode[to], rm)
		}
	}
	for node, msgs := range byNode {
		s.metrics.messagesSent.Add(float64(len(msgs)))
		s.transport.Send(node, msgs)
	}
}

// fatal stops the node: it cannot continue without risking its replicas'
// safety (a log write it cannot make, state it cannot read).
func (s *Store) fatal(what string, err error) {
	s.cfg.Fatal(what, fmt.Errorf("%w: %w", errFatal, err))
}
