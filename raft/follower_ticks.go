package raft

import etcdraft "go.etcd.io/raft/v3"

// Follower ticks in batches (docs/replication.md, "Visits per write: what
// multiplies").
//
// Every awake replica used to be visited by a round at every tick, to
// hand Raft its tick. A follower's tick only moves its election timer,
// and a busy follower hears from its leader within the tick anyway, so
// that visit was, at 256 busy ranges, the most common of all. Now a
// follower that knows its leader has its ticks counted in its inbox and
// is queued for them alone only every followerTickBatch ticks; any
// earlier visit (a message, a proposal) hands them to Raft first, as
// before.
//
// Counting ticks late never makes a follower count time that did not
// pass: its election timer runs behind, never ahead, so it campaigns and
// grants (pre-)votes no earlier than before and the leader lease
// (read.go) keeps its guarantee. What it costs is noticing a silent
// leader up to followerTickBatch-1 ticks later, against an election
// timeout of ElectionTicks to twice that. A tick in which the node saw a
// peer node go silent queues every replica as before.

// followerTickBatch is how many ticks a follower collects before it is
// queued for them alone.
const followerTickBatch = 3

// followsLeader reports whether the replica is a follower that knows its
// leader, as last published by its round.
func (r *Replica) followsLeader() bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.mu.state == etcdraft.StateFollower && r.mu.leader != 0
}
