package raft

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/raft/apply"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/raft/logstore"
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

// ErrSplitKey: the split key is not strictly inside the range.
var ErrSplitKey = apply.ErrSplitKey

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
			return nil, nil, fmt.Errorf("%w: %q is no longer in range %d", ErrSplitMoved, apply.ClipKey(splitKey), rangeID)
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
		return nil, nil, fmt.Errorf("%w: %q is no longer in range %d [%q, %q)", ErrSplitMoved, apply.ClipKey(splitKey),
			rangeID, apply.ClipKey(desc.GetStartKey()), apply.ClipKey(desc.GetEndKey()))
	}
	if err := apply.CheckSplitKey(desc, splitKey); err != nil {
		return nil, nil, err
	}
	newID, err := s.AllocRangeID(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("raft: allocating a range ID for the split of range %d: %w", rangeID, err)
	}
	left, right = apply.SplitDescriptors(desc, splitKey, newID)
	cmd := &command.Command{Kind: command.KindSplit, ExpectedGeneration: desc.GetGeneration(), Descriptor: left, Right: right}
	res, _, err := r.propose(ctx, cmd, false)
	if err != nil {
		return nil, nil, err
	}
	if err := res.Err(); err != nil {
		return nil, nil, fmt.Errorf("%w: range %d: %w", ErrRejected, rangeID, err)
	}
	s.metrics.splits.Inc()
	s.cfg.Logger.Info("range split", "range", rangeID, "right", newID, "key", fmt.Sprintf("%q", apply.ClipKey(splitKey)))
	if !s.cfg.TestingSkipMetaUpdates {
		if err := s.PutDescriptors(ctx, []*kvpb.RangeDescriptor{left, right}); err != nil {
			s.cfg.Logger.Warn("updating meta after a split; the range leaders will repair it", "range", rangeID, "err", err)
		}
	}
	return left, right, nil
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
		s.setAwake(nr, true)
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
				ErrUnavailable, desc.GetRangeId(), apply.ClipKey(desc.GetStartKey()), apply.ClipKey(desc.GetEndKey()),
				od.GetRangeId(), apply.ClipKey(od.GetStartKey()), apply.ClipKey(od.GetEndKey()))
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
	d := apply.CloneDescriptor(desc)
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
