package rangesm

import (
	"bytes"
	"fmt"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/mvcc"
	"github.com/shaledb/shale/raft/apply"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/raft/logstore"
	"github.com/shaledb/shale/storage"
	"google.golang.org/protobuf/proto"
)

// The apply half of a split (the protocol is described in raft's split.go):
// the left-hand range keeps its ID and the keys below the split key; this
// node's replica of the right-hand range starts with the keys above it,
// no data copied, and a copy of the range's dedup state; the intents
// on its keys move from the left-hand range's lock table to its own
// (intent.go).

// applySplit applies a Split command. When this node creates its replica
// of the right-hand range, r.pendingSplit is set to it (Apply reports it
// for replication to add the replica's Raft state).
// REQUIRES: the replica's raftMu.
func (r *Range) applySplit(cmd *command.Command) (command.Result, error) {
	cur := r.desc
	left, right := cmd.Descriptor, cmd.Right
	reject := func(code command.Code, format string, args ...any) (command.Result, error) {
		return command.Result{Code: code, Message: fmt.Sprintf(format, args...)}, nil
	}
	if r.rangeID == keys.MetaRangeID {
		return reject(command.CodeMalformed, "the meta range does not split")
	}
	if proto.Equal(cur, left) {
		return command.Result{}, nil // applied already (cannot happen: defensive)
	}
	if cmd.ExpectedGeneration != cur.GetGeneration() || left.GetRangeId() != r.rangeID {
		return reject(command.CodeDescriptorChanged, "split computed from generation %d; range %d is at generation %d",
			cmd.ExpectedGeneration, r.rangeID, cur.GetGeneration())
	}
	if apply.IsJoint(cur) {
		return reject(command.CodeDescriptorChanged, "range %d is in a joint configuration", r.rangeID)
	}
	want, wantRight := apply.SplitDescriptors(cur, left.GetEndKey(), right.GetRangeId())
	if apply.CheckSplitKey(cur, left.GetEndKey()) != nil || right.GetRangeId() <= keys.FirstUserRangeID ||
		!proto.Equal(want, left) || !proto.Equal(wantRight, right) {
		return reject(command.CodeMalformed, "split descriptors do not split generation %d of range %d", cur.GetGeneration(), r.rangeID)
	}
	a := &r.ov
	// Write what the batch holds so far (the entries before this one), so
	// that the dedup state can be read from the engine; everything the
	// split writes then goes with the applied index, atomically.
	if err := r.flush(); err != nil {
		return command.Result{}, err
	}
	v, err := logstore.EncodeDescriptor(left)
	if err != nil {
		return command.Result{}, err
	}
	a.put(keys.DescriptorKey(r.rangeID), v)
	// The halves' stats (mvcc_stats.go): the right-hand half's counted
	// from its data, the rest left to the left-hand half.
	var rightEnd []byte
	if len(right.GetEndKey()) != 0 {
		rightEnd = right.GetEndKey()
	}
	rightStats, err := keys.UserKeyspace.ComputeStats(a.db, right.GetStartKey(), rightEnd)
	if err != nil {
		return command.Result{}, fmt.Errorf("range %d: stats of the split's right-hand half: %w", r.rangeID, err)
	}
	create, err := r.host.CreatesSplitReplica(right)
	if err != nil {
		return command.Result{}, err
	}
	if create {
		if err := r.stageRightHandState(right, rightStats); err != nil {
			return command.Result{}, err
		}
		r.pendingSplit = right
	}
	if err := r.moveIntents(right.GetStartKey(), rightEnd, right.GetRangeId(), create); err != nil {
		return command.Result{}, fmt.Errorf("range %d: moving the intents of the split's right-hand half: %w", r.rangeID, err)
	}
	if err := r.moveTxnRecords(right.GetStartKey(), rightEnd, right.GetRangeId(), create); err != nil {
		return command.Result{}, fmt.Errorf("range %d: moving the transaction records of the split's right-hand half: %w", r.rangeID, err)
	}
	r.addStats(sub(mvcc.Stats{}, rightStats))
	r.desc = left
	return command.Result{}, nil
}

// stageRightHandState stages the replicated state of this node's replica
// of a split's right-hand range into the apply batch: its descriptor and
// the dedup state as applied before this entry (replication adds its Raft
// state, and the MVCC state).
// REQUIRES: the replica's raftMu, and the apply batch flushed before the
// split's first write.
func (r *Range) stageRightHandState(right *kvpb.RangeDescriptor, stats mvcc.Stats) error {
	a := &r.ov
	id := right.GetRangeId()
	v, err := logstore.EncodeDescriptor(right)
	if err != nil {
		return err
	}
	a.put(keys.DescriptorKey(id), v)
	// The right-hand range holds versions up to this range's frontier and
	// may have served reads up to it: it starts from the same MVCC state.
	rst := mvccState{frontier: r.st.frontier, gcThreshold: r.st.gcThreshold}
	a.put(keys.MVCCStateKey(id), encodeMVCCRecord(rst, stats))
	// The caller flushed the batch; the split itself writes no dedup
	// record.
	for _, sp := range []keys.Span{keys.DedupRecordSpan(r.rangeID), keys.DedupFloorSpan(r.rangeID)} {
		if err := copyDedupSpan(a, sp, r.rangeID, id); err != nil {
			return fmt.Errorf("copying dedup state to range %d: %w", id, err)
		}
	}
	return nil
}

// copyDedupSpan stages a copy of every key of sp (range from's dedup
// records or floors) under range to.
func copyDedupSpan(a *overlay, sp keys.Span, from, to uint64) error {
	it, err := a.db.NewIter(&storage.IterOptions{LowerBound: sp.Start, UpperBound: sp.End})
	if err != nil {
		return err
	}
	defer it.Close()
	fromPrefix := keys.RangeLocalSpan(from).Start
	toPrefix := keys.RangeLocalSpan(to).Start
	for ok := it.First(); ok; ok = it.Next() {
		k := it.UnsafeKey()
		if !bytes.HasPrefix(k, fromPrefix) {
			return fmt.Errorf("key %x is not range %d's", k, from)
		}
		nk := append(bytes.Clone(toPrefix), k[len(fromPrefix):]...)
		a.put(nk, it.Value())
	}
	return it.Error()
}

// applyAllocRangeID allocates the next range ID from meta's counter.
// REQUIRES: the replica's raftMu.
func (r *Range) applyAllocRangeID() (command.Result, error) {
	if r.rangeID != keys.MetaRangeID {
		return command.Result{Code: command.CodeNotMeta}, nil
	}
	next, err := r.readCounter("range-id")
	if err != nil {
		return command.Result{}, err
	}
	if next <= keys.FirstUserRangeID {
		next = keys.FirstUserRangeID + 1
	}
	r.ov.put(keys.CounterKey("range-id"), encodeCounter(next+1))
	return command.Result{NodeID: next}, nil
}

// applyPutDescriptors stores several meta descriptor copies, in
// order, in one command (a split's two sides).
// REQUIRES: the replica's raftMu.
func (r *Range) applyPutDescriptors(cmd *command.Command) (command.Result, error) {
	if r.rangeID != keys.MetaRangeID {
		return command.Result{Code: command.CodeNotMeta}, nil
	}
	for _, d := range cmd.Descriptors {
		if d == nil || keys.IsMetaRange(d) {
			return command.Result{Code: command.CodeMalformed, Message: "PutDescriptors holds user range descriptors only"}, nil
		}
	}
	for _, d := range cmd.Descriptors {
		res, err := r.applyPutDescriptor(&command.Command{Kind: command.KindPutDescriptor, Descriptor: d})
		if err != nil || res.Code != command.CodeOK {
			return res, err
		}
	}
	return command.Result{}, nil
}
