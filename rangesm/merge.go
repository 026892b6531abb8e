package rangesm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/raft/apply"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/raft/logstore"
	"github.com/shaledb/shale/storage"
	pb "go.etcd.io/raft/v3/raftpb"
)

// The apply half of a merge (the protocol is described in raft's merge.go):
// the right-hand range applies a Freeze, after which it refuses writes; the
// left-hand range applies the Merge, which takes over the right-hand
// range's replicated state, once this node's replica of the right-hand
// range has applied the freeze (MayApply, the gate); a MergeAbort or an
// Unfreeze ends a merge that did not commit.

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

// refusedWhileFrozen reports whether a frozen range must reject kind. A
// close is refused too: the merge takes over the frontier as of the
// freeze, on every replica alike (whether or not this node's replica has
// applied entries after the freeze when the merge applies).
func refusedWhileFrozen(k command.Kind) bool {
	switch k {
	case command.KindSplit, command.KindDedupGC, command.KindGC, command.KindFreeze, command.KindMerge, command.KindClose,
		command.KindTxnRecord, command.KindTxnPrevent:
		return true
	}
	return k.IsWrite()
}

// applyFreeze applies a Freeze command (in the right-hand range).
// REQUIRES: the replica's raftMu.
func (r *Range) applyFreeze(cmd *command.Command) (command.Result, error) {
	cur := r.desc
	switch {
	case r.rangeID == keys.MetaRangeID:
		return command.Result{Code: command.CodeMalformed, Message: "the meta range does not merge"}, nil
	case cmd.LeftRangeID == 0 || cmd.LeftRangeID == r.rangeID || cmd.LeftRangeID == keys.MetaRangeID:
		return command.Result{Code: command.CodeMalformed, Message: fmt.Sprintf("freeze for a merge into range %d", cmd.LeftRangeID)}, nil
	case cmd.ExpectedGeneration != cur.GetGeneration() || apply.IsJoint(cur):
		return command.Result{Code: command.CodeDescriptorChanged, Message: fmt.Sprintf("freeze computed from generation %d; range %d is at generation %d",
			cmd.ExpectedGeneration, r.rangeID, cur.GetGeneration())}, nil
	}
	next := apply.CloneDescriptor(cur)
	next.Generation++
	v, err := logstore.EncodeDescriptor(next)
	if err != nil {
		return command.Result{}, err
	}
	f := &freezeRecord{left: cmd.LeftRangeID, leftGen: cmd.LeftGeneration}
	r.ov.put(keys.DescriptorKey(r.rangeID), v)
	r.ov.put(keys.FreezeKey(r.rangeID), encodeFreeze(f))
	r.desc = next
	r.frozen = f
	return command.Result{}, nil
}

// applyUnfreeze applies an Unfreeze command: the freeze it names is
// lifted (any other state is left alone). Result.Found says it was.
// REQUIRES: the replica's raftMu.
func (r *Range) applyUnfreeze(cmd *command.Command) (command.Result, error) {
	f := r.frozen
	if f == nil || f.left != cmd.LeftRangeID || f.leftGen != cmd.LeftGeneration {
		return command.Result{}, nil
	}
	next := apply.CloneDescriptor(r.desc)
	next.Generation++
	v, err := logstore.EncodeDescriptor(next)
	if err != nil {
		return command.Result{}, err
	}
	r.ov.put(keys.DescriptorKey(r.rangeID), v)
	r.ov.del(keys.FreezeKey(r.rangeID))
	r.desc = next
	r.frozen = nil
	return command.Result{Found: true}, nil
}

// applyMergeAbort applies a MergeAbort command (in the left-hand
// range): Result.Found says the merge of cmd.RightRangeID had applied;
// otherwise it can no longer apply (this range is past the generation it
// was computed from, bumped here if need be).
// REQUIRES: the replica's raftMu.
func (r *Range) applyMergeAbort(cmd *command.Command) (command.Result, error) {
	if r.rangeID == keys.MetaRangeID {
		return command.Result{Code: command.CodeMalformed, Message: "the meta range does not merge"}, nil
	}
	a := &r.ov
	if _, merged, err := a.get(keys.MergedKey(r.rangeID, cmd.RightRangeID)); err != nil {
		return command.Result{}, err
	} else if merged {
		return command.Result{Found: true}, nil
	}
	// A frozen range is past g already (the freeze bumped it), and its
	// unfreeze bumps it again.
	if r.desc.GetGeneration() == cmd.ExpectedGeneration && r.frozen == nil {
		next := apply.CloneDescriptor(r.desc)
		next.Generation++
		v, err := logstore.EncodeDescriptor(next)
		if err != nil {
			return command.Result{}, err
		}
		a.put(keys.DescriptorKey(r.rangeID), v)
		r.desc = next
	}
	return command.Result{}, nil
}

// applyMerge applies a Merge command (in the left-hand range; the
// protocol is in raft's merge.go). A rejection is deterministic; a local
// replica of the right-hand range that does not match the command (which
// the protocol excludes) is a fatal error rather than a silent divergence.
// REQUIRES: the replica's raftMu, and this node's replica of the
// right-hand range has applied the freeze (MayApply held the entry until
// it had).
func (r *Range) applyMerge(cmd *command.Command) (command.Result, error) {
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
	case apply.IsJoint(cur) || apply.IsJoint(right):
		return reject(command.CodeDescriptorChanged, "a range to merge is in a joint configuration")
	case len(cur.GetEndKey()) == 0 || !bytes.Equal(cur.GetEndKey(), right.GetStartKey()):
		return reject(command.CodeMalformed, "range %d [%q, %q) is not the right-hand neighbour of range %d [%q, %q)",
			right.GetRangeId(), apply.ClipKey(right.GetStartKey()), apply.ClipKey(right.GetEndKey()), r.rangeID, apply.ClipKey(cur.GetStartKey()), apply.ClipKey(cur.GetEndKey()))
	case !apply.SameNodes(cur, right):
		return reject(command.CodeDescriptorChanged, "ranges %d and %d are not on the same nodes", r.rangeID, right.GetRangeId())
	}
	a := &r.ov
	if err := r.flush(); err != nil {
		return command.Result{}, err
	}
	// Replication locks its replica of the right-hand range until the
	// batch is written, and stages the deletion of its Raft state.
	if err := r.host.TakeOver(right, cur.GetGeneration(), cmd.FreezeIndex); err != nil {
		return command.Result{}, fmt.Errorf("merging range %d into range %d: %w", right.GetRangeId(), r.rangeID, err)
	}
	merged := apply.MergedDescriptor(cur, right)
	v, err := logstore.EncodeDescriptor(merged)
	if err != nil {
		return command.Result{}, err
	}
	if err := r.stageTakeOver(right.GetRangeId()); err != nil {
		return command.Result{}, err
	}
	a.put(keys.DescriptorKey(r.rangeID), v)
	a.put(keys.MergedKey(r.rangeID, right.GetRangeId()), nil)
	r.desc = merged
	return command.Result{}, nil
}

// stageTakeOver stages what taking over range rightID needs besides the
// descriptor: its dedup records (where this range has none for the same
// request) and floors (the higher of the two), its MVCC state (the higher
// frontier and GC threshold), then the deletion of its replicated state
// (replication deletes its Raft state).
// REQUIRES: the raftMu of both replicas, and the apply batch flushed.
func (r *Range) stageTakeOver(rightID uint64) error {
	a := &r.ov
	from := keys.RangeLocalSpan(rightID).Start
	to := keys.RangeLocalSpan(r.rangeID).Start
	for _, floors := range []bool{false, true} {
		sp := keys.DedupRecordSpan(rightID)
		if floors {
			sp = keys.DedupFloorSpan(rightID)
		}
		it, err := a.db.NewIter(&storage.IterOptions{LowerBound: sp.Start, UpperBound: sp.End})
		if err != nil {
			return err
		}
		for ok := it.First(); ok; ok = it.Next() {
			k := it.UnsafeKey()
			if !bytes.HasPrefix(k, from) {
				it.Close()
				return fmt.Errorf("key %x is not range %d's", k, rightID)
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
			return fmt.Errorf("copying the dedup state of range %d: %w", rightID, err)
		}
	}
	// The merged range holds the right-hand range's versions and may have
	// served reads up to its frontier there: it keeps the higher frontier
	// (and GC threshold) of the two.
	rst, rstats, _, _, err := loadMVCCState(a.db, rightID)
	if err != nil {
		return err
	}
	if r.st.frontier.Less(rst.frontier) || r.st.gcThreshold.Less(rst.gcThreshold) {
		r.st.gcThreshold = r.st.gcThreshold.Forward(rst.gcThreshold)
		r.advance(rst.frontier)
	}
	// ... and the sum of their stats (mvcc_stats.go).
	r.addStats(rstats)
	// ... and the intents of both (intent.go): the right-hand range's
	// lock table entries join this range's (their keys are disjoint).
	moved, err := copyIntents(a, rightID, r.rangeID, nil, nil)
	if err != nil {
		return fmt.Errorf("taking over the intents of range %d: %w", rightID, err)
	}
	r.intents += moved
	if err := r.takeOverTxnRecords(rightID); err != nil {
		return fmt.Errorf("taking over the transaction records of range %d: %w", rightID, err)
	}
	ls := keys.RangeLocalSpan(rightID)
	a.delRange(ls.Start, ls.End)
	return nil
}

// MayApply implements apply.StateMachine; it is the merge gate. A Merge may
// apply once this node's replica of its right-hand range (if there is one)
// is initialized and has applied the freeze: the merge takes over that
// replica's state as of the freeze. Every other entry may apply.
//
// With no replica of the right-hand range here yet (a message or a
// snapshot creates it), a merge that would apply waits; one that would be
// rejected applies (as the rejection).
// REQUIRES: the replica's raftMu.
func (r *Range) MayApply(e *pb.Entry) bool {
	if e.GetType() != pb.EntryNormal {
		return true
	}
	if k, ok := command.PeekKind(e.GetData()); !ok || k != command.KindMerge {
		return true
	}
	var cmd command.Command
	if command.Decode(e.GetData(), &cmd) != nil {
		return true
	}
	applied, initialized, exists := r.host.RangeApplied(cmd.Right.GetRangeId())
	if !exists {
		return !r.mergeWouldApply(&cmd)
	}
	return initialized && applied >= cmd.FreezeIndex
}

// mergeWouldApply reports whether cmd passes the replicated checks
// of applyMerge against the current state (entries before it in the
// same batch may still change that).
// REQUIRES: the replica's raftMu.
func (r *Range) mergeWouldApply(cmd *command.Command) bool {
	cur, right := r.desc, cmd.Right
	return r.frozen == nil && cur != nil && right != nil && cmd.ExpectedGeneration == cur.GetGeneration() &&
		len(cur.GetEndKey()) != 0 && bytes.Equal(cur.GetEndKey(), right.GetStartKey()) && apply.SameNodes(cur, right)
}
