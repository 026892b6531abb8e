package raft

import (
	etcdraft "go.etcd.io/raft/v3"
)

// Campaigning together (docs/unavailability.md). When a node's leader of
// several ranges goes silent, each of this node's replicas of them
// campaigns when its own randomized election timeout runs out: a write
// that needs two of those ranges (a user range and meta, whose leader
// runs the timestamp oracle) waits for the later of independent random
// draws. Instead, once one replica here starts an election in place of a
// leader on node D, and D has sent this node nothing for an election
// timeout less a tick, every other replica here that still follows a
// leader on D campaigns too, on the same draw.
//
// This does not weaken the leader lease (read.go): a vote is still
// granted only by voters that have not heard from the leader for an
// election timeout (CheckQuorum), and the campaigns here are pre-votes
// first (PreVote), which such a voter ignores without disturbing
// anything. D's silence is a node-wide fact (every range's messages and
// the node heartbeats share it), so a range whose leader still speaks is
// not asked to elect.

// campaignTogetherLocked asks this node's other replicas following a
// leader on the node of replica leader (of this range) to campaign, if
// that node is not live.
// REQUIRES: raftMu.
func (r *Replica) campaignTogetherLocked(leader uint64) {
	s := r.store
	d := r.nodeForLocked(leader)
	if d == 0 || d == s.cfg.NodeID {
		return
	}
	if s.nodeLive(d) {
		return
	}
	s.mu.RLock()
	all := make([]*Replica, 0, len(s.mu.replicas))
	for _, o := range s.mu.replicas {
		all = append(all, o)
	}
	s.mu.RUnlock()
	for _, o := range all {
		if o == r || o.LeaderNodeID() != d {
			continue
		}
		o.in.Lock()
		o.in.campaignFrom = d
		o.in.Unlock()
		s.sched.enqueue(o)
	}
}

// campaignWithLocked campaigns if this replica still follows a leader on
// node d (campaignTogetherLocked).
// REQUIRES: raftMu.
func (r *Replica) campaignWithLocked(d uint64) {
	bs := r.rn.BasicStatus()
	if bs.RaftState != etcdraft.StateFollower || bs.Lead == 0 || r.nodeForLocked(bs.Lead) != d {
		return
	}
	r.store.cfg.Logger.Debug("campaigning with another range's election", "range", r.rangeID, "replica", r.replicaID, "silent_node", d)
	r.campaignedWith = true
	_ = r.rn.Campaign()
}
