package raft

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/raft/command"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/raft/logstore"
	"github.com/shaledb/shale/storage"
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
//     message and every later one) is deferred (applyOrDeferLocked). So R's
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

// freezeRecord is the replicated state of a frozen range: the merge it is
// frozen for.
//
//	freeze record := 0x01 left_range_id:uvarint left_generation:uvarint
type freezeRecord struct {
	left, leftGen uint64
}

const freezeVersion byte = 0x01

func encodeFreeze(f *freezeRecord) []byte {
	b := []byte{freezeVersion}
	b = binary.AppendUvarint(b, f.left)
	return binary.AppendUvarint(b, f.leftGen)
}

func decodeFreeze(v []byte) (*freezeRecord, error) {
	if len(v) < 3 || v[0] != freezeVersion {
		return nil, fmt.Errorf("freeze record of %d bytes", len(v))
	}
	left, n := binary.Uvarint(v[1:])
	if n <= 0 {
		return nil, errors.New("freeze record: bad left range ID")
	}
	gen, m := binary.Uvarint(v[1+n:])
	if m <= 0 || 1+n+m != len(v) {
		return nil, errors.New("freeze record: bad left generation")
	}
	return &freezeRecord{left: left, leftGen: gen}, nil
}

// loadFreeze reads rangeID's freeze record (nil when it is not frozen).
func loadFreeze(r logstore.Reader, rangeID uint64) (*freezeRecord, error) {
	v, err := r.Get(keys.FreezeKey(rangeID))
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	f, err := decodeFreeze(v)
	if err != nil {
		return nil, fmt.Errorf("range %d: %w", rangeID, err)
	}
	return f, nil
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

// refusedWhileFrozen reports whether a frozen range must reject kind.
func refusedWhileFrozen(k command.Kind) bool {
	switch k {
	case command.KindSplit, command.KindDedupGC, command.KindFreeze, command.KindMerge:
		return true
	}
	return k.IsWrite()
}

// sameNodes reports whether two descriptors place replicas on the same
// set of nodes.
func sameNodes(a, b *kvpb.RangeDescriptor) bool {
	if len(a.GetReplicas()) != len(b.GetReplicas()) {
		return false
	}
	for _, rd := range a.GetReplicas() {
		if replicaOnNode(b, rd.GetNodeId()) == nil {
			return false
		}
	}
	return true
}

// mergedDescriptor is the descriptor of l after it takes over its
// right-hand neighbour r: l's replicas over both spans, at a generation
// above both (meta keeps the newer of two copies at one key).
func mergedDescriptor(l, r *kvpb.RangeDescriptor) *kvpb.RangeDescriptor {
	m := cloneDesc(l)
	m.EndKey = bytes.Clone(r.GetEndKey())
	m.Generation = max(l.GetGeneration(), r.GetGeneration()) + 1
	return m
}

// applyFreezeLocked applies a Freeze command (in the right-hand range).
// REQUIRES: raftMu.
func (r *Replica) applyFreezeLocked(cmd *command.Command) (command.Result, error) {
	cur := r.desc
	switch {
	case r.rangeID == keys.MetaRangeID:
		return command.Result{Code: command.CodeMalformed, Message: "the meta range does not merge"}, nil
	case cmd.LeftRangeID == 0 || cmd.LeftRangeID == r.rangeID || cmd.LeftRangeID == keys.MetaRangeID:
		return command.Result{Code: command.CodeMalformed, Message: fmt.Sprintf("freeze for a merge into range %d", cmd.LeftRangeID)}, nil
	case cmd.ExpectedGeneration != cur.GetGeneration() || descriptorIsJoint(cur):
		return command.Result{Code: command.CodeDescriptorChanged, Message: fmt.Sprintf("freeze computed from generation %d; range %d is at generation %d",
			cmd.ExpectedGeneration, r.rangeID, cur.GetGeneration())}, nil
	}
	next := cloneDesc(cur)
	next.Generation++
	v, err := logstore.EncodeDescriptor(next)
	if err != nil {
		return command.Result{}, err
	}
	f := &freezeRecord{left: cmd.LeftRangeID, leftGen: cmd.LeftGeneration}
	r.apply.put(keys.DescriptorKey(r.rangeID), v)
	r.apply.put(keys.FreezeKey(r.rangeID), encodeFreeze(f))
	r.desc = next
	r.mu.Lock()
	r.mu.desc = next
	r.mu.Unlock()
	r.setFrozenLocked(f)
	return command.Result{}, nil
}

// applyUnfreezeLocked applies an Unfreeze command: the freeze it names is
// lifted (any other state is left alone). Result.Found says it was.
// REQUIRES: raftMu.
func (r *Replica) applyUnfreezeLocked(cmd *command.Command) (command.Result, error) {
	f := r.frozen
	if f == nil || f.left != cmd.LeftRangeID || f.leftGen != cmd.LeftGeneration {
		return command.Result{}, nil
	}
	next := cloneDesc(r.desc)
	next.Generation++
	v, err := logstore.EncodeDescriptor(next)
	if err != nil {
		return command.Result{}, err
	}
	r.apply.put(keys.DescriptorKey(r.rangeID), v)
	r.apply.del(keys.FreezeKey(r.rangeID))
	r.desc = next
	r.mu.Lock()
	r.mu.desc = next
	r.mu.Unlock()
	r.setFrozenLocked(nil)
	return command.Result{Found: true}, nil
}

// applyMergeAbortLocked applies a MergeAbort command (in the left-hand
// range): Result.Found says the merge of cmd.RightRangeID had applied;
// otherwise it can no longer apply (this range is past the generation it
// was computed from, bumped here if need be).
// REQUIRES: raftMu.
func (r *Replica) applyMergeAbortLocked(cmd *command.Command) (command.Result, error) {
	if r.rangeID == keys.MetaRangeID {
		return command.Result{Code: command.CodeMalformed, Message: "the meta range does not merge"}, nil
	}
	a := &r.apply
	if _, merged, err := a.get(keys.MergedKey(r.rangeID, cmd.RightRangeID)); err != nil {
		return command.Result{}, err
	} else if merged {
		return command.Result{Found: true}, nil
	}
	// A frozen range is past g already (the freeze bumped it), and its
	// unfreeze bumps it again.
	if r.desc.GetGeneration() == cmd.ExpectedGeneration && r.frozen == nil {
		next := cloneDesc(r.desc)
		next.Generation++
		v, err := logstore.EncodeDescriptor(next)
		if err != nil {
			return command.Result{}, err
		}
		a.put(keys.DescriptorKey(r.rangeID), v)
		r.desc = next
		r.mu.Lock()
		r.mu.desc = next
		r.mu.Unlock()
	}
	return command.Result{}, nil
}

// applyMergeLocked applies a Merge command (in the left-hand range); see
// the comment at the top of this file. A rejection is deterministic; a
// local replica of the right-hand range that does not match the command
// (which the protocol excludes) is a fatal error rather than a silent
// divergence.
// REQUIRES: raftMu, and this node's replica of the right-hand range has
// applied the freeze (applyOrDeferLocked waits for it).
func (r *Replica) applyMergeLocked(cmd *command.Command) (command.Result, error) {
	cur, right := r.desc, cmd.Right
	reject := func(code command.Code, format string, args ...any) (command.Result, error) {
		return command.Result{Code: code, Message: fmt.Sprintf(format, args...)}, nil
	}
	switch {
	case r.rangeID == keys.MetaRangeID || right.GetRangeId() == keys.MetaRangeID || right.GetRangeId() == r.rangeID || right.GetRangeId() == 0:
		return reject(command.CodeMalformed, "merge of range %d into range %d", right.GetRangeId(), r.rangeID)
	case cmd.ExpectedGeneration != cur.GetGeneration():
		return reject(command.CodeDescriptorChanged, "merge computed from generation %d; range %d is at generation %d",
			cmd.ExpectedGeneration, r.rangeID, cur.GetGeneration())
	case descriptorIsJoint(cur) || descriptorIsJoint(right):
		return reject(command.CodeDescriptorChanged, "a range to merge is in a joint configuration")
	case len(cur.GetEndKey()) == 0 || !bytes.Equal(cur.GetEndKey(), right.GetStartKey()):
		return reject(command.CodeMalformed, "range %d [%q, %q) is not the right-hand neighbour of range %d [%q, %q)",
			right.GetRangeId(), clipKey(right.GetStartKey()), clipKey(right.GetEndKey()), r.rangeID, clipKey(cur.GetStartKey()), clipKey(cur.GetEndKey()))
	case !sameNodes(cur, right):
		return reject(command.CodeDescriptorChanged, "ranges %d and %d are not on the same nodes", r.rangeID, right.GetRangeId())
	}
	a := &r.apply
	if err := a.flush(); err != nil {
		return command.Result{}, err
	}
	rr, err := r.store.Replica(right.GetRangeId())
	if err != nil {
		return command.Result{}, fmt.Errorf("merging range %d into range %d: this node has no replica of it", right.GetRangeId(), r.rangeID)
	}
	// Held until the batch is written and the replica is gone
	// (finishMergesLocked): nothing of it runs in between.
	rr.raftMu.Lock()
	f := rr.frozen
	if rr.rn == nil || !proto.Equal(rr.desc, right) || f == nil || f.left != r.rangeID || f.leftGen != cur.GetGeneration() ||
		rr.ls.Applied().Index < cmd.FreezeIndex {
		rr.raftMu.Unlock()
		return command.Result{}, fmt.Errorf("merging range %d into range %d: the local replica (generation %d, frozen %v, applied %d) is not the frozen range of the command (generation %d, freeze index %d)",
			right.GetRangeId(), r.rangeID, rr.desc.GetGeneration(), f != nil, rr.ls.Applied().Index, right.GetGeneration(), cmd.FreezeIndex)
	}
	merged := mergedDescriptor(cur, right)
	v, err := logstore.EncodeDescriptor(merged)
	if err == nil {
		err = r.stageTakeOverLocked(rr)
	}
	if err != nil {
		rr.raftMu.Unlock()
		return command.Result{}, err
	}
	a.put(keys.DescriptorKey(r.rangeID), v)
	a.put(keys.MergedKey(r.rangeID, rr.rangeID), nil)
	r.merges = append(r.merges, rr)
	r.desc = merged
	r.mu.Lock()
	r.mu.desc = merged
	r.mu.Unlock()
	return command.Result{}, nil
}

// stageTakeOverLocked stages what taking over rr needs besides the
// descriptor: rr's dedup records (where this range has none for the same
// request) and floors (the higher of the two), then the deletion of rr's
// range-local and node-local state and its tombstone.
// REQUIRES: raftMu of r and rr, and the apply batch flushed.
func (r *Replica) stageTakeOverLocked(rr *Replica) error {
	a := &r.apply
	from := keys.RangeLocalSpan(rr.rangeID).Start
	to := keys.RangeLocalSpan(r.rangeID).Start
	for _, floors := range []bool{false, true} {
		sp := keys.DedupRecordSpan(rr.rangeID)
		if floors {
			sp = keys.DedupFloorSpan(rr.rangeID)
		}
		it, err := a.db.NewIter(&storage.IterOptions{LowerBound: sp.Start, UpperBound: sp.End})
		if err != nil {
			return err
		}
		for ok := it.First(); ok; ok = it.Next() {
			k := it.UnsafeKey()
			if !bytes.HasPrefix(k, from) {
				it.Close()
				return fmt.Errorf("key %x is not range %d's", k, rr.rangeID)
			}
			nk := append(bytes.Clone(to), k[len(from):]...)
			old, found, err := a.get(nk)
			if err != nil {
				it.Close()
				return err
			}
			switch {
			case !found:
				a.put(nk, it.Value())
			case floors:
				oseq, ots, err1 := decodeDedupFloor(old)
				nseq, nts, err2 := decodeDedupFloor(it.UnsafeValue())
				if err1 == nil && err2 == nil && (nseq > oseq || nts > ots) {
					a.put(nk, encodeDedupFloor(max(oseq, nseq), max(ots, nts)))
				}
			}
		}
		err = it.Error()
		it.Close()
		if err != nil {
			return fmt.Errorf("copying the dedup state of range %d: %w", rr.rangeID, err)
		}
	}
	ls, ns := keys.RangeLocalSpan(rr.rangeID), keys.NodeLocalRangeSpan(rr.rangeID)
	a.delRange(ls.Start, ls.End)
	a.delRange(ns.Start, ns.End)
	a.put(keys.TombstoneKey(rr.rangeID), logstore.EncodeReplicaID(rr.replicaID+1))
	return nil
}

// finishMergesLocked retires the replicas taken over by the merges just
// applied, once their deletion is written: they leave the store, their
// waiters fail, and their raftMu (held since the merge applied) is
// released.
// REQUIRES: raftMu.
func (r *Replica) finishMergesLocked() {
	s := r.store
	for _, rr := range r.merges {
		s.mu.Lock()
		if s.mu.replicas[rr.rangeID] == rr {
			delete(s.mu.replicas, rr.rangeID)
		}
		s.mu.Unlock()
		rr.uncountLogBytesLocked()
		rr.failProposalsLocked("range merged", nil)
		rr.failReadsLocked(unavailablef(rr.rangeID, "range %d was merged into range %d", rr.rangeID, r.rangeID))
		rr.rn = nil
		rr.mu.Lock()
		rr.mu.destroyed = true
		rr.mu.state = 0
		rr.mu.leaseExpiry = time.Time{}
		rr.releaseWaitersLocked()
		rr.mu.Unlock()
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
	if len(r.deferredApply) > 0 || !r.mergesReadyLocked(m.GetEntries()) {
		r.deferredApply = append(r.deferredApply, m)
		return nil
	}
	return r.applyMessageLocked(m)
}

// applyDeferredLocked applies the deferred apply messages that have become
// ready, in order. The replica is looked at again on every tick.
// REQUIRES: raftMu.
func (r *Replica) applyDeferredLocked() error {
	for len(r.deferredApply) > 0 && r.mergesReadyLocked(r.deferredApply[0].GetEntries()) {
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
	return nil
}

// mergesReadyLocked reports whether every Merge among ents can apply on
// this node: its right-hand range's local replica (if there is one) is
// initialized and has applied the freeze.
// REQUIRES: raftMu.
func (r *Replica) mergesReadyLocked(ents []*pb.Entry) bool {
	for _, e := range ents {
		if e.GetType() != pb.EntryNormal {
			continue
		}
		if k, ok := command.PeekKind(e.GetData()); !ok || k != command.KindMerge {
			continue
		}
		var cmd command.Command
		if command.Decode(e.GetData(), &cmd) != nil {
			continue
		}
		rr, err := r.store.Replica(cmd.Right.GetRangeId())
		if err != nil {
			// No replica here yet (a message or snapshot creates it):
			// wait if the merge would apply, else let it be rejected.
			if r.mergeWouldApplyLocked(&cmd) {
				return false
			}
			continue
		}
		rr.mu.RLock()
		ready := rr.mu.desc != nil && rr.mu.applied >= cmd.FreezeIndex
		rr.mu.RUnlock()
		if !ready {
			return false
		}
	}
	return true
}

// mergeWouldApplyLocked reports whether cmd passes the replicated checks
// of applyMergeLocked against the current state (entries before it in the
// same batch may still change that).
// REQUIRES: raftMu.
func (r *Replica) mergeWouldApplyLocked(cmd *command.Command) bool {
	cur, right := r.desc, cmd.Right
	return r.frozen == nil && cur != nil && right != nil && cmd.ExpectedGeneration == cur.GetGeneration() &&
		len(cur.GetEndKey()) != 0 && bytes.Equal(cur.GetEndKey(), right.GetStartKey()) && sameNodes(cur, right)
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
		return nil, fmt.Errorf("%w: node %d holds no replica of the range starting at %q", ErrMergeNotColocated, s.cfg.NodeID, clipKey(ldesc.GetEndKey()))
	}
	rdesc := rr.Descriptor()
	if !bytes.Equal(rdesc.GetStartKey(), ldesc.GetEndKey()) {
		return nil, unavailablef(leftID, "the local replica of the right-hand neighbour has not caught up; retry")
	}
	if !sameNodes(ldesc, rdesc) {
		return nil, fmt.Errorf("%w: range %d on nodes %v, range %d on nodes %v", ErrMergeNotColocated,
			leftID, nodesOf(ldesc), rdesc.GetRangeId(), nodesOf(rdesc))
	}
	if rr.Frozen() || descriptorIsJoint(rdesc) {
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
	s.cfg.Logger.Info("merge committed", "range", leftID, "right", rightID, "span", fmt.Sprintf("[%q, %q)", clipKey(merged.GetStartKey()), clipKey(merged.GetEndKey())))
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
	cmd := &command.Command{Kind: command.KindMerge, ExpectedGeneration: ldesc.GetGeneration(), FreezeIndex: freezeIdx, Right: cloneDesc(frozen)}
	res, _, err := l.propose(ctx, cmd, false)
	if err != nil {
		return nil, err
	}
	if err := res.Err(); err != nil {
		return nil, fmt.Errorf("%w: merging range %d into range %d: %w", ErrRejected, rr.rangeID, l.rangeID, err)
	}
	return mergedDescriptor(ldesc, frozen), nil
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
