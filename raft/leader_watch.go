package raft

import "context"

// A caller waiting on a remote replica it believes leads a range (the
// node's timestamp-oracle client waiting on meta's leader) can stop
// waiting once this replica learns of another leader, without polling
// Status: LeaderWatch gives it a context cancelled at the next change of
// the leader this replica knows. One context serves every caller until
// that change, so watching costs a caller no goroutine; a caller that
// wants a callback registers it with context.AfterFunc and calls its stop
// function when done.

// LeaderWatch returns the node of the leader this replica knows now (0
// if none) and a context cancelled when that leader next changes (a new
// leader, or none after a known one). The context never carries a
// deadline or values; its Err is context.Canceled once the leader moved.
func (r *Replica) LeaderWatch() (leaderNodeID uint64, moved context.Context) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return nodeOfReplica(r.mu.desc, r.mu.leader), r.mu.leaderMoved
}

// LeaderNodeID returns the node of the leader this replica knows now, 0
// if none: Status without copying the descriptor.
func (r *Replica) LeaderNodeID() uint64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return nodeOfReplica(r.mu.desc, r.mu.leader)
}

// noteLeaderLocked cancels the watch context when the published leader
// changes to lead, and makes the next one. The first publish makes the
// first context.
// REQUIRES: mu held for writing.
func (r *Replica) noteLeaderLocked(lead uint64) {
	if r.mu.leaderMoved != nil && lead == r.mu.leader {
		return
	}
	if r.mu.cancelLeaderMoved != nil {
		r.mu.cancelLeaderMoved()
	}
	r.mu.leaderMoved, r.mu.cancelLeaderMoved = context.WithCancel(context.Background())
}
