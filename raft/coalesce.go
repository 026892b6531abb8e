package raft

import (
	pb "go.etcd.io/raft/v3/raftpb"
)

// coalesceAppends drops from out, one range's messages of a round in the
// order Raft produced them, every MsgApp without entries that a later
// MsgApp to the same peer follows.
//
// A leader sends an empty MsgApp to tell a follower its commit index moved
// (or to probe it), and then, often in the same round, a MsgApp with the
// entries just proposed, which carries the commit index too (Raft's commit
// index only grows, so the later message's is at least the earlier's). The
// empty one then costs a message each way and, on the follower, a
// HardState write for nothing; with many ranges each busy range pays it
// every round. Dropping it is safe: Raft tolerates the loss of any message,
// and this one says nothing the later message does not. Appends with
// entries, and every other type (heartbeats carry read-index contexts and
// keep leases), are kept.
func coalesceAppends(out []*pb.Message) ([]*pb.Message, int) {
	if len(out) < 2 {
		return out, 0
	}
	var later map[uint64]bool // peers a later MsgApp goes to
	dropped := 0
	for i := len(out) - 1; i >= 0; i-- {
		m := out[i]
		if m.GetType() != pb.MsgApp {
			continue
		}
		if len(m.GetEntries()) == 0 && later[m.GetTo()] {
			out[i] = nil
			dropped++
			continue
		}
		if later == nil {
			later = make(map[uint64]bool, 2)
		}
		later[m.GetTo()] = true
	}
	if dropped == 0 {
		return out, 0
	}
	return dropNil(out), dropped
}

// dropNil compacts out in place, keeping the order of its non-nil
// messages, and clears the tail so the dropped ones can be collected.
func dropNil(out []*pb.Message) []*pb.Message {
	kept := out[:0]
	for _, m := range out {
		if m != nil {
			kept = append(kept, m)
		}
	}
	clear(out[len(kept):])
	return kept
}
