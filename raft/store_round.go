package raft

import (
	"errors"
	"fmt"

	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/shaledb/shale/api/raftrpcpb"
)

// The processing round (docs/replication.md, "The Ready loop").
//
// One loop drives every replica of the node. Each round takes every
// replica the scheduler has queued and, on the worker pool (a fixed set of
// goroutines, not one per range), feeds each one's inbox into its RawNode
// (messages, proposals, ticks, reads) and handles its Readys
// (replica_ready.go): committed entries are applied at once, log writes
// are queued for the log writer (logwriter.go), which persists those of
// every range with one fsync, and messages for peers are collected. The
// round then hands the log writes over and sends the messages, grouped
// per destination node, and is done: it never waits for a disk write, so
// proposals, acknowledgements and commits keep flowing while the previous
// writes sync. A replica that receives work, or whose write completed, is
// queued for the next round.

func (s *Store) processLoop() {
	defer s.wg.Done()
	for {
		reps := s.sched.next()
		if reps == nil {
			return
		}
		s.processRound(reps)
	}
}

// roundWork is one replica's output of a round.
type roundWork struct {
	works []*appendWork
	out   []*pb.Message
	// quiesce are the quiesce heartbeats of a leader putting its range to
	// sleep (quiesce.go), ready for the transport.
	quiesce []*raftrpcpb.RangeMessage
	err     error
}

func (s *Store) processRound(reps []*Replica) {
	s.metrics.rounds.Inc()
	s.roundSeq.Add(1)
	res := make([]roundWork, len(reps))
	// Each worker takes every n-th replica, so that it can write the
	// applied client writes of all of them at once (apply_round.go). A
	// worker takes at least replicasPerWorker replicas: handling one
	// replica's Ready takes microseconds, about what handing work to
	// another goroutine costs, and fewer workers make fewer apply writes.
	n := min(len(s.applyGroups), (len(reps)+replicasPerWorker-1)/replicasPerWorker)
	groupErrs := make([]error, n)
	s.pool.each(n, func(w int) {
		g := s.applyGroups[w]
		for i := w; i < len(reps); i += n {
			s.processReplica(reps[i], &res[i], g)
		}
		groupErrs[w] = g.flush(nil)
	})
	for _, err := range groupErrs {
		if err != nil {
			s.fatal("applying committed entries", err)
			return
		}
	}
	var works []*appendWork
	heartbeats := 0
	byNode := make(map[uint64][]*raftrpcpb.RangeMessage)
	for i, rw := range res {
		if rw.err != nil {
			s.fatal("handling a Ready", rw.err)
			return
		}
		works = append(works, rw.works...)
		for _, rm := range rw.quiesce {
			byNode[rm.GetToNodeId()] = append(byNode[rm.GetToNodeId()], rm)
			heartbeats++
		}
		if len(rw.out) == 0 {
			continue
		}
		r := reps[i]
		out, dropped := coalesceAppends(rw.out) // coalesce.go
		if dropped > 0 {
			s.metrics.messagesCoalesced.Add(float64(dropped))
		}
		r.raftMu.Lock()
		out, dropped = r.skipBusyHeartbeatsLocked(out, s.ticks.Load()) // heartbeat_skip.go
		if dropped > 0 {
			s.metrics.heartbeatsSkipped.Add(float64(dropped))
		}
		for _, m := range out {
			if m.GetType() == pb.MsgSnap {
				if r.rn == nil {
					continue
				}
				if to := r.nodeForLocked(m.GetTo()); to != 0 && to != s.cfg.NodeID {
					s.wg.Add(1)
					go s.sendSnapshot(r, m, to)
				} else {
					r.rn.ReportSnapshot(m.GetTo(), etcdraft.SnapshotFailure)
				}
				continue
			}
			if rm := r.rangeMessageLocked(m); rm != nil {
				rm.CommitOnly = r.markCommitOnlyLocked(m) // commit_notice.go
				byNode[rm.GetToNodeId()] = append(byNode[rm.GetToNodeId()], rm)
				if t := m.GetType(); t == pb.MsgHeartbeat || t == pb.MsgHeartbeatResp {
					heartbeats++
				}
			}
		}
		r.raftMu.Unlock()
	}
	s.metrics.heartbeatsSent.Add(float64(heartbeats))
	s.sendEarlyAcks(works) // a planted bug, off unless a test plants it
	s.appendQ.push(works)
	for node, msgs := range byNode {
		s.metrics.messagesSent.Add(float64(len(msgs)))
		if f := s.cfg.Testing.OnSend; f != nil {
			f(s.cfg.NodeID, msgs)
		}
		s.transport.Send(node, msgs)
	}
}

// replicasPerWorker is the fewest replicas a round hands each worker.
const replicasPerWorker = 4

// processReplica feeds r's inbox into Raft and handles its Readys. r's
// raftMu is released on return unless r is parked in g with applies to
// write (g.flush releases it).
func (s *Store) processReplica(r *Replica, rw *roundWork, g *applyGroup) {
	s.metrics.visits.Inc()
	r.raftMu.Lock()
	if r.rn == nil { // destroyed
		r.failInboxLocked()
		r.raftMu.Unlock()
		return
	}
	r.group = g
	defer func() {
		r.group = nil
		if !r.parked {
			r.raftMu.Unlock()
		}
	}()
	r.handleInboxLocked()
	if !r.removed {
		rw.works, rw.out, rw.err = r.handleReadyLocked()
	}
	rw.out = append(rw.out, r.wakeOut...)
	r.wakeOut = nil
	if rw.err == nil && !r.removed {
		rw.out = r.holdNoticesLocked(rw.out, s.ticks.Load()) // commit_notice.go
	}
	for _, m := range r.quiesceOut {
		if rm := r.rangeMessageLocked(m); rm != nil {
			rm.RangeDescriptor = nil // the follower holds the range already
			rm.Quiesce = true
			rw.quiesce = append(rw.quiesce, rm)
		}
	}
	clear(r.quiesceOut)
	r.quiesceOut = r.quiesceOut[:0]
	if rw.err == nil && r.removed {
		// A configuration change removed the replica (or a peer
		// reported its removal): nothing of it matters any more, but
		// what it staged is written first.
		if err := r.completeBeforeApplyLocked(); err != nil {
			rw.err = fmt.Errorf("range %d: %w", r.rangeID, err)
			return
		}
		// Its log writes do not matter any more: this round's are
		// dropped. Those of earlier rounds may be staged in the log
		// writer's batch: destroying now would let that batch write
		// them back after the deletion. The log writer schedules the
		// replica again once they are written.
		r.logWrites -= len(rw.works)
		rw.works = nil
		if r.logWrites > 0 {
			return
		}
		if err := s.destroyReplicaLocked(r); err != nil {
			rw.err = fmt.Errorf("range %d: destroying the removed replica: %w", r.rangeID, err)
		}
		r.rn = nil
		// Its last messages still go out (they may tell the others
		// that its removal committed).
		return
	}
	if rw.err == nil && !r.parked && r.rn.HasReady() {
		s.sched.enqueue(r)
	}
}

// fatal stops the node: it cannot continue without risking its replicas'
// safety (a log write it cannot make, state it cannot read).
func (s *Store) fatal(what string, err error) {
	if errors.Is(err, ErrStopped) {
		// A write that waited for disk space when the store stopped
		// (diskfull.go): nothing of it was acknowledged, and the node
		// is stopping anyway.
		s.cfg.Logger.Warn("stopped while waiting for disk space", "write", what, "err", err)
		return
	}
	s.cfg.Fatal(what, fmt.Errorf("%w: %w", errFatal, err))
}
