package raft

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/raft/apply"
	"github.com/shaledb/shale/raft/keys"
)

// Merges (docs/sharding.md, "Merges").
//
// A merge of L = [a, b) and its right-hand neighbour R = [b, c) takes
// three commands, each in one range's own log:
//
//  1. Freeze, in R's log: R records that it is frozen for a merge into L
//     computed from L's generation g, and bumps its own generation (so
//     that no change computed before the freeze can apply after it).
//     From then on R applies no write, split, replica change or DedupGC:
//     they are rejected deterministically (CodeRangeFrozen, retryable).
//     R's linearizable reads are refused too once the freeze is applied
//     (node/read.go): a read barrier on R waits for R's commit index, so
//     any read that starts after the freeze committed sees it.
//  2. Merge, in L's log, computed from g, carrying R's frozen descriptor
//     and the freeze's index. Applying it, every replica of L, in the
//     engine batch that advances L's applied index: widens L's
//     descriptor to [a, c) (generation above both), records a merged
//     marker for R, copies R's dedup records (and floors, taking the
//     higher), and deletes this node's replica of R: its range-local and
//     node-local state, with a tombstone. User keys are not touched: they
//     are L's from then on.
//  3. MergeAbort, in L's log, only if the merge failed or its outcome is
//     unknown: it bumps L's generation if it is still g (so a Merge
//     computed from g can never apply) and says whether the merge had
//     applied (the marker). Only when it had not is R unfrozen
//     (Unfreeze, in R's log, naming the same L and g).
//
// Safety rests on three rules:
//
//   - The merge applies on a node only once that node's replica of R has
//     applied the freeze: until then L's apply (the whole pending apply
//     message and every later one) is deferred (applyOrDeferLocked, which
//     asks the state machine's gate, rangesm's MayApply). So R's
//     data on that node is final when L takes it over. This also covers a
//     node that restarts between the two: both replay their logs and L
//     waits for R.
//   - The merge applies only if both ranges' replicas are on the same
//     nodes, L is at generation g and not itself frozen; every check is
//     on replicated state, so every replica decides alike. R cannot
//     change while frozen, so the descriptor in the command is R's on
//     every node.
//   - R is unfrozen only after L's log has made the merge impossible
//     (MergeAbort), so R never takes a write that a later merge would
//     lose. A leader of R frozen longer than Config.MergeFreezeTimeout
//     runs the abort itself, so a coordinator that died never leaves R
//     frozen for good.

// ErrMergeInvalid: the merge cannot be done as asked (the meta range, the
// last range, no right-hand neighbour).
var ErrMergeInvalid = errors.New("raft: invalid merge")

// ErrMergeNotColocated: the two ranges' replicas are not on the same
// nodes; the caller must move them first (and may then retry).
var ErrMergeNotColocated = errors.New("raft: the ranges to merge are not on the same nodes")

// AppliedWaiter waits until every replica of a range (as desc places
// them) has applied index, asking their nodes; it fails when ctx ends
// first (a node down, a replica behind).
type AppliedWaiter interface {
	WaitApplied(ctx context.Context, desc *kvpb.RangeDescriptor, index uint64) error
}

// SetAppliedWaiter installs the waiter merges use (see
// Config.AppliedWaiter). Call before Start.
func (s *Store) SetAppliedWaiter(w AppliedWaiter) { s.cfg.AppliedWaiter = w }

// freezeRecord is the merge a range is frozen for, as its state machine
// reports it (apply.StateMachine.Frozen).
type freezeRecord struct {
	left, leftGen uint64
}

// setFrozenLocked installs the applied freeze state and publishes it.
// REQUIRES: raftMu.
func (r *Replica) setFrozenLocked(f *freezeRecord) {
	r.frozen = f
	if f == nil {
		r.frozenSince = time.Time{}
	}
	r.mu.Lock()
	r.mu.frozenInto = 0
	if f != nil {
		r.mu.frozenInto = f.left
	}
	r.mu.Unlock()
}

// Frozen reports whether the replica has applied a freeze for a merge: it
// then serves no writes and no linearizable reads.
func (r *Replica) Frozen() bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.mu.frozenInto != 0
}

// retireIfMergedInto handles a snapshot of desc's range that overlaps this
// replica: if this replica is frozen for a merge into that range and the
// snapshot covers its whole span, the merge committed (only a merge
// widens a range over a frozen neighbour) and this node missed it in the
// log; the replica is destroyed so the snapshot can apply, and true is
// returned. The snapshot brings the span's data.
func (r *Replica) retireIfMergedInto(desc *kvpb.RangeDescriptor) bool {
	r.mu.RLock()
	into, mine := r.mu.frozenInto, r.mu.desc
	r.mu.RUnlock()
	if into == 0 || into != desc.GetRangeId() || mine == nil ||
		bytes.Compare(desc.GetStartKey(), mine.GetStartKey()) > 0 ||
		(len(desc.GetEndKey()) != 0 && (len(mine.GetEndKey()) == 0 || bytes.Compare(desc.GetEndKey(), mine.GetEndKey()) < 0)) {
		return false
	}
	r.in.Lock()
	r.in.inspect = append(r.in.inspect, func(r *Replica) {
		r.store.cfg.Logger.Info("retiring a frozen range covered by a snapshot of the range it merged into", "range", r.rangeID, "into", into)
		r.removed = true
	})
	r.in.Unlock()
	r.store.sched.enqueue(r)
	return true
}

// FrozenError is the error for a request refused by a frozen range.
func (r *Replica) FrozenError() error {
	return unavailablef(r.rangeID, "range %d is frozen for a merge into its left-hand neighbour; retry", r.rangeID)
}

// finishMergesLocked retires the replicas taken over by the merges just
// applied, once their deletion is written: they leave the store, their
// waiters fail, and their raftMu (held since the merge applied) is
// released.
// REQUIRES: raftMu.
func (r *Replica) finishMergesLocked() {
	s := r.store
	for _, rr := range r.merges {
		rr.retireLocked("range merged", unavailablef(rr.rangeID, "range %d was merged into range %d", rr.rangeID, r.rangeID))
		rr.rn = nil
		rr.raftMu.Unlock()
		s.metrics.merges.Inc()
		s.cfg.Logger.Info("range merged", "range", r.rangeID, "right", rr.rangeID)
	}
	r.merges = r.merges[:0]
}

// applyOrDeferLocked applies a MsgStorageApply, or queues it behind
// earlier ones if it holds a merge whose right-hand range has not applied
// its freeze on this node yet.
// REQUIRES: raftMu.
func (r *Replica) applyOrDeferLocked(m *pb.Message) error {
	// The gate is the state machine's (apply.StateMachine.MayApply).
	if len(r.deferredApply) > 0 || !r.mayApplyLocked(m.GetEntries()) {
		r.deferredApply = append(r.deferredApply, m)
		r.publishHeldLocked()
		return nil
	}
	return r.applyMessageLocked(m)
}

// mayApplyLocked reports whether the state machine lets every entry of
// ents apply now (and a test's TestingKnobs.HoldApply does not hold them).
// REQUIRES: raftMu.
func (r *Replica) mayApplyLocked(ents []*pb.Entry) bool {
	if h := r.store.cfg.Testing.HoldApply; h != nil && h(r.store.cfg.NodeID, r.rangeID) {
		return false
	}
	for _, e := range ents {
		if !r.sm.MayApply(e) {
			return false
		}
	}
	return true
}

// applyDeferredLocked applies the deferred apply messages that have become
// ready, in order. The replica is looked at again on every tick.
// REQUIRES: raftMu.
func (r *Replica) applyDeferredLocked() error {
	for len(r.deferredApply) > 0 && r.mayApplyLocked(r.deferredApply[0].GetEntries()) {
		m := r.deferredApply[0]
		r.deferredApply[0] = nil
		r.deferredApply = r.deferredApply[1:]
		if err := r.applyMessageLocked(m); err != nil {
			return err
		}
	}
	if len(r.deferredApply) == 0 {
		r.deferredApply = nil
	}
	r.publishHeldLocked()
	return nil
}

// publishHeldLocked publishes the index of the first committed entry held
// back (RaftStatus.Held).
// REQUIRES: raftMu.
func (r *Replica) publishHeldLocked() {
	var held uint64
	if len(r.deferredApply) > 0 {
		if ents := r.deferredApply[0].GetEntries(); len(ents) > 0 {
			held = ents[0].GetIndex()
		}
	}
	r.mu.Lock()
	r.mu.held = held
	r.mu.Unlock()
}

// Merge merges range leftID with its right-hand neighbour and returns the
// merged descriptor. It must run on the left-hand range's leader, on a
// node that holds a replica of the right-hand range too; the two ranges
// must have their replicas on the same nodes (ErrMergeNotColocated
// otherwise: move them first). On any failure after the freeze the merge
// is aborted (or found done) before Merge returns. Meta is updated before
// it returns (a failure there is repaired by the leaders later).
func (s *Store) Merge(ctx context.Context, leftID uint64) (*kvpb.RangeDescriptor, error) {
	l, err := s.Replica(leftID)
	if err != nil {
		return nil, err
	}
	if leftID == keys.MetaRangeID {
		return nil, fmt.Errorf("%w: the meta range does not merge", ErrMergeInvalid)
	}
	if !l.IsLeader() {
		return nil, l.notLeaderError()
	}
	if s.cfg.AppliedWaiter == nil {
		return nil, fmt.Errorf("%w: this store cannot check the replicas of a range (no AppliedWaiter)", ErrMergeInvalid)
	}
	s.mergeMu.Lock()
	defer s.mergeMu.Unlock()
	ldesc, err := l.waitNotJoint(ctx)
	if err != nil {
		return nil, err
	}
	if len(ldesc.GetEndKey()) == 0 {
		return nil, fmt.Errorf("%w: range %d is the last range; it has no right-hand neighbour", ErrMergeInvalid, leftID)
	}
	if l.Frozen() {
		return nil, unavailablef(leftID, "range %d is itself frozen for a merge", leftID)
	}
	rr, err := s.ReplicaForKey(ldesc.GetEndKey())
	if err != nil {
		return nil, fmt.Errorf("%w: node %d holds no replica of the range starting at %q", ErrMergeNotColocated, s.cfg.NodeID, apply.ClipKey(ldesc.GetEndKey()))
	}
	rdesc := rr.Descriptor()
	if !bytes.Equal(rdesc.GetStartKey(), ldesc.GetEndKey()) {
		return nil, unavailablef(leftID, "the local replica of the right-hand neighbour has not caught up; retry")
	}
	if !apply.SameNodes(ldesc, rdesc) {
		return nil, fmt.Errorf("%w: range %d on nodes %v, range %d on nodes %v", ErrMergeNotColocated,
			leftID, nodesOf(ldesc), rdesc.GetRangeId(), nodesOf(rdesc))
	}
	if rr.Frozen() || apply.IsJoint(rdesc) {
		return nil, unavailablef(rdesc.GetRangeId(), "range %d is busy (frozen for another merge, or changing replicas); retry", rdesc.GetRangeId())
	}
	rightID := rdesc.GetRangeId()
	// Every replica of the right-hand range must be up and caught up
	// (it will have to apply the freeze): check before freezing, so a
	// node that is down fails the merge at once instead of after a
	// freeze that blocks writes.
	pctx, cancel := s.withTimeout(ctx, min(2*time.Second, s.cfg.MergeFreezeTimeout/4))
	err = s.cfg.AppliedWaiter.WaitApplied(pctx, rdesc, rr.AppliedIndex())
	cancel()
	if err != nil {
		return nil, unavailablef(rdesc.GetRangeId(), "a replica of range %d is not caught up: %v", rdesc.GetRangeId(), err)
	}
	freeze := &command.Command{Kind: command.KindFreeze, ExpectedGeneration: rdesc.GetGeneration(),
		LeftRangeID: leftID, LeftGeneration: ldesc.GetGeneration()}
	s.cfg.Logger.Info("merge: freezing the right-hand range", "range", leftID, "right", rightID, "generation", ldesc.GetGeneration())
	res, freezeIdx, err := rr.propose(ctx, freeze, true)
	if err == nil {
		err = res.Err()
		if err != nil {
			// Rejected: nothing was frozen.
			return nil, fmt.Errorf("%w: freezing range %d: %w", ErrRejected, rightID, err)
		}
	}
	var merged *kvpb.RangeDescriptor
	if err == nil {
		merged, err = s.proposeMerge(ctx, l, rr, ldesc, freezeIdx)
	}
	if err != nil {
		s.cfg.Logger.Info("merge failed; aborting it", "range", leftID, "right", rightID, "err", err)
		// The freeze may have applied: make the merge impossible (or find
		// it done) and lift the freeze, on a context of its own.
		actx, cancel := s.withTimeout(s.ctx, s.cfg.MergeFreezeTimeout)
		done, aerr := s.abortMerge(actx, leftID, ldesc.GetGeneration(), rightID)
		cancel()
		switch {
		case aerr != nil:
			s.cfg.Logger.Warn("aborting a failed merge; the right-hand range's leader will retry", "range", leftID, "right", rightID, "err", aerr)
		case done:
			merged, err = l.Descriptor(), nil
		}
		if err != nil {
			return nil, err
		}
	}
	s.cfg.Logger.Info("merge committed", "range", leftID, "right", rightID, "span", fmt.Sprintf("[%q, %q)", apply.ClipKey(merged.GetStartKey()), apply.ClipKey(merged.GetEndKey())))
	if !s.cfg.TestingSkipMetaUpdates {
		if err := s.PutDescriptors(ctx, []*kvpb.RangeDescriptor{merged}); err != nil {
			s.cfg.Logger.Warn("updating meta after a merge; the range leaders will repair it", "range", leftID, "err", err)
		}
	}
	return merged, nil
}

// proposeMerge proposes the Merge command once rr's freeze (at freezeIdx)
// has applied on every replica of rr, and returns the merged descriptor.
// A replica that cannot apply it in time (its node is down) fails the
// merge: once the merge commits, the other replicas of rr are gone, and a
// replica that missed the freeze could never catch up, nor could its
// node's replica of the merged range apply the merge.
func (s *Store) proposeMerge(ctx context.Context, l, rr *Replica, ldesc *kvpb.RangeDescriptor, freezeIdx uint64) (*kvpb.RangeDescriptor, error) {
	if _, err := rr.waitApplied(ctx, freezeIdx); err != nil {
		return nil, err
	}
	frozen := rr.Descriptor()
	if !rr.Frozen() || frozen == nil {
		return nil, unavailablef(rr.rangeID, "range %d is no longer frozen", rr.rangeID)
	}
	wctx, cancel := s.withTimeout(ctx, s.cfg.MergeFreezeTimeout/2)
	err := s.cfg.AppliedWaiter.WaitApplied(wctx, frozen, freezeIdx)
	cancel()
	if err != nil {
		return nil, unavailablef(rr.rangeID, "not every replica of range %d applied its freeze in time: %v", rr.rangeID, err)
	}
	cmd := &command.Command{Kind: command.KindMerge, ExpectedGeneration: ldesc.GetGeneration(), FreezeIndex: freezeIdx, Right: apply.CloneDescriptor(frozen)}
	res, _, err := l.propose(ctx, cmd, false)
	if err != nil {
		return nil, err
	}
	if err := res.Err(); err != nil {
		return nil, fmt.Errorf("%w: merging range %d into range %d: %w", ErrRejected, rr.rangeID, l.rangeID, err)
	}
	return apply.MergedDescriptor(ldesc, frozen), nil
}

// abortMerge settles a merge of rightID into leftID computed from
// leftGen whose outcome is not known: a MergeAbort in the left-hand log
// makes it impossible unless it applied already (done then); otherwise the
// right-hand range is unfrozen. Both commands are idempotent, so it may
// run any number of times, from any node holding both ranges.
func (s *Store) abortMerge(ctx context.Context, leftID, leftGen, rightID uint64) (done bool, err error) {
	l, err := s.Replica(leftID)
	if err != nil {
		if s.leftGoneBeforeMerge(leftID, rightID) {
			return false, s.unfreeze(ctx, leftID, leftGen, rightID)
		}
		return false, fmt.Errorf("aborting the merge of range %d: %w", rightID, err)
	}
	res, _, err := l.propose(ctx, &command.Command{Kind: command.KindMergeAbort, ExpectedGeneration: leftGen, RightRangeID: rightID}, true)
	if err != nil {
		return false, err
	}
	if err := res.Err(); err != nil {
		return false, fmt.Errorf("%w: aborting the merge of range %d into range %d: %w", ErrRejected, rightID, leftID, err)
	}
	if res.Found {
		return true, nil
	}
	return false, s.unfreeze(ctx, leftID, leftGen, rightID)
}

// unfreeze lifts rightID's freeze for the merge into leftID at leftGen.
// REQUIRES: that merge can no longer apply.
func (s *Store) unfreeze(ctx context.Context, leftID, leftGen, rightID uint64) error {
	rr, err := s.Replica(rightID)
	if err != nil {
		return fmt.Errorf("unfreezing range %d: %w", rightID, err)
	}
	res, _, err := rr.propose(ctx, &command.Command{Kind: command.KindUnfreeze, LeftRangeID: leftID, LeftGeneration: leftGen}, true)
	if err != nil {
		return err
	}
	if res.Found {
		s.cfg.Logger.Info("merge aborted; range unfrozen", "range", leftID, "right", rightID)
	}
	return res.Err()
}

// leftGoneBeforeMerge reports whether this node proves that the merge of
// rightID into leftID can never apply although leftID has no replica here
// to ask: this node still holds rightID (so its replica of leftID never
// applied that merge, which would have removed it), and another local
// range now ends where rightID starts. That range took the end key over
// from leftID through an entry in leftID's log that this node's replica of
// leftID applied (a split of it, or its freeze for a merge into its own
// left-hand neighbour): the merge was not before that entry, and after it
// leftID's generation has moved on (or leftID is frozen for good), so the
// merge is rejected wherever it comes.
func (s *Store) leftGoneBeforeMerge(leftID, rightID uint64) bool {
	rr, err := s.Replica(rightID)
	if err != nil {
		return false
	}
	rd := rr.Descriptor()
	if rd == nil {
		return false
	}
	for _, o := range s.Replicas() {
		d := o.Descriptor()
		if d != nil && o.rangeID != leftID && o.rangeID != rightID && !keys.IsMetaRange(d) &&
			len(d.GetEndKey()) != 0 && bytes.Equal(d.GetEndKey(), rd.GetStartKey()) {
			return true
		}
	}
	return false
}

// maybeAbortStaleFreezeLocked is a frozen range's guard against a merge
// whose coordinator died: once frozen for MergeFreezeTimeout (the leader)
// or twice that (any other replica, in case the leader's node holds no
// replica of the left-hand range) it settles the merge itself
// (abortMerge), in the background, and tries again every timeout while it
// stays frozen.
// REQUIRES: raftMu.
func (r *Replica) maybeAbortStaleFreezeLocked(now time.Time, leader bool) {
	f := r.frozen
	if f == nil {
		return
	}
	if r.frozenSince.IsZero() {
		r.frozenSince = now
		return
	}
	timeout := r.store.cfg.MergeFreezeTimeout
	wait := timeout
	if !leader {
		wait *= 2
	}
	if now.Sub(r.frozenSince) < wait || !r.mergeAborting.CompareAndSwap(false, true) {
		return
	}
	r.frozenSince = now
	s, rightID := r.store, r.rangeID
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer r.mergeAborting.Store(false)
		ctx, cancel := s.withTimeout(s.ctx, timeout)
		defer cancel()
		s.cfg.Logger.Warn("range frozen for a merge too long; settling the merge", "range", rightID, "left", f.left)
		if _, err := s.abortMerge(ctx, f.left, f.leftGen, rightID); err != nil {
			s.cfg.Logger.Warn("settling a stale merge freeze", "range", rightID, "left", f.left, "err", err)
		}
	}()
}

// nodesOf lists the nodes of desc's replicas.
func nodesOf(desc *kvpb.RangeDescriptor) []uint64 {
	out := make([]uint64, 0, len(desc.GetReplicas()))
	for _, rd := range desc.GetReplicas() {
		out = append(out, rd.GetNodeId())
	}
	return out
}
