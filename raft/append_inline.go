package raft

import (
	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// Appends with nothing to write (docs/replication.md, "What a write costs
// as ranges multiply").
//
// Raft hands the log writer a MsgStorageAppend whenever its HardState
// changes, and a range's commit index moves at every commit: on the leader
// when a follower's acknowledgement arrives, on a follower when an append,
// a commit notice or a heartbeat brings the new index. The commit index is
// not written (logstore.StageAppend), so when nothing else changed such a
// message writes nothing, but it still went through the log writer's queue
// (behind the fsync of whatever batch was being written) and back: two
// takings of the replica's raftMu there, and one more visit of the replica
// by a round to continue. With one range that is paid once for many writes;
// with a quarter of a write in flight per range it is paid for about every
// write, on every replica, and it was the most common visit after ticks.
//
// Such a message is completed at once instead, in the Ready that produced
// it, when nothing of the replica is queued for or being written by the
// log writer: its responses to peers leave with the round's messages, and
// it is as durable as it will ever be. Order is kept: every earlier
// append of the replica is durable and its responses delivered (the log
// writer does both under raftMu before it counts the append done).

// completeEmptyAppendLocked completes m, a MsgStorageAppend, if it has
// nothing to write and nothing to tell Raft: no entries, no snapshot, a
// HardState (if any) whose term and vote are those held, and no response
// addressed to the replica itself (those acknowledge entries or a
// snapshot). It reports whether it did, with the responses for peers.
// REQUIRES: raftMu; no append of the replica queued for or in the log
// writer (r.logWrites == 0 and none produced in this visit).
func (r *Replica) completeEmptyAppendLocked(m *pb.Message) (bool, []*pb.Message) {
	if len(m.GetEntries()) > 0 || (m.GetSnapshot() != nil && !etcdraft.IsEmptySnap(m.GetSnapshot())) {
		return false, nil
	}
	for _, resp := range m.GetResponses() {
		if resp.GetTo() == r.replicaID {
			return false, nil
		}
	}
	if m.Term != nil {
		hs := &pb.HardState{Term: new(m.GetTerm()), Vote: new(m.GetVote()), Commit: new(m.GetCommit())}
		if !r.ls.TakeCommit(hs) {
			return false, nil
		}
	}
	return true, m.GetResponses()
}
