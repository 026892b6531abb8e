package raft

import (
	"time"

	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/raft/keys"
)

// Quiescence (docs/replication.md, "Quiescence"): a range with no traffic
// stops ticking and heartbeating once all its replicas agree it is at
// rest, so that an idle range costs no CPU and no messages.
//
//   - The leader puts the range to sleep on a tick, instead of ticking,
//     once it has been idle for quiesceIdleTicks ticks with nothing to
//     send: every entry committed, applied and held by every follower,
//     no proposal, read, transfer, configuration change or merge freeze
//     under way, no lease read recently, meta holding its descriptor. It
//     sends each follower a quiesce heartbeat (a MsgHeartbeat marked
//     quiesce on the wire) instead of the tick's heartbeat.
//   - A follower that holds everything the heartbeat says is committed,
//     and has nothing else to do, goes to sleep without stepping it (no
//     answer). Any other follower steps it as an ordinary heartbeat: its
//     answer wakes the leader, which tries again later.
//   - A sleeping replica wakes on any work but a tick: a proposal, a read
//     that needs a round, any Raft message, a snapshot, a transfer. A
//     follower woken by anything but its leader's own message tells the
//     leader (a heartbeat response), so that the leader does not sleep
//     on while a follower counts towards an election.
//   - A sleeping follower whose leader's node stops sending node
//     heartbeats (liveness.go) is woken by the ticker.
//
// Ticks not counted while asleep. Raft's followers count ticks since they
// last heard from their leader: with CheckQuorum they refuse to vote for
// another candidate until an election timeout of them has passed, which
// is what the leader lease relies on (read.go). A follower woken while its
// leader's node is not live (or by a vote request from its own leader,
// which means that replica lost its leadership, e.g. in a restart) counts
// the ticks it slept through: the node's ticker's ticks since it went to
// sleep, at most ElectionTicks-1, so it grants votes and campaigns about
// as soon as it would have without sleeping. They are the very ticks it
// would have counted awake, so the follower's promise holds as before and
// the lease stays correct. A follower woken while its
// leader's node is live counts none: sleeping then delays its vote, never
// hastens it. Leaders count none either.

// quiesceIdleTicks is how many ticks a leader waits with nothing
// happening before it puts its range to sleep, so that a range written
// every few ticks does not sleep and wake between writes.
const quiesceIdleTicks = 3

// maybeQuiesceLeaderLocked puts the range to sleep if this replica is
// its leader and the range is at rest, and reports whether it did. It is
// called on a round that brought ticks and no other work, before ticking.
// REQUIRES: raftMu.
func (r *Replica) maybeQuiesceLeaderLocked(now time.Time) bool {
	if !r.atRestLocked() || r.idleTicks < quiesceIdleTicks {
		return false
	}
	st := r.rn.BasicStatus()
	if st.RaftState != etcdraft.StateLeader || st.LeadTransferee != 0 {
		return false
	}
	last := r.ls.Last().Index
	if st.GetCommit() != last || r.ls.Applied().Index != last || isJoint(r.desc) {
		return false
	}
	r.mu.RLock()
	recentRead := now.Sub(r.mu.lastLeaseRead) < 2*r.store.cfg.leaseDuration()
	r.mu.RUnlock()
	if recentRead || r.store.DiskStalled(now) {
		// Keep renewing the lease for a read load; keep shedding the
		// leadership from a stalled disk (diskstall.go).
		return false
	}
	caughtUp := true
	var followers []uint64
	r.rn.WithProgress(func(id uint64, _ etcdraft.ProgressType, pr tracker.Progress) {
		if id == r.replicaID {
			return
		}
		followers = append(followers, id)
		// RecentActive: the quorum check after waking must find the
		// followers active, as it did before sleeping.
		if pr.Match != last || pr.State != tracker.StateReplicate || !pr.RecentActive {
			caughtUp = false
		}
	})
	if !caughtUp || !r.metaSettledLocked(now) {
		return false
	}
	for _, id := range followers {
		r.quiesceOut = append(r.quiesceOut, &pb.Message{
			Type: pb.MsgHeartbeat.Enum(), To: new(id), From: new(r.replicaID),
			Term: new(st.GetTerm()), Commit: new(last),
		})
	}
	r.sleepLocked(r.store.cfg.NodeID)
	return true
}

// maybeQuiesceFollowerLocked puts the range to sleep on this follower if
// the quiesce heartbeat m from its leader finds it holding, and having
// applied, everything the leader committed, with nothing else to do, and
// reports whether it did.
// REQUIRES: raftMu.
func (r *Replica) maybeQuiesceFollowerLocked(m *pb.Message, fromNode uint64) bool {
	if !r.atRestLocked() {
		return false
	}
	st := r.rn.BasicStatus()
	c := m.GetCommit()
	if st.RaftState != etcdraft.StateFollower || st.GetTerm() != m.GetTerm() || st.Lead != m.GetFrom() ||
		st.GetCommit() != c || r.ls.Last().Index != c || r.ls.Applied().Index != c {
		return false
	}
	if fromNode == 0 {
		fromNode = r.nodeForLocked(m.GetFrom())
	}
	r.sleepLocked(fromNode)
	return true
}

// atRestLocked reports whether nothing of the replica's own is under way.
// REQUIRES: raftMu.
func (r *Replica) atRestLocked() bool {
	return !r.store.cfg.DisableQuiescence && r.desc != nil && !r.removed && r.frozen == nil &&
		len(r.proposals) == 0 && len(r.readRounds) == 0 && len(r.ccPending) == 0 &&
		r.logWrites == 0 && len(r.pending) == 0 && len(r.deferredApply) == 0 && len(r.snaps) == 0 &&
		!r.rn.HasReady()
}

// sleepLocked marks the replica asleep; leaderNode is the node of its
// leader (its own for a leader), which the ticker watches.
// REQUIRES: raftMu.
func (r *Replica) sleepLocked(leaderNode uint64) {
	r.quiescedTick = r.store.ticks.Load()
	r.sleepLeaderNode.Store(leaderNode)
	r.asleep.Store(true)
	r.store.setAwake(r, false)
	r.store.metrics.quiescent.Inc()
	r.store.metrics.quiesces.Inc()
	r.releaseMemoryLocked()
}

// releaseMemoryLocked frees what a replica keeps for its next round, as
// it goes to rest (docs/replication.md, "Memory per replica"): the entry
// cache (every entry is durable here, and, on a leader, held by every
// follower; a read after waking goes to the engine), the buffers reused
// between rounds, and the state machine's apply batch. Nothing here is
// state: each is built again on first use.
// REQUIRES: raftMu, the replica at rest (atRestLocked).
func (r *Replica) releaseMemoryLocked() {
	r.ls.ReleaseCache()
	r.appliedBuf = nil
	// A map keeps the room it grew to; an empty one costs a header.
	r.proposals = make(map[uint64]*proposal)
	r.pending, r.ccPending, r.readRounds, r.deferredApply, r.snaps = nil, nil, nil, nil, nil
	if len(r.splits) == 0 {
		r.splits = nil
	}
	if len(r.merges) == 0 {
		r.merges = nil
	}
	r.sm.Rest()
}

// wakeLocked wakes a sleeping replica for the work in msgs (its inbox's
// messages) or because its leader's node is not live (leaderDead), and
// counts the ticks slept through when its leader is gone (see above).
// REQUIRES: raftMu, r asleep.
func (r *Replica) wakeLocked(msgs []*pb.Message, leaderDead bool) {
	// Into the ticked set before the flag clears: a tick between the two
	// sees a replica still asleep and skips it, where the other order
	// could leave an awake replica unticked.
	r.store.setAwake(r, true)
	r.asleep.Store(false)
	r.idleTicks = 0
	r.store.metrics.quiescent.Dec()
	r.store.metrics.wakes.Inc()
	st := r.rn.BasicStatus()
	if st.RaftState == etcdraft.StateLeader || st.Lead == etcdraft.None {
		return
	}
	fromLeader, leaderCampaigns := false, false
	for _, m := range msgs {
		if m.GetFrom() != st.Lead {
			continue
		}
		switch m.GetType() {
		case pb.MsgPreVote, pb.MsgVote:
			leaderCampaigns = true
		default:
			fromLeader = true
		}
	}
	if leaderDead || leaderCampaigns || !r.store.nodeLive(r.sleepLeaderNode.Load()) {
		n := int(min(r.store.ticks.Load()-r.quiescedTick, uint64(r.store.cfg.ElectionTicks-1)))
		for i := 0; i < n; i++ {
			r.rn.TickQuiesced()
		}
	}
	if !fromLeader {
		r.wakeOut = append(r.wakeOut, &pb.Message{
			Type: pb.MsgHeartbeatResp.Enum(), To: new(st.Lead), From: new(r.replicaID), Term: new(st.GetTerm()),
		})
	}
}

// forgetSleepLocked takes a destroyed replica out of the count of
// sleeping ones.
// REQUIRES: raftMu.
func (r *Replica) forgetSleepLocked() {
	if r.asleep.CompareAndSwap(true, false) {
		r.store.metrics.quiescent.Dec()
	}
}

// noteActivityLocked restarts the idle count when the log grew or work
// came in.
// REQUIRES: raftMu.
func (r *Replica) noteActivityLocked(work bool) {
	if last := r.ls.Last().Index; work || last != r.idleLast {
		r.idleLast = last
		r.idleTicks = 0
	}
}

// metaSettledLocked reports whether meta holds the range's current
// descriptor, so that the range may sleep without its periodic meta
// check (maintenanceLocked): the update that follows a replica change is
// best effort. When meta is behind, it starts the repair (at most once
// per MetaCheckInterval) and the range stays awake.
// REQUIRES: raftMu.
func (r *Replica) metaSettledLocked(now time.Time) bool {
	gen := r.desc.GetGeneration()
	if r.rangeID == keys.MetaRangeID || r.metaOKGen == gen {
		return true
	}
	if _, err := r.store.Replica(keys.MetaRangeID); err == nil {
		old, err := r.store.cfg.StateMachines.Meta().Descriptor(r.rangeID)
		if err == nil && old != nil && old.GetGeneration() >= gen {
			r.metaOKGen = gen
			return true
		}
	} else if r.store.getRemoteMeta() == nil || r.metaPushed.Load() >= gen {
		r.metaOKGen = gen
		return true
	}
	if now.Sub(r.lastMetaCheck) >= r.store.cfg.MetaCheckInterval {
		r.lastMetaCheck = now
		r.reconcileMetaLocked()
	}
	return false
}

// isJoint reports whether desc is a joint configuration (Raft leaves it
// with an entry of its own).
func isJoint(desc *kvpb.RangeDescriptor) bool {
	for _, rd := range desc.GetReplicas() {
		switch rd.GetType() {
		case kvpb.ReplicaType_REPLICA_TYPE_VOTER, kvpb.ReplicaType_REPLICA_TYPE_LEARNER:
		default:
			return true
		}
	}
	return false
}

// quiesceRepeatLocked reports whether qmsgs, quiesce heartbeats that
// reached a sleeping replica with no other work, change nothing: each
// comes from the leader it sleeps under, at its term and commit index (a
// repeat, or the heartbeat that arrived twice). None at all qualifies.
// REQUIRES: raftMu.
func (r *Replica) quiesceRepeatLocked(qmsgs []*pb.Message) bool {
	if len(qmsgs) == 0 {
		return true
	}
	st := r.rn.BasicStatus()
	for _, m := range qmsgs {
		if st.RaftState != etcdraft.StateFollower || m.GetFrom() != st.Lead || m.GetTerm() != st.GetTerm() ||
			m.GetCommit() != st.GetCommit() {
			return false
		}
	}
	return true
}
