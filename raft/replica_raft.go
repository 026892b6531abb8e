package raft

import (
	"errors"
	"fmt"
	"slices"
	"time"

	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/raft/apply"
	"github.com/shaledb/shale/raft/keys"
)

// handleInboxLocked feeds everything queued for the replica into Raft
// (phase 1 of a round).
// REQUIRES: raftMu.
func (r *Replica) handleInboxLocked() {
	r.in.Lock()
	msgs, from, notices := r.in.msgs, r.in.from, r.in.notices
	qmsgs, qfrom, leaderDead := r.in.quiesce, r.in.qfrom, r.in.leaderDead
	props, reads := r.in.props, r.in.reads
	ticks := r.in.ticks
	snaps, statuses, unreachable := r.in.snaps, r.in.snapStatus, r.in.unreachable
	transferTo, inspect, removedBy := r.in.transferTo, r.in.inspect, r.in.removedBy
	campaignFrom := r.in.campaignFrom
	r.in.campaignFrom = 0
	r.in.msgs, r.in.from, r.in.props, r.in.reads = nil, nil, nil, nil
	r.in.notices = nil
	r.in.quiesce, r.in.qfrom, r.in.leaderDead = nil, nil, false
	r.in.ticks, r.in.snaps, r.in.snapStatus, r.in.unreachable = 0, nil, nil, nil
	r.in.transferTo, r.in.inspect, r.in.removedBy = 0, nil, nil
	r.in.Unlock()

	// Quiescence (quiesce.go): a sleeping replica ignores ticks and wakes
	// for anything else; an idle leader sleeps instead of ticking; a
	// follower told to sleep does when it can, and otherwise takes the
	// quiesce heartbeat as an ordinary one.
	work := len(msgs) > 0 || len(props) > 0 || len(reads) > 0 || len(snaps) > 0 || len(statuses) > 0 ||
		len(unreachable) > 0 || transferTo != 0 || len(inspect) > 0 || removedBy != nil || campaignFrom != 0
	now := r.store.now()
	if r.asleep.Load() {
		if !work && !leaderDead && r.quiesceRepeatLocked(qmsgs) {
			return
		}
		r.wakeLocked(msgs, leaderDead)
		ticks = 0 // the time slept is counted by wakeLocked, if at all
	}
	r.noteActivityLocked(len(props) > 0 || len(reads) > 0)
	r.idleTicks += ticks
	if !work && len(qmsgs) == 0 && ticks > 0 && r.maybeQuiesceLeaderLocked(now) {
		return
	}
	for i, m := range qmsgs {
		if !work && i == len(qmsgs)-1 && r.maybeQuiesceFollowerLocked(m, qfrom[i]) {
			return
		}
		msgs, from = append(msgs, m), append(from, qfrom[i])
	}

	if removedBy != nil && r.desc != nil && removedBy.GetGeneration() > r.desc.GetGeneration() &&
		apply.ReplicaOnNode(removedBy, r.store.cfg.NodeID).GetReplicaId() != r.replicaID {
		r.store.cfg.Logger.Info("a peer reports this replica was removed", "range", r.rangeID,
			"replica", r.replicaID, "generation", removedBy.GetGeneration())
		r.removed = true
	}

	for _, f := range inspect {
		f(r)
	}
	for i := 0; i < ticks; i++ {
		r.rn.Tick()
	}
	for i, m := range msgs {
		if from[i] != 0 {
			r.peerNodes[m.GetFrom()] = from[i]
		}
		err := r.rn.Step(m)
		if err != nil && !errors.Is(err, etcdraft.ErrStepPeerNotFound) {
			r.store.cfg.Logger.Debug("raft refused a message", "range", r.rangeID, "type", m.GetType().String(), "from", m.GetFrom(), "err", err)
		}
		if err == nil && len(notices) > 0 && slices.Contains(notices, m) {
			r.noteCommitNoticeLocked(m) // commit_notice.go
		}
	}
	for _, in := range snaps {
		if err := r.rn.Step(in.msg); err != nil {
			in.done <- fmt.Errorf("raft refused the snapshot: %w", err)
			continue
		}
		r.snaps = append(r.snaps, in)
	}
	for _, st := range statuses {
		status := etcdraft.SnapshotFinish
		if st.failed {
			status = etcdraft.SnapshotFailure
		}
		r.rn.ReportSnapshot(st.to, status)
	}
	for _, id := range unreachable {
		r.rn.ReportUnreachable(id)
	}
	if transferTo != 0 {
		r.rn.TransferLeader(transferTo)
	}
	if campaignFrom != 0 {
		r.campaignWithLocked(campaignFrom)
	}
	st := r.rn.BasicStatus()
	r.proposeAllLocked(props, st)
	if len(reads) > 0 {
		if st.RaftState == etcdraft.StateLeader {
			r.startReadRoundLocked(reads)
		} else {
			err := r.notLeaderErrorFrom(st)
			for _, w := range reads {
				w.done <- readResult{err: err}
			}
		}
	}
	if ticks > 0 {
		r.maintenanceLocked(now, st)
		r.refreshForwardedLocked(now, st)
	}
}

// failInboxLocked answers everything queued on a destroyed replica.
// REQUIRES: raftMu.
func (r *Replica) failInboxLocked() {
	r.in.Lock()
	props, reads, snaps, inspect := r.in.props, r.in.reads, r.in.snaps, r.in.inspect
	r.in.msgs, r.in.from, r.in.props, r.in.reads, r.in.snaps, r.in.inspect = nil, nil, nil, nil, nil, nil
	r.in.Unlock()
	err := fmt.Errorf("%w: replica %d of range %d was removed from this node", ErrRangeNotFound, r.replicaID, r.rangeID)
	for _, p := range props {
		p.finish(proposalResult{err: err})
	}
	for _, w := range reads {
		w.done <- readResult{err: err}
	}
	for _, in := range snaps {
		in.done <- err
	}
	for _, f := range inspect {
		_ = f // the waiter gives up on its own deadline
	}
}

// maintenanceLocked does the replica's periodic background work, paced by
// ticks: lease renewal and dedup GC on the leader.
// REQUIRES: raftMu.
func (r *Replica) maintenanceLocked(now time.Time, st etcdraft.BasicStatus) {
	r.maybeAbortStaleFreezeLocked(now, st.RaftState == etcdraft.StateLeader)
	if st.RaftState != etcdraft.StateLeader {
		return
	}
	if r.store.DiskStalled(now) {
		r.shedForStallLocked(now)
	}
	r.maybeRenewLeaseLocked(now)
	cfg := &r.store.cfg
	if r.lastDedupGC.IsZero() {
		// Start counting when leadership starts: no GC storm after a
		// restart or an election.
		r.lastDedupGC = now
	}
	if now.Sub(r.lastDedupGC) >= cfg.DedupGCInterval {
		r.lastDedupGC = now
		cmd := &command.Command{Kind: command.KindDedupGC}
		cmd.ProposerTime = now.Add(-cfg.DedupWindow).UnixNano()
		r.proposeInternalLocked(cmd, st)
	}
	if now.Sub(r.lastMetaCheck) >= cfg.MetaCheckInterval {
		r.lastMetaCheck = now
		r.reconcileMetaLocked()
	}
}

// reconcileMetaLocked repairs meta's copy of this range's descriptor when
// it is older than the applied one (the update that follows a replica
// change is best effort). It reads this node's copy of meta, so it does
// nothing on a node without one.
//
// Once meta was found holding this generation (metaSeenGen) it is not read
// again until the generation changes: meta never replaces a descriptor
// with an older generation (rangesm), so its copy cannot fall behind
// again. The read is a scan of meta's descriptors, O(ranges), and every
// awake leader made one per MetaCheckInterval: 5% of the nodes' CPU with
// 256 busy ranges, and quadratic in the ranges.
// REQUIRES: raftMu.
func (r *Replica) reconcileMetaLocked() {
	if r.desc == nil || r.rangeID == keys.MetaRangeID || r.frozen != nil {
		// A frozen range's copy could land over the merged range's.
		return
	}
	gen := r.desc.GetGeneration()
	if r.metaSeenGen == gen {
		return
	}
	meta, err := r.store.Replica(keys.MetaRangeID)
	if err != nil {
		r.reconcileRemoteMetaLocked()
		return
	}
	old, err := r.store.cfg.StateMachines.Meta().Descriptor(r.rangeID)
	if err != nil {
		return
	}
	if old != nil && old.GetGeneration() >= gen {
		r.metaSeenGen = gen
		return
	}
	r.store.cfg.Logger.Info("meta holds an old descriptor; updating it", "range", r.rangeID,
		"meta_generation", old.GetGeneration(), "generation", r.desc.GetGeneration())
	meta.proposeAsync(&command.Command{Kind: command.KindPutDescriptor, Descriptor: apply.CloneDescriptor(r.desc)})
}

// proposeInternalLocked proposes a command nobody waits for (its result
// is discarded). cmd.ProposerTime is kept if set.
// REQUIRES: raftMu.
func (r *Replica) proposeInternalLocked(cmd *command.Command, st etcdraft.BasicStatus) {
	cmd.ProposerNode = r.store.cfg.NodeID
	cmd.ProposalID = r.store.nextProposalID()
	if cmd.ProposerTime == 0 {
		cmd.ProposerTime = r.store.now().UnixNano()
	}
	data, err := cmd.Encode(nil)
	if err != nil {
		r.store.cfg.Logger.Error("encoding an internal command", "range", r.rangeID, "kind", cmd.Kind.String(), "err", err)
		return
	}
	p := &proposal{id: cmd.ProposalID, data: data, ctx: r.store.ctx, done: make(chan proposalResult, 1)}
	r.proposeLocked(p, st)
}

// applyEntriesLocked applies ents and counts them.
// REQUIRES: raftMu.
func (r *Replica) applyEntriesLocked(ents []*pb.Entry) ([]applied, error) {
	start := r.store.now()
	acks, confChanged, err := r.applyCommittedLocked(ents)
	if err != nil {
		return nil, fmt.Errorf("range %d: applying entries: %w", r.rangeID, err)
	}
	m := r.store.metrics
	m.entriesApplied.Add(float64(len(ents)))
	m.applyLatency.Observe(since(r.store.cfg.Clock, start).Seconds())
	for _, a := range acks {
		if !a.p.proposedAt.IsZero() {
			m.commitLatency.Observe(start.Sub(a.p.proposedAt).Seconds())
			m.writeRounds.Observe(float64(r.store.roundSeq.Load() - a.p.proposedRound))
		}
	}
	if confChanged {
		m.confChangesApplied.Inc()
	}
	return acks, nil
}

// publishAppliedLocked publishes the applied index and wakes the reads
// waiting for it.
// REQUIRES: raftMu.
func (r *Replica) publishAppliedLocked() {
	ap := r.ls.Applied()
	r.mu.Lock()
	r.mu.applied, r.mu.appliedTerm = ap.Index, ap.Term
	r.releaseWaitersLocked()
	r.mu.Unlock()
}

// checkConfChangesAppendedLocked fails configuration change proposals that
// Raft replaced with an empty entry (it does so when a change is already
// pending, without an error). Such a proposal never reaches the log.
// REQUIRES: raftMu.
func (r *Replica) checkConfChangesAppendedLocked(ents []*pb.Entry) {
	if len(r.ccPending) == 0 {
		return
	}
	for _, e := range ents {
		if e.GetType() != pb.EntryConfChangeV2 {
			continue
		}
		var cc pb.ConfChangeV2
		if proto.Unmarshal(e.GetData(), &cc) != nil {
			continue
		}
		var cmd command.Command
		if command.Decode(cc.GetContext(), &cmd) == nil && cmd.ProposerNode == r.store.cfg.NodeID {
			if p := r.proposals[cmd.ProposalID]; p != nil {
				p.ccSeen = true
			}
		}
	}
	for _, p := range r.ccPending {
		if !p.ccSeen {
			delete(r.proposals, p.id)
			p.finish(proposalResult{err: fmt.Errorf("%w: %w", errConfChangeInProgress, unavailablef(r.rangeID, "another configuration change is in progress"))})
		}
	}
	r.ccPending = r.ccPending[:0]
}
