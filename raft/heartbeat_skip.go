package raft

import (
	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
)

// Heartbeats of busy ranges (docs/replication.md, "Many busy ranges").
//
// Raft's leader heartbeats every follower every HeartbeatTicks, busy or
// not, and each heartbeat costs a message each way, a visit of the range
// on both nodes and, on the follower, often a HardState write. That cost
// is per range and per tick: at 256 busy ranges it was more messages per
// write than the writes' own appends. But an append does for a follower
// everything an ordinary heartbeat does: the follower resets its election
// timer and learns the leader and its commit index from it, and its answer
// marks it active for the leader's quorum check. So a heartbeat without a
// read-index context to a follower the range sent an append to since the
// previous tick is not sent.
//
// Raft tolerates the loss of any message, so this is safe; what it must
// not do is stop the range's own recovery. A follower that is not
// replicating normally (probing, catching up by snapshot, not recently
// active) keeps its heartbeats: their answers are what make the leader
// resume appends to it. A heartbeat is skipped only within one tick of an
// append, so once appends stop, heartbeats resume at the next tick. A
// heartbeat carrying a read-index context is always sent: reads and the
// leader lease (read.go) wait for its answers.

// skipBusyHeartbeatsLocked drops from out (one replica's messages of a
// round, after coalesceAppends) the heartbeats that an append since the
// last tick makes redundant, records this round's appends, and returns the
// messages kept and how many were dropped.
// REQUIRES: raftMu.
func (r *Replica) skipBusyHeartbeatsLocked(out []*pb.Message, tick uint64) ([]*pb.Message, int) {
	hasHB := false
	for _, m := range out {
		switch m.GetType() {
		case pb.MsgApp:
			if r.appSentTick == nil {
				r.appSentTick = make(map[uint64]uint64, 2)
			}
			r.appSentTick[m.GetTo()] = tick
		case pb.MsgHeartbeat:
			hasHB = hasHB || len(m.GetContext()) == 0
		}
	}
	if !hasHB || r.rn == nil {
		return out, 0
	}
	dropped := 0
	for i, m := range out {
		if m.GetType() != pb.MsgHeartbeat || len(m.GetContext()) != 0 {
			continue
		}
		sent, ok := r.appSentTick[m.GetTo()]
		if !ok || sent+1 < tick || !r.replicatingLocked(m.GetTo()) {
			continue
		}
		out[i] = nil
		dropped++
	}
	if dropped == 0 {
		return out, 0
	}
	return dropNil(out), dropped
}

// replicatingLocked reports whether this leader streams appends to peer
// normally: the peer is recently active and in StateReplicate.
// REQUIRES: raftMu.
func (r *Replica) replicatingLocked(peer uint64) bool {
	ok := false
	r.rn.WithProgress(func(id uint64, _ etcdraft.ProgressType, pr tracker.Progress) {
		if id == peer {
			ok = pr.State == tracker.StateReplicate && pr.RecentActive
		}
	})
	return ok
}

// peerHoldsReplicaLocked reports whether peer is known to hold its
// replica of the range: this leader tracks it as recently active with
// entries acknowledged. Anything else (not the leader, a new learner, a
// peer gone silent, whose node may have lost the replica) is unknown.
// REQUIRES: raftMu.
func (r *Replica) peerHoldsReplicaLocked(peer uint64) bool {
	if r.rn == nil {
		return false
	}
	ok := false
	r.rn.WithProgress(func(id uint64, _ etcdraft.ProgressType, pr tracker.Progress) {
		if id == peer {
			ok = pr.Match > 0 && pr.RecentActive
		}
	})
	return ok
}
