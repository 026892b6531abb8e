package raft

import (
	"errors"
	"fmt"
	"time"

	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/shaledb/shale/raft/command"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/raft/logstore"
)

// readyWork is one replica's part of a processing round.
type readyWork struct {
	r  *Replica
	rd etcdraft.Ready
	// leader: the replica was the leader when the Ready was taken.
	leader bool
	// snap is the incoming snapshot Raft accepted in this Ready.
	snap *incomingSnapshot
	// early are the messages sent before the log write (see
	// splitMessagesLocked).
	early, late []*pb.Message
	// earlyEnts are the committed entries that were durable before this
	// Ready: they are applied before the round's log write (see
	// splitCommittedLocked); lateEnts after it.
	earlyEnts, lateEnts []*pb.Entry
	// earlyDone: the early entries are applied and acknowledged.
	earlyDone bool
	app       logstore.Append
	sa        logstore.SnapshotApply
	hasApp    bool
}

// handleInboxLocked feeds everything queued for the replica into Raft
// (phase 1 of a round).
// REQUIRES: raftMu.
func (r *Replica) handleInboxLocked() {
	r.in.Lock()
	msgs, from := r.in.msgs, r.in.from
	props, reads := r.in.props, r.in.reads
	ticks := r.in.ticks
	snaps, statuses, unreachable := r.in.snaps, r.in.snapStatus, r.in.unreachable
	transferTo, inspect, removedBy := r.in.transferTo, r.in.inspect, r.in.removedBy
	r.in.msgs, r.in.from, r.in.props, r.in.reads = nil, nil, nil, nil
	r.in.ticks, r.in.snaps, r.in.snapStatus, r.in.unreachable = 0, nil, nil, nil
	r.in.transferTo, r.in.inspect, r.in.removedBy = 0, nil, nil
	r.in.Unlock()

	if removedBy != nil && r.desc != nil && removedBy.GetGeneration() > r.desc.GetGeneration() &&
		replicaOnNode(removedBy, r.store.cfg.NodeID).GetReplicaId() != r.replicaID {
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
		if err := r.rn.Step(m); err != nil && !errors.Is(err, etcdraft.ErrStepPeerNotFound) {
			r.store.cfg.Logger.Debug("raft refused a message", "range", r.rangeID, "type", m.GetType().String(), "from", m.GetFrom(), "err", err)
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
	st := r.rn.BasicStatus()
	for _, p := range props {
		r.proposeLocked(p, st)
	}
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
		now := time.Now()
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
	if st.RaftState != etcdraft.StateLeader {
		return
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
// REQUIRES: raftMu.
func (r *Replica) reconcileMetaLocked() {
	if r.desc == nil || r.rangeID == keys.MetaRangeID {
		return
	}
	meta, err := r.store.Replica(keys.MetaRangeID)
	if err != nil {
		return
	}
	old, _, err := findMetaDescriptor(r.store.cfg.Engine, r.rangeID)
	if err != nil || (old != nil && old.GetGeneration() >= r.desc.GetGeneration()) {
		return
	}
	r.store.cfg.Logger.Info("meta holds an old descriptor; updating it", "range", r.rangeID,
		"meta_generation", old.GetGeneration(), "generation", r.desc.GetGeneration())
	meta.proposeAsync(&command.Command{Kind: command.KindPutDescriptor, Descriptor: cloneDesc(r.desc)})
}

// proposeInternalLocked proposes a command nobody waits for (its result
// is discarded). cmd.ProposerTime is kept if set.
// REQUIRES: raftMu.
func (r *Replica) proposeInternalLocked(cmd *command.Command, st etcdraft.BasicStatus) {
	cmd.ProposerNode = r.store.cfg.NodeID
	cmd.ProposalID = r.store.nextProposalID()
	if cmd.ProposerTime == 0 {
		cmd.ProposerTime = time.Now().UnixNano()
	}
	data, err := cmd.Encode(nil)
	if err != nil {
		r.store.cfg.Logger.Error("encoding an internal command", "range", r.rangeID, "kind", cmd.Kind.String(), "err", err)
		return
	}
	p := &proposal{id: cmd.ProposalID, data: data, ctx: r.store.ctx, done: make(chan proposalResult, 1)}
	r.proposeLocked(p, st)
}

// takeReadyLocked takes the replica's Ready and matches it with the
// incoming snapshots stepped this round (phase 1).
// REQUIRES: raftMu.
func (r *Replica) takeReadyLocked(w *readyWork) error {
	w.rd = r.rn.Ready()
	w.leader = r.rn.BasicStatus().RaftState == etcdraft.StateLeader
	var idx uint64
	if !etcdraft.IsEmptySnap(w.rd.Snapshot) {
		idx = w.rd.Snapshot.GetMetadata().GetIndex()
	}
	for _, in := range r.snaps {
		if idx != 0 && w.snap == nil && in.index() == idx {
			w.snap = in
			continue
		}
		in.done <- errors.New("raft did not accept the snapshot (stale or superseded)")
	}
	r.snaps = nil
	if idx != 0 && w.snap == nil {
		return fmt.Errorf("range %d: Raft produced snapshot %d with no data received for it", r.rangeID, idx)
	}
	r.checkConfChangesAppendedLocked(w.rd.Entries)
	r.splitMessagesLocked(w)
	r.splitCommittedLocked(w)
	return nil
}

// splitCommittedLocked divides the Ready's committed entries into those
// that may be applied before the round's log write and the rest.
//
// The README's step 3 comes after step 1 because committed entries may
// include entries of this very Ready, not yet on disk. Entries that were
// written by an earlier round, and that this Ready does not overwrite,
// are committed and durable already: applying them first answers their
// proposers one fsync sooner (the leader's commit round would otherwise
// wait for the write of the entries proposed since). The applied index may
// then reach the disk before the HardState carrying the commit index that
// covers it; logstore.Load accounts for that.
// REQUIRES: raftMu.
func (r *Replica) splitCommittedLocked(w *readyWork) {
	ce := w.rd.CommittedEntries
	if w.snap != nil || len(ce) == 0 {
		w.lateEnts = ce
		return
	}
	durable := r.ls.Last().Index
	if len(w.rd.Entries) > 0 {
		durable = min(durable, w.rd.Entries[0].GetIndex()-1)
	}
	n := 0
	for n < len(ce) && ce[n].GetIndex() <= durable {
		n++
	}
	w.earlyEnts, w.lateEnts = ce[:n], ce[n:]
}

// applyEarlyLocked applies and acknowledges the committed entries that
// were durable before this round (phase 1b).
// REQUIRES: raftMu.
func (r *Replica) applyEarlyLocked(w *readyWork) error {
	if len(w.earlyEnts) == 0 {
		return nil
	}
	acks, err := r.applyEntriesLocked(w.earlyEnts)
	if err != nil {
		return err
	}
	r.publishAppliedLocked()
	for _, a := range acks {
		a.p.finish(proposalResult{res: a.res, index: a.index})
	}
	return nil
}

// applyEntriesLocked applies ents and counts them.
// REQUIRES: raftMu.
func (r *Replica) applyEntriesLocked(ents []*pb.Entry) ([]applied, error) {
	acks, _, err := r.applyCommittedLocked(ents)
	if err != nil {
		return nil, fmt.Errorf("range %d: applying entries: %w", r.rangeID, err)
	}
	r.store.metrics.entriesApplied.Add(float64(len(ents)))
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

// splitMessagesLocked divides the Ready's messages into those that may be
// sent before the log write and the rest.
//
// The README's step 2 says messages go out only after the HardState and
// the entries are durable. The exception it mentions is the leader's
// (Raft thesis 10.2.1): the leader may send appends while it writes the
// same entries to its own disk, because it counts itself towards the
// commit quorum only once its write is done (Raft delivers the leader's
// own append acknowledgement on Advance). So a leader's MsgApp and
// MsgHeartbeat go out first, unless this Ready also changes the term or
// the vote, which must be durable before any message reflects them.
// REQUIRES: raftMu.
func (r *Replica) splitMessagesLocked(w *readyWork) {
	early := w.leader
	if hs := w.rd.HardState; early && hs != nil {
		prev := r.ls.HardState()
		early = hs.GetTerm() == prev.GetTerm() && hs.GetVote() == prev.GetVote()
	}
	for _, m := range w.rd.Messages {
		if early && (m.GetType() == pb.MsgApp || m.GetType() == pb.MsgHeartbeat) {
			w.early = append(w.early, m)
		} else {
			w.late = append(w.late, m)
		}
	}
}

// stageLocked stages the Ready's snapshot, entries and HardState into the
// round's batch (phase 2).
// REQUIRES: raftMu.
func (r *Replica) stageLocked(w *readyWork, b *batchRef) {
	rd := &w.rd
	hs := rd.HardState
	if w.snap != nil {
		w.sa = r.stageSnapshotLocked(b.b, w.snap, hs)
		hs = nil // written with the snapshot
	}
	if len(rd.Entries) > 0 || (hs != nil && !etcdraft.IsEmptyHardState(hs)) {
		w.app = r.ls.StageAppend(b.b, rd.Entries, hs)
		w.hasApp = true
	}
}

// commitStagedLocked makes the durable writes of phase 2 visible to Raft's
// storage.
// REQUIRES: raftMu.
func (r *Replica) commitStagedLocked(w *readyWork) error {
	if w.snap != nil {
		r.ls.CommitSnapshot(w.sa)
		desc, err := logstore.LoadDescriptor(r.store.cfg.Engine, r.rangeID)
		if err != nil {
			return err
		}
		r.desc = desc
		r.mu.Lock()
		r.mu.desc = desc
		r.mu.leaseExpiry = time.Time{}
		r.mu.Unlock()
		r.store.cfg.Logger.Info("applied snapshot", "range", r.rangeID, "index", w.snap.index(), "entries", len(w.snap.kvs))
	}
	if w.hasApp {
		r.ls.CommitAppend(w.app)
	}
	return nil
}

// finishReadyLocked handles what follows the write: leadership changes,
// read states, applying committed entries, Advance, publishing state and
// notifying waiters (phase 4).
// REQUIRES: raftMu.
func (r *Replica) finishReadyLocked(w *readyWork) error {
	rd := &w.rd
	bs := r.rn.BasicStatus()
	if bs.RaftState != r.lastRaftState || bs.GetTerm() != r.lastTerm || bs.Lead != r.lastLeader {
		r.failStaleProposalsLocked(bs)
		r.failReadsLocked(r.notLeaderErrorFrom(bs))
		if bs.RaftState == etcdraft.StateLeader {
			r.store.cfg.Logger.Info("became leader", "range", r.rangeID, "replica", r.replicaID, "term", bs.GetTerm())
			r.store.metrics.leaderChanges.Inc()
			r.lastDedupGC = time.Time{}
		}
		r.mu.Lock()
		r.mu.appliedInTerm = false
		r.mu.leaseExpiry = time.Time{}
		r.mu.Unlock()
		r.lastRaftState, r.lastTerm, r.lastLeader = bs.RaftState, bs.GetTerm(), bs.Lead
	}
	if len(rd.ReadStates) > 0 {
		r.handleReadStatesLocked(rd.ReadStates)
	}
	var acks []applied
	if len(w.lateEnts) > 0 {
		var err error
		if acks, err = r.applyEntriesLocked(w.lateEnts); err != nil {
			return err
		}
	}
	r.rn.Advance(*rd)
	if !r.removed {
		if err := r.maybeTruncateLocked(); err != nil {
			return fmt.Errorf("range %d: truncating the log: %w", r.rangeID, err)
		}
	}
	r.publishLocked(r.rn.BasicStatus())
	r.mu.Lock()
	r.releaseWaitersLocked()
	r.mu.Unlock()
	for _, a := range acks {
		a.p.finish(proposalResult{res: a.res, index: a.index})
	}
	if w.snap != nil {
		w.snap.done <- nil
	}
	return nil
}
