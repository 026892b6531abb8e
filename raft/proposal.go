package raft

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/hlc"
)

// A proposal's life: queued in the replica's inbox -> handed to Raft
// (proposed) -> finished, exactly once, with a result or an error. What
// the caller is told depends on where it stopped:
//
//   - never handed to Raft (abandoned by the caller, refused because this
//     replica is not the leader, dropped by Raft): a definite failure,
//     NotLeader or Unavailable. Nothing was applied.
//   - handed to Raft, then applied: the result.
//   - handed to Raft by the leader, which then lost leadership (a leader
//     transfer, an election): the entry is in this node's log and may
//     still commit under the next leader, so the proposal keeps waiting.
//     Either it applies (the result), or an entry of a later term applies
//     first, which proves it was overwritten: a definite NotLeader, safe
//     to retry (see resolveOutlivedLocked).
//   - handed to Raft, outcome unknown (deadline hit, node stopping,
//     replica removed, a snapshot replaced the log): Ambiguous. The entry
//     may still commit.
const (
	propQueued int32 = iota
	propProposed
	propFinished
)

type proposal struct {
	id uint64
	// data is the encoded command of an EntryNormal; cc is set instead for
	// a configuration change.
	data []byte
	cc   *pb.ConfChangeV2
	// forward allows proposing on a follower (Raft forwards it to the
	// leader). Only for internal, idempotent commands.
	forward bool
	// ccSeen: the configuration change was found in the log (see
	// checkConfChangesAppendedLocked). REQUIRES raftMu.
	ccSeen bool
	// term and lead are Raft's term and leader when the proposal was
	// handed to Raft; a change of either makes its outcome unknown.
	term, lead uint64
	// proposedAt is when a forwarded proposal was (last) handed to Raft.
	proposedAt time.Time
	// proposedRound is the node's round count (Store.roundSeq) when the
	// proposal was handed to Raft: the rounds it waits until it applies
	// are counted (shale_raft_write_rounds).
	proposedRound uint64
	ctx           context.Context
	state         atomic.Int32
	done          chan proposalResult // capacity 1; written once
}

type proposalResult struct {
	res   command.Result
	index uint64
	err   error
}

// finish delivers the outcome, once; later calls are no-ops.
func (p *proposal) finish(pr proposalResult) {
	for {
		s := p.state.Load()
		if s == propFinished {
			return
		}
		if p.state.CompareAndSwap(s, propFinished) {
			p.done <- pr
			return
		}
	}
}

// Propose proposes cmd to range rangeID and waits for it to apply. It
// fills in the proposal identity and timestamp of cmd's header. On success
// it returns the command's result (which may be a deterministic
// rejection, see command.Result.Err) and the index it applied at. Errors
// match ErrNotLeader, ErrUnavailable, ErrRangeNotFound (not applied) or
// ErrAmbiguous (outcome unknown).
func (s *Store) Propose(ctx context.Context, rangeID uint64, cmd *command.Command) (command.Result, uint64, error) {
	r, err := s.Replica(rangeID)
	if err != nil {
		return command.Result{}, 0, err
	}
	return r.propose(ctx, cmd, false)
}

func (r *Replica) propose(ctx context.Context, cmd *command.Command, forward bool) (command.Result, uint64, error) {
	s := r.store
	cmd.ProposerNode = s.cfg.NodeID
	cmd.ProposalID = s.nextProposalID()
	cmd.ProposerTime = r.store.now().UnixNano()
	if cmd.Timestamp.IsZero() {
		// No proposal timestamp from the caller: the proposer's clock.
		cmd.Timestamp = hlc.Timestamp{WallTime: max(cmd.ProposerTime, 0)}
	}
	data, err := cmd.Encode(make([]byte, 0, 64))
	if err != nil {
		return command.Result{}, 0, err
	}
	p := &proposal{id: cmd.ProposalID, data: data, forward: forward, ctx: ctx, done: make(chan proposalResult, 1)}
	return r.submit(p)
}

// proposeConfChange proposes a configuration change whose Context is the
// encoded ChangeReplicas command cmd.
func (r *Replica) proposeConfChange(ctx context.Context, cc *pb.ConfChangeV2, cmd *command.Command) (command.Result, uint64, error) {
	s := r.store
	cmd.ProposerNode = s.cfg.NodeID
	cmd.ProposalID = s.nextProposalID()
	cmd.ProposerTime = r.store.now().UnixNano()
	data, err := cmd.Encode(nil)
	if err != nil {
		return command.Result{}, 0, err
	}
	cc.Context = data
	p := &proposal{id: cmd.ProposalID, cc: cc, ctx: ctx, done: make(chan proposalResult, 1)}
	return r.submit(p)
}

// proposeAsync queues an internal, idempotent command that nobody waits
// for (forwarded to the leader if need be). It may be called while
// holding another replica's raftMu.
func (r *Replica) proposeAsync(cmd *command.Command) {
	cmd.ProposerNode = r.store.cfg.NodeID
	cmd.ProposalID = r.store.nextProposalID()
	cmd.ProposerTime = r.store.now().UnixNano()
	data, err := cmd.Encode(nil)
	if err != nil {
		r.store.cfg.Logger.Error("encoding an internal command", "range", r.rangeID, "kind", cmd.Kind.String(), "err", err)
		return
	}
	ctx, cancel := r.store.withTimeout(r.store.ctx, time.Minute)
	p := &proposal{id: cmd.ProposalID, data: data, forward: true, ctx: ctx, done: make(chan proposalResult, 1)}
	r.in.Lock()
	r.in.props = append(r.in.props, p)
	r.in.Unlock()
	r.store.sched.enqueue(r)
	go func() {
		defer cancel()
		select {
		case <-p.done:
		case <-ctx.Done():
			p.state.CompareAndSwap(propQueued, propFinished)
		}
	}()
}

// submit queues p and waits for its outcome.
func (r *Replica) submit(p *proposal) (command.Result, uint64, error) {
	if err := r.store.checkRunning(); err != nil {
		return command.Result{}, 0, unavailablef(r.rangeID, "%v", err)
	}
	if !p.forward {
		// Cheap early answer; the round checks again under raftMu.
		r.mu.RLock()
		leader := r.mu.state == etcdraft.StateLeader
		var nle error
		if !leader {
			nle = r.notLeaderErrorRLocked()
		}
		r.mu.RUnlock()
		if !leader {
			return command.Result{}, 0, nle
		}
	}
	r.in.Lock()
	if len(r.in.props) >= r.store.cfg.MaxPendingProposals {
		r.in.Unlock()
		return command.Result{}, 0, unavailablef(r.rangeID, "%d proposals already queued", len(r.in.props))
	}
	r.in.props = append(r.in.props, p)
	r.in.Unlock()
	r.store.sched.enqueue(r)

	select {
	case pr := <-p.done:
		r.store.stepBarrier()
		return pr.res, pr.index, pr.err
	case <-p.ctx.Done():
		if p.state.CompareAndSwap(propQueued, propFinished) {
			// Raft never saw it.
			return command.Result{}, 0, unavailablef(r.rangeID, "abandoned before it entered the log: %v", p.ctx.Err())
		}
		// Raft has it, or it finished just now: prefer a real outcome.
		select {
		case pr := <-p.done:
			return pr.res, pr.index, pr.err
		default:
		}
		return command.Result{}, 0, ambiguous(r.rangeID, "deadline reached before the write applied", p.ctx.Err())
	case <-r.store.stopped:
		if p.state.CompareAndSwap(propQueued, propFinished) {
			return command.Result{}, 0, unavailablef(r.rangeID, "%v", ErrStopped)
		}
		select {
		case pr := <-p.done:
			return pr.res, pr.index, pr.err
		default:
		}
		return command.Result{}, 0, ambiguous(r.rangeID, "node stopping", ErrStopped)
	}
}

// proposeLocked hands one queued proposal to Raft (phase 1 of a round).
// REQUIRES: raftMu.
func (r *Replica) proposeLocked(p *proposal, st etcdraft.BasicStatus) {
	r.proposeAllLocked([]*proposal{p}, st)
}

// proposeAllLocked hands the queued proposals to Raft, in order. The
// command entries among them go in as ONE MsgProp (a configuration change
// goes alone, after the entries queued before it): Raft appends them
// together and sends each follower one MsgApp for all of them, where one
// Propose per entry would make it send one MsgApp per entry and per
// follower, each acknowledged separately. Under load, proposals pile up
// while a round runs, so this is where the node batches its writes.
// REQUIRES: raftMu.
func (r *Replica) proposeAllLocked(props []*proposal, st etcdraft.BasicStatus) {
	var batch []*proposal
	for _, p := range props {
		if !r.admitProposalLocked(p, st) {
			continue
		}
		if p.cc != nil {
			r.stepProposalsLocked(batch, st)
			batch = batch[:0]
			r.stepProposalsLocked([]*proposal{p}, st)
			continue
		}
		batch = append(batch, p)
	}
	r.stepProposalsLocked(batch, st)
}

// admitProposalLocked finishes p if it may not be proposed (abandoned by
// its caller, not the leader, no leader to forward to) and otherwise marks
// it proposed. It reports whether p is to be handed to Raft.
// REQUIRES: raftMu.
func (r *Replica) admitProposalLocked(p *proposal, st etcdraft.BasicStatus) bool {
	if p.ctx.Err() != nil {
		if p.state.CompareAndSwap(propQueued, propFinished) {
			p.done <- proposalResult{err: unavailablef(r.rangeID, "abandoned before it entered the log: %v", p.ctx.Err())}
		}
		return false
	}
	if !p.forward && st.RaftState != etcdraft.StateLeader {
		p.finish(proposalResult{err: r.notLeaderErrorFrom(st)})
		return false
	}
	if p.forward && st.Lead == etcdraft.None {
		p.finish(proposalResult{err: unavailablef(r.rangeID, "no leader")})
		return false
	}
	// false: abandoned by its caller just now.
	return p.state.CompareAndSwap(propQueued, propProposed)
}

// stepProposalsLocked hands admitted proposals to Raft in one step: one
// configuration change, or any number of command entries. Raft takes all
// of them or none, so a refusal is a definite failure for each.
// REQUIRES: raftMu.
func (r *Replica) stepProposalsLocked(ps []*proposal, st etcdraft.BasicStatus) {
	if len(ps) == 0 {
		return
	}
	var err error
	if ps[0].cc != nil {
		err = r.rn.ProposeConfChange(ps[0].cc)
	} else {
		ents := make([]pb.Entry, len(ps))
		ptrs := make([]*pb.Entry, len(ps))
		for i, p := range ps {
			ents[i].Data = p.data
			ptrs[i] = &ents[i]
		}
		err = r.rn.Step(&pb.Message{Type: pb.MsgProp.Enum(), From: new(r.replicaID), Entries: ptrs})
	}
	if err != nil {
		// Not in the log: a definite failure.
		reason := err.Error()
		if errors.Is(err, etcdraft.ErrProposalDropped) {
			reason = "dropped by Raft (leader changing, a transfer under way, or too many uncommitted entries)"
		}
		r.store.metrics.proposalsDropped.Add(float64(len(ps)))
		for _, p := range ps {
			p.finish(proposalResult{err: unavailablef(r.rangeID, "proposal not accepted: %s", reason)})
		}
		return
	}
	r.store.metrics.proposals.Add(float64(len(ps)))
	now := r.store.now()
	for _, p := range ps {
		p.term, p.lead = st.GetTerm(), st.Lead
		p.proposedAt = now
		p.proposedRound = r.store.roundSeq.Load()
		r.proposals[p.id] = p
		if p.cc != nil {
			r.ccPending = append(r.ccPending, p)
		}
	}
}

// notLeaderErrorFrom builds a NotLeaderError from a fresh Raft status.
// REQUIRES: raftMu.
func (r *Replica) notLeaderErrorFrom(st etcdraft.BasicStatus) error {
	e := &NotLeaderError{RangeID: r.rangeID, Descriptor: r.desc}
	if st.Lead != etcdraft.None && st.Lead != r.replicaID {
		e.LeaderReplicaID = st.Lead
		e.LeaderNodeID = nodeOfReplica(r.desc, st.Lead)
	}
	return e
}

// failProposalsLocked finishes every proposal handed to Raft as ambiguous
// (replica removed, store stopping).
// REQUIRES: raftMu.
func (r *Replica) failProposalsLocked(reason string, cause error) {
	for id, p := range r.proposals {
		p.finish(proposalResult{err: ambiguous(r.rangeID, reason, cause)})
		delete(r.proposals, id)
	}
	r.outlived = 0
}

// failStaleProposalsLocked handles the proposals handed to Raft under
// another term or leader than st's. A forwarded proposal went to a leader
// that may have lost it or may still commit it: it finishes as ambiguous
// (its commands are idempotent; callers retry). A proposal this node made
// as leader is in this node's log at its term: it keeps waiting, and the
// first applied entry of a later term settles it (resolveOutlivedLocked).
// Failing it here, as Raft's leadership changes, would report an outcome
// unknown although a leader transfer commits most such entries.
// REQUIRES: raftMu.
func (r *Replica) failStaleProposalsLocked(st etcdraft.BasicStatus) {
	r.outlived = 0
	for id, p := range r.proposals {
		if p.term == st.GetTerm() && p.lead == st.Lead {
			continue
		}
		if p.forward {
			p.finish(proposalResult{err: ambiguous(r.rangeID, "leadership changed before the write applied", nil)})
			delete(r.proposals, id)
			continue
		}
		if p.term < st.GetTerm() {
			r.outlived++
		}
	}
}

// resolveOutlivedLocked finishes, with a definite NotLeader, the
// proposals made as leader of a term older than appliedTerm, the term of
// the last entry just applied. Raft log terms never decrease along the
// log, and only a term's leader creates entries of that term, so an entry
// of term T that had not applied before an entry of a later term did
// never will: a later leader overwrote it. Nothing of it was applied.
// REQUIRES: raftMu.
func (r *Replica) resolveOutlivedLocked(appliedTerm uint64) {
	if r.outlived == 0 {
		return
	}
	st := r.rn.BasicStatus()
	var nle error
	r.outlived = 0 // recounted: some may have applied meanwhile
	for id, p := range r.proposals {
		if p.forward {
			continue
		}
		if p.term >= appliedTerm {
			if p.term < st.GetTerm() {
				r.outlived++
			}
			continue
		}
		if nle == nil {
			nle = r.notLeaderErrorFrom(st)
		}
		p.finish(proposalResult{err: nle})
		delete(r.proposals, id)
		r.store.metrics.proposalsOverwritten.Inc()
	}
}

// failOutlivedLocked finishes as ambiguous the proposals this node made
// as leader that have not applied, when a snapshot replaces the log: the
// snapshot may include their entries, applied elsewhere, and this node
// will never see them apply.
// REQUIRES: raftMu.
func (r *Replica) failOutlivedLocked(reason string) {
	for id, p := range r.proposals {
		if p.forward {
			continue
		}
		p.finish(proposalResult{err: ambiguous(r.rangeID, reason, nil)})
		delete(r.proposals, id)
	}
	r.outlived = 0
}

// refreshForwardedLocked proposes again the forwarded proposals that have
// not applied after two election timeouts: a MsgProp lost on its way to
// the leader (or dropped by it) is lost silently. Forwarded commands are
// idempotent, and only the first application of a proposal ID answers its
// caller, so proposing twice is harmless.
// REQUIRES: raftMu.
func (r *Replica) refreshForwardedLocked(now time.Time, st etcdraft.BasicStatus) {
	if st.RaftState == etcdraft.StateLeader || st.Lead == etcdraft.None {
		return
	}
	wait := 2 * r.store.cfg.electionTimeout()
	for _, p := range r.proposals {
		if !p.forward || now.Sub(p.proposedAt) < wait {
			continue
		}
		p.proposedAt = now
		if err := r.rn.Propose(p.data); err != nil {
			r.store.cfg.Logger.Debug("re-proposing a forwarded command", "range", r.rangeID, "err", err)
		}
	}
}
