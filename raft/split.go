package raft

import (
	"bytes"
	"context"
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

// Splits (docs/sharding.md, "Split").
//
// A split of range L = [a, c) at b is ONE command in L's own log: it
// carries the narrowed left descriptor [a, b) and the new right one
// [b, c), both computed from L's descriptor at generation g
// (expected_generation). Applying it, every replica of L - on the same
// nodes, so the right-hand range needs no data moved - writes in the same
// engine batch as L's applied index:
//
//   - L's descriptor, narrowed;
//   - the right-hand range's initial replicated state (descriptor, applied
//     state and ConfState at initialIndex) and node-local state (HardState
//     at initialTerm, truncated state, this node's replica ID), exactly as
//     Bootstrap writes a new range;
//   - a copy of L's dedup records and floors under the right-hand range's
//     ID, so that a retry of a write applied before the split is still
//     answered from its record when it reaches the right-hand range.
//
// The user keys in [b, c) stay where they are: they now belong to the
// right-hand range. Once the batch is written the right-hand replica is
// created in memory. A command computed from another generation (a
// concurrent split, merge or replica change won) is rejected
// deterministically and changes nothing.
//
// The right-hand range's first leader may reach a node whose L has not
// applied the split yet. Its messages are then dropped (awaitSplit in
// store_transport.go), for up to ten election timeouts, so that the split
// creates the replica there with the data in place. After that, or if a
// replica exists anyway, it is uninitialized: the split leaves it alone,
// and it is initialized by a snapshot from its leader. Until the local L
// has split, such a snapshot is refused (it would overlap L's span, and
// L's older log entries could still write into [b, c)).
//
// Meta is updated afterwards, by the proposer, with one PutDescriptors
// command holding both descriptors (so a lookup never sees a hole); if the
// proposer dies first, each range's leader repairs its own meta copy
// within Config.MetaCheckInterval. Until then meta sends [b, c) lookups to
// L, whose RangeKeyMismatch answer carries the right-hand descriptor.

// ErrSplitKey: a split key is not strictly inside its range.
var ErrSplitKey = errors.New("raft: invalid split key")

// ErrSplitMoved: the split key left the range while the split was being
// proposed (a concurrent split moved it to another range): find its range
// again and retry there.
var ErrSplitMoved = errors.New("raft: the split key moved to another range")

// RemoteMeta performs meta operations through another node when this node
// holds no replica of meta. The node layer provides it.
type RemoteMeta interface {
	// AllocRangeID allocates a new, never used range ID.
	AllocRangeID(ctx context.Context) (uint64, error)
	// PutDescriptors stores the meta copies of descs, atomically, each
	// only if newer than the stored one.
	PutDescriptors(ctx context.Context, descs []*kvpb.RangeDescriptor) error
}

// SetRemoteMeta installs the way to reach meta from a node without a
// replica of it. Call before Start.
func (s *Store) SetRemoteMeta(rm RemoteMeta) { s.remoteMeta.Store(&rm) }

func (s *Store) getRemoteMeta() RemoteMeta {
	if p := s.remoteMeta.Load(); p != nil {
		return *p
	}
	return nil
}

// AllocRangeID allocates a range ID from meta's counter.
func (s *Store) AllocRangeID(ctx context.Context) (uint64, error) {
	meta, err := s.Replica(keys.MetaRangeID)
	if err != nil {
		if rm := s.getRemoteMeta(); rm != nil {
			return rm.AllocRangeID(ctx)
		}
		return 0, err
	}
	// Meta without a leader (an election under way, as right after a
	// cluster starts) refuses the proposal unapplied: wait for one, within
	// ctx, rather than failing the split.
	var res command.Result
	for backoff := 20 * time.Millisecond; ; backoff = min(2*backoff, 500*time.Millisecond) {
		res, _, err = meta.propose(ctx, &command.Command{Kind: command.KindAllocRangeID}, true)
		if err == nil {
			break
		}
		if !errors.Is(err, ErrUnavailable) {
			return 0, err
		}
		select {
		case <-ctx.Done():
			return 0, err
		case <-s.after(backoff):
		}
	}
	if err := res.Err(); err != nil {
		return 0, fmt.Errorf("%w: %v", ErrRejected, err)
	}
	return res.NodeID, nil
}

// PutDescriptors stores descs in meta, atomically; a descriptor older than
// the stored copy of its range is skipped.
func (s *Store) PutDescriptors(ctx context.Context, descs []*kvpb.RangeDescriptor) error {
	meta, err := s.Replica(keys.MetaRangeID)
	if err != nil {
		if rm := s.getRemoteMeta(); rm != nil {
			return rm.PutDescriptors(ctx, descs)
		}
		return err
	}
	for _, d := range descs {
		if d.GetRangeId() == 0 || keys.IsMetaRange(d) {
			return fmt.Errorf("%w: meta holds user range descriptors only (range %d)", ErrInvalidChange, d.GetRangeId())
		}
	}
	res, _, err := meta.propose(ctx, &command.Command{Kind: command.KindPutDescriptors, Descriptors: descs}, true)
	if err != nil {
		return err
	}
	if err := res.Err(); err != nil {
		return fmt.Errorf("%w: %v", ErrRejected, err)
	}
	return nil
}

// Split splits range rangeID at splitKey and returns the two descriptors.
// It must run on the range's leader. A split that loses a race with
// another change of the range is computed again and retried, a few times,
// while the key stays in the range (ErrSplitMoved once it does not). Meta
// is updated before it returns (a failure there is logged and repaired
// later: the split itself is done).
func (s *Store) Split(ctx context.Context, rangeID uint64, splitKey []byte) (left, right *kvpb.RangeDescriptor, err error) {
	for attempt := 0; ; attempt++ {
		left, right, err = s.splitOnce(ctx, rangeID, splitKey)
		var re *command.RejectedError
		if !errors.As(err, &re) || re.Code != command.CodeDescriptorChanged || attempt == 4 {
			return left, right, err
		}
		r, rerr := s.Replica(rangeID)
		if rerr != nil {
			return nil, nil, rerr
		}
		if d := r.Descriptor(); !keys.ContainsUserKey(d, splitKey) {
			return nil, nil, fmt.Errorf("%w: %q is no longer in range %d", ErrSplitMoved, clipKey(splitKey), rangeID)
		}
	}
}

func (s *Store) splitOnce(ctx context.Context, rangeID uint64, splitKey []byte) (left, right *kvpb.RangeDescriptor, err error) {
	r, err := s.Replica(rangeID)
	if err != nil {
		return nil, nil, err
	}
	if rangeID == keys.MetaRangeID {
		return nil, nil, fmt.Errorf("%w: the meta range does not split", ErrSplitKey)
	}
	if !r.IsLeader() {
		return nil, nil, r.notLeaderError()
	}
	if r.Frozen() {
		return nil, nil, r.FrozenError()
	}
	desc, err := r.waitNotJoint(ctx)
	if err != nil {
		return nil, nil, err
	}
	if len(splitKey) > 0 && !keys.ContainsUserKey(desc, splitKey) {
		// The caller routed by a view older than this leader's: the key
		// went to another range in a split this replica has applied.
		return nil, nil, fmt.Errorf("%w: %q is no longer in range %d [%q, %q)", ErrSplitMoved, clipKey(splitKey),
			rangeID, clipKey(desc.GetStartKey()), clipKey(desc.GetEndKey()))
	}
	if err := checkSplitKey(desc, splitKey); err != nil {
		return nil, nil, err
	}
	newID, err := s.AllocRangeID(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("raft: allocating a range ID for the split of range %d: %w", rangeID, err)
	}
	left, right = splitDescriptors(desc, splitKey, newID)
	cmd := &command.Command{Kind: command.KindSplit, ExpectedGeneration: desc.GetGeneration(), Descriptor: left, Right: right}
	res, _, err := r.propose(ctx, cmd, false)
	if err != nil {
		return nil, nil, err
	}
	if err := res.Err(); err != nil {
		return nil, nil, fmt.Errorf("%w: range %d: %w", ErrRejected, rangeID, err)
	}
	s.metrics.splits.Inc()
	s.cfg.Logger.Info("range split", "range", rangeID, "right", newID, "key", fmt.Sprintf("%q", clipKey(splitKey)))
	if !s.cfg.TestingSkipMetaUpdates {
		if err := s.PutDescriptors(ctx, []*kvpb.RangeDescriptor{left, right}); err != nil {
			s.cfg.Logger.Warn("updating meta after a split; the range leaders will repair it", "range", rangeID, "err", err)
		}
	}
	return left, right, nil
}

func clipKey(k []byte) []byte {
	if len(k) > 64 {
		return k[:64]
	}
	return k
}

// checkSplitKey refuses a key that is not strictly inside desc (a split at
// the start would leave an empty left-hand range).
func checkSplitKey(desc *kvpb.RangeDescriptor, k []byte) error {
	if len(k) == 0 || bytes.Compare(k, desc.GetStartKey()) <= 0 || !keys.ContainsUserKey(desc, k) {
		return fmt.Errorf("%w: %q is not strictly inside range %d [%q, %q)", ErrSplitKey, clipKey(k),
			desc.GetRangeId(), clipKey(desc.GetStartKey()), clipKey(desc.GetEndKey()))
	}
	return nil
}

// splitDescriptors returns the descriptors of a split of desc at k, the
// right-hand range getting ID rightID. Both sides keep desc's replicas
// (with the same replica IDs: they are unique per range) and move to the
// next generation.
func splitDescriptors(desc *kvpb.RangeDescriptor, k []byte, rightID uint64) (left, right *kvpb.RangeDescriptor) {
	left = cloneDesc(desc)
	left.EndKey = bytes.Clone(k)
	left.Generation = desc.GetGeneration() + 1
	right = cloneDesc(desc)
	right.RangeId = rightID
	right.StartKey = bytes.Clone(k)
	right.Generation = desc.GetGeneration() + 1
	return left, right
}

// applySplitLocked applies a Split command (see the package comment
// above). REQUIRES: raftMu.
func (r *Replica) applySplitLocked(cmd *command.Command) (command.Result, error) {
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
	if descriptorIsJoint(cur) {
		return reject(command.CodeDescriptorChanged, "range %d is in a joint configuration", r.rangeID)
	}
	want, wantRight := splitDescriptors(cur, left.GetEndKey(), right.GetRangeId())
	if checkSplitKey(cur, left.GetEndKey()) != nil || right.GetRangeId() <= keys.FirstUserRangeID ||
		!proto.Equal(want, left) || !proto.Equal(wantRight, right) {
		return reject(command.CodeMalformed, "split descriptors do not split generation %d of range %d", cur.GetGeneration(), r.rangeID)
	}
	a := &r.apply
	// Write what the batch holds so far (the entries before this one), so
	// that the dedup state can be read from the engine; everything the
	// split writes then goes with the applied index, atomically.
	if err := a.flush(); err != nil {
		return command.Result{}, err
	}
	v, err := logstore.EncodeDescriptor(left)
	if err != nil {
		return command.Result{}, err
	}
	a.put(keys.DescriptorKey(r.rangeID), v)
	create, err := r.store.shouldCreateSplitReplica(right, r.replicaID)
	if err != nil {
		return command.Result{}, err
	}
	if create {
		if err := r.stageRightHandStateLocked(right); err != nil {
			return command.Result{}, err
		}
		r.splits = append(r.splits, right)
	}
	r.desc = left
	r.mu.Lock()
	r.mu.desc = left
	r.mu.Unlock()
	return command.Result{}, nil
}

// shouldCreateSplitReplica says whether applying a split must create this
// node's replica of right: not if one exists already (created by a message
// from its leader; a snapshot will initialize it), nor if it was removed
// from this node since (a tombstone above replicaID).
func (s *Store) shouldCreateSplitReplica(right *kvpb.RangeDescriptor, replicaID uint64) (bool, error) {
	if _, err := s.Replica(right.GetRangeId()); err == nil {
		return false, nil
	}
	tomb, err := logstore.LoadTombstone(s.cfg.Engine, right.GetRangeId())
	if err != nil {
		return false, err
	}
	return replicaID >= tomb, nil
}

// stageRightHandStateLocked stages the initial state of this node's
// replica of a split's right-hand range into the apply batch.
// REQUIRES: raftMu, and the apply batch flushed before the split's first
// write.
func (r *Replica) stageRightHandStateLocked(right *kvpb.RangeDescriptor) error {
	a := &r.apply
	id := right.GetRangeId()
	v, err := logstore.EncodeDescriptor(right)
	if err != nil {
		return err
	}
	a.put(keys.DescriptorKey(id), v)
	pos := logstore.LogPosition{Index: initialIndex, Term: initialTerm}
	if err := logstore.StageAppliedState(a.batch, id, pos, confStateFor(right)); err != nil {
		return err
	}
	a.batch.Put(keys.TruncatedStateKey(id), pos.Encode())
	a.batch.Put(keys.HardStateKey(id), logstore.EncodeHardState(&pb.HardState{Term: new(uint64(initialTerm)), Commit: new(uint64(initialIndex))}))
	a.batch.Put(keys.ReplicaIDKey(id), logstore.EncodeReplicaID(r.replicaID))
	// The dedup state as applied before this entry (the caller flushed
	// the batch; the split itself writes no dedup record).
	for _, sp := range []keys.Span{keys.DedupRecordSpan(r.rangeID), keys.DedupFloorSpan(r.rangeID)} {
		if err := copyDedupSpan(a, sp, r.rangeID, id); err != nil {
			return fmt.Errorf("copying dedup state to range %d: %w", id, err)
		}
	}
	return nil
}

// copyDedupSpan stages a copy of every key of sp (range from's dedup
// records or floors) under range to.
func copyDedupSpan(a *applyState, sp keys.Span, from, to uint64) error {
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

// finishSplitsLocked creates the in-memory replicas of the right-hand
// ranges of the splits just applied (their state is written). On the
// left-hand range's leader the new range campaigns after a short delay, by
// when its other replicas have normally applied the split too (a vote
// request that arrives first creates an uninitialized replica, which then
// needs a snapshot).
// REQUIRES: raftMu.
func (r *Replica) finishSplitsLocked(leader bool) error {
	s := r.store
	for _, right := range r.splits {
		nr, err := s.newReplica(right.GetRangeId(), r.replicaID)
		if err != nil {
			return fmt.Errorf("creating the right-hand replica of range %d: %w", right.GetRangeId(), err)
		}
		s.mu.Lock()
		if s.mu.replicas[right.GetRangeId()] != nil {
			s.mu.Unlock()
			continue
		}
		s.mu.replicas[right.GetRangeId()] = nr
		started := s.mu.started
		s.mu.Unlock()
		if !started {
			continue
		}
		s.sched.enqueue(nr)
		if leader {
			s.cfg.Clock.AfterFunc(2*s.cfg.TickInterval, func() {
				nr.in.Lock()
				nr.in.inspect = append(nr.in.inspect, func(nr *Replica) {
					if nr.rn != nil && nr.rn.BasicStatus().Lead == 0 {
						_ = nr.rn.Campaign()
					}
				})
				nr.in.Unlock()
				s.sched.enqueue(nr)
			})
		}
	}
	r.splits = r.splits[:0]
	return nil
}

// checkSnapshotOverlap refuses a snapshot of desc's range whose user span
// overlaps another initialized local replica: that replica's log may still
// write into the span (a split not yet applied here).
func (s *Store) checkSnapshotOverlap(desc *kvpb.RangeDescriptor) error {
	if keys.IsMetaRange(desc) {
		return nil
	}
	for _, o := range s.Replicas() {
		od := o.Descriptor()
		if od == nil || o.rangeID == desc.GetRangeId() || keys.IsMetaRange(od) {
			continue
		}
		if spansOverlap(od, desc) {
			if o.retireIfMergedInto(desc) {
				return fmt.Errorf("%w: snapshot of range %d overlaps range %d, which merged into it; retry once it is retired",
					ErrUnavailable, desc.GetRangeId(), od.GetRangeId())
			}
			return fmt.Errorf("%w: snapshot of range %d [%q, %q) overlaps local range %d [%q, %q); retry once it has split",
				ErrUnavailable, desc.GetRangeId(), clipKey(desc.GetStartKey()), clipKey(desc.GetEndKey()),
				od.GetRangeId(), clipKey(od.GetStartKey()), clipKey(od.GetEndKey()))
		}
	}
	return nil
}

// spansOverlap reports whether two user ranges share a key.
func spansOverlap(a, b *kvpb.RangeDescriptor) bool {
	// a.start < b.end && b.start < a.end, with empty end = +inf.
	less := func(start, end []byte) bool { return len(end) == 0 || bytes.Compare(start, end) < 0 }
	return less(a.GetStartKey(), b.GetEndKey()) && less(b.GetStartKey(), a.GetEndKey())
}

// applyAllocRangeIDLocked allocates the next range ID from meta's counter.
// REQUIRES: raftMu.
func (r *Replica) applyAllocRangeIDLocked() (command.Result, error) {
	if r.rangeID != keys.MetaRangeID {
		return command.Result{Code: command.CodeNotMeta}, nil
	}
	next, err := r.readCounterLocked("range-id")
	if err != nil {
		return command.Result{}, err
	}
	if next <= keys.FirstUserRangeID {
		next = keys.FirstUserRangeID + 1
	}
	r.apply.put(keys.CounterKey("range-id"), encodeCounter(next+1))
	return command.Result{NodeID: next}, nil
}

// applyPutDescriptorsLocked stores several meta descriptor copies, in
// order, in one command (a split's two sides).
// REQUIRES: raftMu.
func (r *Replica) applyPutDescriptorsLocked(cmd *command.Command) (command.Result, error) {
	if r.rangeID != keys.MetaRangeID {
		return command.Result{Code: command.CodeNotMeta}, nil
	}
	for _, d := range cmd.Descriptors {
		if d == nil || keys.IsMetaRange(d) {
			return command.Result{Code: command.CodeMalformed, Message: "PutDescriptors holds user range descriptors only"}, nil
		}
	}
	for _, d := range cmd.Descriptors {
		res, err := r.applyPutDescriptorLocked(&command.Command{Kind: command.KindPutDescriptor, Descriptor: d})
		if err != nil || res.Code != command.CodeOK {
			return res, err
		}
	}
	return command.Result{}, nil
}

// reconcileRemoteMetaLocked is the meta repair of a leader on a node
// without a replica of meta: it cannot read meta's copy, so it stores its
// descriptor through another node once per generation (a no-op in meta
// when meta is up to date already).
// REQUIRES: raftMu.
func (r *Replica) reconcileRemoteMetaLocked() {
	rm := r.store.getRemoteMeta()
	desc := r.desc
	if rm == nil || desc == nil || r.frozen != nil || r.metaPushed.Load() >= desc.GetGeneration() || !r.metaPushing.CompareAndSwap(false, true) {
		return
	}
	d := cloneDesc(desc)
	go func() {
		defer r.metaPushing.Store(false)
		ctx, cancel := r.store.withTimeout(r.store.ctx, r.store.cfg.MetaCheckInterval)
		defer cancel()
		if err := rm.PutDescriptors(ctx, []*kvpb.RangeDescriptor{d}); err != nil {
			r.store.cfg.Logger.Debug("storing a descriptor in meta through another node", "range", r.rangeID, "err", err)
			return
		}
		r.metaPushed.Store(d.GetGeneration())
	}()
}

// KnownPeers returns the addresses this node knows other nodes by (those
// it started with or learned), by node ID, for reaching the cluster from a
// node without a replica of meta.
func (s *Store) KnownPeers() map[uint64]string {
	s.peers.RLock()
	defer s.peers.RUnlock()
	out := make(map[uint64]string, len(s.peers.addrs))
	for id, a := range s.peers.addrs {
		out[id] = a
	}
	return out
}
