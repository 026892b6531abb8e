package raft

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/raft/keys"
)

// clusterWaiter is the test clusters' AppliedWaiter: it reads the
// replicas of the running stores (a stopped node's never catches up).
type clusterWaiter struct{ c **testCluster }

func (w clusterWaiter) WaitApplied(ctx context.Context, desc *kvpb.RangeDescriptor, index uint64) error {
	for _, rd := range desc.GetReplicas() {
		for {
			s := (*w.c).running()[rd.GetNodeId()]
			if s != nil {
				if r, err := s.Replica(desc.GetRangeId()); err == nil && r.AppliedIndex() >= index {
					break
				}
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("node %d has not applied range %d up to %d: %w", rd.GetNodeId(), desc.GetRangeId(), index, ctx.Err())
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	return nil
}

// newMergeCluster starts a test cluster whose stores can merge.
func newMergeCluster(t *testing.T, n int, tweak func(*Config)) *testCluster {
	var c *testCluster
	c = newTestCluster(t, n, func(cfg *Config) {
		cfg.AppliedWaiter = clusterWaiter{c: &c}
		if tweak != nil {
			tweak(cfg)
		}
	})
	return c
}

// splitForMerge writes k00..k19, splits the first user range at k10 and
// returns the right-hand range's ID once every node has it.
func splitForMerge(t *testing.T, c *testCluster, ctx context.Context) uint64 {
	t.Helper()
	for i := 0; i < 20; i++ {
		if _, err := c.put(ctx, keys.FirstUserRangeID, fmt.Sprintf("k%02d", i), "a"); err != nil {
			t.Fatal(err)
		}
	}
	c.leader(keys.MetaRangeID)
	_, right, err := c.leader(keys.FirstUserRangeID).store.Split(ctx, keys.FirstUserRangeID, []byte("k10"))
	if err != nil {
		t.Fatal(err)
	}
	rid := right.GetRangeId()
	waitFor(t, 10*time.Second, "the right-hand range on every node", func() bool {
		for _, s := range c.running() {
			if r, err := s.Replica(rid); err != nil || r.Descriptor() == nil {
				return false
			}
		}
		return true
	})
	return rid
}

// waitMerged waits until no running node holds range rid and every one's
// first user range ends at end.
func waitMerged(t *testing.T, c *testCluster, rid uint64, end string) {
	t.Helper()
	waitFor(t, 20*time.Second, fmt.Sprintf("range %d merged on every node", rid), func() bool {
		for _, s := range c.running() {
			if _, err := s.Replica(rid); err == nil {
				return false
			}
			l, err := s.Replica(keys.FirstUserRangeID)
			if err != nil || string(l.Descriptor().GetEndKey()) != end {
				return false
			}
		}
		return true
	})
}

// mergeOnLeader merges rangeID with its right-hand neighbour through the
// range's leader, following leadership changes.
func mergeOnLeader(ctx context.Context, c *testCluster, rangeID uint64) (*kvpb.RangeDescriptor, error) {
	for {
		d, err := c.leader(rangeID).store.Merge(ctx, rangeID)
		if !errors.Is(err, ErrNotLeader) || ctx.Err() != nil {
			return d, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// dedupPut proposes a deduplicated put (client 7, request seq) to rangeID.
func dedupPut(ctx context.Context, c *testCluster, rangeID, seq uint64, key, value string) (command.Result, error) {
	cmd := &command.Command{Kind: command.KindPut, Mutations: []command.Mutation{{Kind: command.KindPut, Key: []byte(key), Value: []byte(value)}}}
	cmd.ClientID, cmd.RequestSeq = 7, seq
	res, _, err := c.leader(rangeID).store.Propose(ctx, rangeID, cmd)
	return res, err
}

// TestMerge: merging the two halves of a split restores one range over
// the same engine keys on every node (nothing copied); the right-hand
// range is gone for good (requests to it fail, a restart does not bring
// it back), its dedup records answer retries on the merged range, and
// meta holds one descriptor again.
func TestMerge(t *testing.T) {
	c := newMergeCluster(t, 3, nil)
	ctx := ctxT(t, 60*time.Second)
	rid := splitForMerge(t, c, ctx)
	if _, err := dedupPut(ctx, c, rid, 1, "k15", "dedup"); err != nil {
		t.Fatal(err)
	}
	if _, err := mergeOnLeader(ctx, c, rid); !errors.Is(err, ErrMergeInvalid) {
		t.Fatalf("merge of the last range: err = %v; want ErrMergeInvalid", err)
	}
	if _, err := c.leader(keys.MetaRangeID).store.Merge(ctx, keys.MetaRangeID); !errors.Is(err, ErrMergeInvalid) {
		t.Fatalf("merge of meta: err = %v; want ErrMergeInvalid", err)
	}
	l := c.leader(keys.FirstUserRangeID)
	if _, err := c.storeOf(l.id).Replica(rid); err != nil {
		t.Fatal(err)
	}
	gen := l.store.mustReplica(keys.FirstUserRangeID).Descriptor().GetGeneration()
	merged, err := mergeOnLeader(ctx, c, keys.FirstUserRangeID)
	if err != nil {
		t.Fatal(err)
	}
	// A late abort of that merge finds it done and changes nothing.
	abort := &command.Command{Kind: command.KindMergeAbort, ExpectedGeneration: gen, RightRangeID: rid}
	if res, _, err := c.leader(keys.FirstUserRangeID).store.Propose(ctx, keys.FirstUserRangeID, abort); err != nil || !res.Found {
		t.Fatalf("abort after the merge: %+v, %v; want found (merged)", res, err)
	}
	if merged.GetRangeId() != keys.FirstUserRangeID || len(merged.GetEndKey()) != 0 {
		t.Fatalf("merged descriptor %v", merged)
	}
	waitMerged(t, c, rid, "")
	for _, id := range c.ids() {
		for _, k := range []string{"k05", "k12", "k19"} {
			if v, ok := c.get(id, k); !ok || v != "a" {
				t.Fatalf("node %d: %s = %q, %v after the merge", id, k, v, ok)
			}
		}
	}
	if _, err := c.put(ctx, keys.FirstUserRangeID, "k15", "b"); err != nil {
		t.Fatalf("write of a right-hand key to the merged range: %v", err)
	}
	// A retry of a write the right-hand range applied is answered from its
	// record, not applied again.
	if res, err := dedupPut(ctx, c, keys.FirstUserRangeID, 1, "k15", "dedup"); err != nil || res.Code != command.CodeOK {
		t.Fatalf("retry on the merged range: %v %v", res, err)
	}
	waitFor(t, 5*time.Second, "k15 = b everywhere", func() bool {
		for _, id := range c.ids() {
			if v, _ := c.get(id, "k15"); v != "b" {
				return false
			}
		}
		return true
	})
	waitFor(t, 10*time.Second, "meta holding the merged range alone", func() bool {
		ds, err := c.leader(keys.MetaRangeID).store.MetaLookup([]byte("k00"), 4)
		return err == nil && len(ds) == 1 && ds[0].GetRangeId() == keys.FirstUserRangeID && len(ds[0].GetEndKey()) == 0
	})

	c.stopAll()
	for _, id := range c.ids() {
		c.start(id)
	}
	if _, err := c.put(ctx, keys.FirstUserRangeID, "k16", "c"); err != nil {
		t.Fatalf("write after a restart: %v", err)
	}
	for _, id := range c.ids() {
		if _, err := c.storeOf(id).Replica(rid); err == nil {
			t.Fatalf("node %d: the merged range %d is back after a restart", id, rid)
		}
	}
	// The merged range splits again.
	c.leader(keys.MetaRangeID)
	if _, _, err := c.leader(keys.FirstUserRangeID).store.Split(ctx, keys.FirstUserRangeID, []byte("k10")); err != nil {
		t.Fatalf("split after the merge: %v", err)
	}
}

// TestMergeFreezeSettledByLeader: a freeze whose coordinator never
// proposes the merge (it died) refuses writes with CodeRangeFrozen until
// the frozen range's leader settles it after MergeFreezeTimeout: the left
// range moves past the merge's generation and the right one is unfrozen
// and takes writes again; a merge then succeeds.
func TestMergeFreezeSettledByLeader(t *testing.T) {
	c := newMergeCluster(t, 3, func(cfg *Config) { cfg.MergeFreezeTimeout = 500 * time.Millisecond })
	ctx := ctxT(t, 60*time.Second)
	rid := splitForMerge(t, c, ctx)
	ld := c.leader(keys.FirstUserRangeID).store.mustReplica(keys.FirstUserRangeID).Descriptor()
	rl := c.leader(rid)
	rdesc := rl.store.mustReplica(rid).Descriptor()
	freeze := &command.Command{Kind: command.KindFreeze, ExpectedGeneration: rdesc.GetGeneration(),
		LeftRangeID: keys.FirstUserRangeID, LeftGeneration: ld.GetGeneration()}
	res, _, err := rl.store.Propose(ctx, rid, freeze)
	if err != nil || res.Code != command.CodeOK {
		t.Fatalf("freeze: %v %v", res, err)
	}
	if !rl.store.mustReplica(rid).Frozen() {
		t.Fatal("the range is not frozen after its freeze applied")
	}
	if _, err := c.put(ctx, rid, "k15", "x"); command.RejectionCode(err) != command.CodeRangeFrozen {
		t.Fatalf("write to a frozen range: err = %v; want CodeRangeFrozen", err)
	}
	waitFor(t, 15*time.Second, "the stale freeze settled", func() bool {
		for _, s := range c.running() {
			if r, err := s.Replica(rid); err != nil || r.Frozen() {
				return false
			}
		}
		return true
	})
	if g := c.leader(keys.FirstUserRangeID).store.mustReplica(keys.FirstUserRangeID).Descriptor().GetGeneration(); g <= ld.GetGeneration() {
		t.Fatalf("left generation %d after the abort; want past %d", g, ld.GetGeneration())
	}
	if _, err := c.put(ctx, rid, "k15", "y"); err != nil {
		t.Fatalf("write after the unfreeze: %v", err)
	}
	if _, err := mergeOnLeader(ctx, c, keys.FirstUserRangeID); err != nil {
		t.Fatalf("merge after an aborted one: %v", err)
	}
	waitMerged(t, c, rid, "")
	for _, id := range c.ids() {
		if v, _ := c.get(id, "k15"); v != "y" {
			t.Fatalf("node %d: k15 = %q; want y", id, v)
		}
	}
}

// TestMergeNodeDown: a merge refuses to commit while a replica of the
// right-hand range is down (it could never catch up once the others are
// gone): it is aborted and the right-hand range takes writes again. Once
// the node is back the merge succeeds, and that node applies it too, after
// its replica of the right-hand range has replayed the writes it missed.
func TestMergeNodeDown(t *testing.T) {
	c := newMergeCluster(t, 3, func(cfg *Config) { cfg.MergeFreezeTimeout = 2 * time.Second })
	ctx := ctxT(t, 60*time.Second)
	rid := splitForMerge(t, c, ctx)
	down := uint64(3)
	for _, id := range []uint64{keys.FirstUserRangeID, rid} {
		if c.leader(id).id == down {
			if err := c.storeOf(down).TransferLeader(ctx, id, 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	c.stop(down)
	for i := 10; i < 20; i++ {
		if _, err := c.put(ctx, rid, fmt.Sprintf("k%02d", i), "late"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := mergeOnLeader(ctx, c, keys.FirstUserRangeID); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("merge with a replica down: err = %v; want ErrUnavailable", err)
	}
	if c.leader(rid).store.mustReplica(rid).Frozen() {
		t.Fatal("the right-hand range stays frozen after a failed merge")
	}
	if _, err := c.put(ctx, rid, "k11", "after"); err != nil {
		t.Fatalf("write after the aborted merge: %v", err)
	}
	c.start(down)
	c.waitApplied(rid, c.leader(rid).store.mustReplica(rid).AppliedIndex())
	if _, err := mergeOnLeader(ctx, c, keys.FirstUserRangeID); err != nil {
		t.Fatal(err)
	}
	waitMerged(t, c, rid, "")
	for _, id := range c.ids() {
		for i := 10; i < 20; i++ {
			want := "late"
			if i == 11 {
				want = "after"
			}
			if v, _ := c.get(id, fmt.Sprintf("k%02d", i)); v != want {
				t.Fatalf("node %d: k%02d = %q after the merge; want %q", id, i, v, want)
			}
		}
	}
}

// TestMergeRestartMidway: every node stops the moment the merge commits on
// the leader (the others may not have applied it, nor even the freeze
// durably); after a restart every node completes it from its logs (a
// left-hand replica waits for its node's right-hand replica to replay the
// freeze) and no write is lost.
func TestMergeRestartMidway(t *testing.T) {
	c := newMergeCluster(t, 3, nil)
	ctx := ctxT(t, 60*time.Second)
	rid := splitForMerge(t, c, ctx)
	for i := 10; i < 20; i++ {
		if _, err := c.put(ctx, rid, fmt.Sprintf("k%02d", i), "r"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := mergeOnLeader(ctx, c, keys.FirstUserRangeID); err != nil {
		t.Fatal(err)
	}
	c.stopAll()
	for _, id := range c.ids() {
		c.start(id)
	}
	waitMerged(t, c, rid, "")
	for _, id := range c.ids() {
		for i := 0; i < 20; i++ {
			want := "a"
			if i >= 10 {
				want = "r"
			}
			if v, _ := c.get(id, fmt.Sprintf("k%02d", i)); v != want {
				t.Fatalf("node %d: k%02d = %q after the restart; want %q", id, i, v, want)
			}
		}
	}
	if _, err := c.put(ctx, keys.FirstUserRangeID, "k19", "after"); err != nil {
		t.Fatalf("write to the merged range after the restart: %v", err)
	}
}

// TestMergeFreezeSettledAfterLeftMerged: the left-hand range of a pending
// merge (its right-hand neighbour frozen for it) is itself merged into its
// own left-hand neighbour; the frozen range is then settled by its
// replicas without the left-hand range (which no longer exists): the range
// now ending where it starts proves the pending merge can never apply.
func TestMergeFreezeSettledAfterLeftMerged(t *testing.T) {
	c := newMergeCluster(t, 3, func(cfg *Config) { cfg.MergeFreezeTimeout = 500 * time.Millisecond })
	ctx := ctxT(t, 60*time.Second)
	rid := splitForMerge(t, c, ctx) // [.., k10) and [k10, ..)
	_, mid, err := c.leader(keys.FirstUserRangeID).store.Split(ctx, keys.FirstUserRangeID, []byte("k05"))
	if err != nil {
		t.Fatal(err)
	}
	lid := mid.GetRangeId() // [k05, k10)
	waitFor(t, 10*time.Second, "the middle range everywhere", func() bool {
		for _, s := range c.running() {
			if r, err := s.Replica(lid); err != nil || r.Descriptor() == nil {
				return false
			}
		}
		return true
	})
	ld := c.leader(lid).store.mustReplica(lid).Descriptor()
	rl := c.leader(rid)
	freeze := &command.Command{Kind: command.KindFreeze, ExpectedGeneration: rl.store.mustReplica(rid).Descriptor().GetGeneration(),
		LeftRangeID: lid, LeftGeneration: ld.GetGeneration()}
	if res, _, err := rl.store.Propose(ctx, rid, freeze); err != nil || res.Code != command.CodeOK {
		t.Fatalf("freeze: %v %v", res, err)
	}
	if _, err := mergeOnLeader(ctx, c, keys.FirstUserRangeID); err != nil {
		t.Fatalf("merging the pending merge's left-hand range away: %v", err)
	}
	waitFor(t, 20*time.Second, "the orphaned freeze settled", func() bool {
		for _, s := range c.running() {
			if r, err := s.Replica(rid); err != nil || r.Frozen() {
				return false
			}
		}
		return true
	})
	if _, err := c.put(ctx, rid, "k15", "after"); err != nil {
		t.Fatalf("write after the unfreeze: %v", err)
	}
}
