package raft

import (
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
	err   error
}

func (s *Store) processRound(reps []*Replica) {
	s.metrics.rounds.Inc()
	res := make([]roundWork, len(reps))
	s.pool.each(len(reps), func(i int) {
		r := reps[i]
		r.raftMu.Lock()
		defer r.raftMu.Unlock()
		if r.rn == nil { // destroyed
			r.failInboxLocked()
			return
		}
		r.handleInboxLocked()
		if !r.removed {
			res[i].works, res[i].out, res[i].err = r.handleReadyLocked()
		}
		if res[i].err == nil && r.removed {
			// A configuration change removed the replica (or a peer
			// reported its removal): nothing of it matters any more.
			if err := s.destroyReplicaLocked(r); err != nil {
				res[i].err = fmt.Errorf("range %d: destroying the removed replica: %w", r.rangeID, err)
			}
			r.rn = nil
			// Its last messages still go out (they may tell the others
			// that its removal committed); its log writes do not matter.
			res[i].works = nil
			return
		}
		if res[i].err == nil && r.rn.HasReady() {
			s.sched.enqueue(r)
		}
	})
	var works []*appendWork
	byNode := make(map[uint64][]*raftrpcpb.RangeMessage)
	for i, rw := range res {
		if rw.err != nil {
			s.fatal("handling a Ready", rw.err)
			return
		}
		works = append(works, rw.works...)
		if len(rw.out) == 0 {
			continue
		}
		r := reps[i]
		r.raftMu.Lock()
		for _, m := range rw.out {
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
				byNode[rm.GetToNodeId()] = append(byNode[rm.GetToNodeId()], rm)
			}
		}
		r.raftMu.Unlock()
	}
	s.appendQ.push(works)
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
