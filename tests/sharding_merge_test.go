package tests

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shaledb/shale/api/kvpb"

	"github.com/shaledb/shale/client"
)

// Merge suites (docs/sharding.md, "Merges"), on real nodes.

// TestShardingMergeUnderWrites: ranges split and then merge back, one
// merge at a time, while 8 writers write and a scanner scans; no
// acknowledged key is lost, none is duplicated, no write fails (a frozen
// range's refusals are retried by the client), every scan is ordered and
// complete, and one user range is left.
func TestShardingMergeUnderWrites(t *testing.T) {
	c := newCluster(t, 3)
	cl := c.client()
	w := startWriter(cl, "mg", 8, 2400, 90*time.Second)

	sc := startScanner(cl, "mg-", "mg.", 89)

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	splitAt := []int{1200, 600, 1800}
	for _, n := range splitAt {
		for w.count() < n/4 {
			time.Sleep(10 * time.Millisecond)
		}
		if _, _, err := cl.Split(ctx, []byte(fmt.Sprintf("mg-%07d", n))); err != nil {
			t.Fatal(err)
		}
	}
	// A second client learns the split ranges now; it must route through
	// the merges without an error.
	stale := c.client()
	for _, k := range []string{"mg-0000001", "mg-0000700", "mg-0001300", "mg-0001900"} {
		if _, _, err := stale.Get(ctx, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	// Merge them back, from the right, while the writers go on.
	for _, n := range []int{1800, 1200, 600} {
		for w.count() < 600+n/3 {
			time.Sleep(10 * time.Millisecond)
		}
		leftKey := fmt.Sprintf("mg-%07d", n-1)
		m, err := cl.Merge(ctx, []byte(leftKey))
		if err != nil {
			t.Fatalf("merge of the range holding %s: %v", leftKey, err)
		}
		if string(m.GetEndKey()) == fmt.Sprintf("mg-%07d", n) {
			t.Fatalf("merge at %s gave %v", leftKey, m)
		}
	}
	acked := w.wait()
	scans, scanErr := sc.stop()
	if scanErr != nil {
		t.Fatalf("a scan during the merges: %v", scanErr)
	}
	t.Logf("%d writes acknowledged, %d ambiguous, %d failed (last: %v); %d scans during the merges",
		len(acked), w.ambiguous, w.failed, w.lastErr, scans)
	if w.failed > 0 {
		t.Fatalf("%d writes failed during merges (last: %v); merges must not surface errors", w.failed, w.lastErr)
	}
	if got := rangeCount(t, cl); got != 2 {
		t.Fatalf("meta lists %d ranges after merging every split back; want 2", got)
	}
	checkAcked(t, cl, acked)
	for _, reverse := range []bool{false, true} {
		all := scanAll(t, cl, "", "", reverse, 64)
		seen := map[string]bool{}
		for _, kv := range all {
			seen[string(kv.Key)] = true
		}
		for k := range acked {
			if !seen[k] {
				t.Fatalf("scan reverse=%v misses acknowledged key %s", reverse, k)
			}
		}
	}
	// The client that cached the split ranges routes to the merged one,
	// for reads, writes and scans.
	for _, k := range []string{"mg-0000001", "mg-0000700", "mg-0001300", "mg-0001900"} {
		if _, _, err := stale.Get(ctx, []byte(k)); err != nil {
			t.Fatalf("stale client, get %s: %v", k, err)
		}
		if err := stale.Put(ctx, []byte(k+"-x"), []byte("x")); err != nil {
			t.Fatalf("stale client, put %s: %v", k, err)
		}
	}
	if all, err := scanChecked(stale, "mg-", "mg.", false, 500); err != nil || len(all) < len(acked) {
		t.Fatalf("stale client scan: %d keys, %v", len(all), err)
	}
}

// TestShardingMergeRefusedAndColocated: shalectl merge works on a live
// cluster; merging the last range is refused with a clear error; ranges
// whose replicas are on different nodes are colocated, then merged; the
// merged range is served by every node's stale reads.
func TestShardingMergeRefusedAndColocated(t *testing.T) {
	c := newCluster(t, 4)
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for i := 0; i < 40; i++ {
		if err := cl.Put(ctx, []byte(fmt.Sprintf("co-%02d", i)), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	left, right, err := cl.Split(ctx, []byte("co-20"))
	if err != nil {
		t.Fatal(err)
	}
	// The last range has no right-hand neighbour.
	if _, err := cl.Merge(ctx, []byte("co-30")); err == nil || status.Code(errorCause(err)) != codes.FailedPrecondition ||
		!strings.Contains(err.Error(), "last range") {
		t.Fatalf("merge of the last range: err = %v; want FailedPrecondition naming the last range", err)
	}
	// Take one replica of the left-hand range off a node the right-hand
	// one stays on: the merge must first take the right-hand range's
	// replica off that node too.
	for _, rd := range left.GetReplicas() {
		l, err := cl.ChangeReplicas(ctx, left.GetRangeId(), &kvpb.ReplicaChange{Kind: kvpb.ReplicaChange_REMOVE, NodeId: rd.GetNodeId()})
		if err == nil {
			left = l
			break
		}
		t.Logf("removing range %d from node %d: %v", left.GetRangeId(), rd.GetNodeId(), err)
	}
	if len(left.GetReplicas()) == len(right.GetReplicas()) {
		t.Fatal("could not take a replica off the left-hand range")
	}
	out, stderr, code := runCtl(t, c.endpoints()[0], "merge", "co-05")
	if code != 0 {
		t.Fatalf("shalectl merge: exit %d: %s", code, stderr)
	}
	if !strings.Contains(out, "[") {
		t.Fatalf("shalectl merge printed %q", out)
	}
	// Ranges answers from the asked node's replica of meta, which may
	// not have applied the merge's meta update yet (a follower on a busy
	// machine): wait for it.
	var rs *kvpb.RangesResponse
	waitUntil(t, 10*time.Second, "meta listing the merged range", func() string {
		var err error
		if rs, err = cl.Ranges(ctx); err != nil {
			return err.Error()
		}
		if len(rs.GetRanges()) != 2 {
			return fmt.Sprintf("after the merge meta lists %d ranges; want 2", len(rs.GetRanges()))
		}
		return ""
	})
	merged := rs.GetRanges()[len(rs.GetRanges())-1].GetRangeDescriptor()
	if len(merged.GetReplicas()) != len(left.GetReplicas()) {
		t.Fatalf("merged range %v; want the left-hand range's nodes %v", merged, left)
	}
	for _, rd := range left.GetReplicas() {
		if !hasReplicaOn(merged, rd.GetNodeId()) {
			t.Fatalf("merged range %v; want the left-hand range's nodes %v", merged, left)
		}
	}
	for _, rd := range merged.GetReplicas() {
		waitFor(t, 10*time.Second, fmt.Sprintf("node %d serving co-39 from the merged range", rd.GetNodeId()), func() bool {
			v, ok, err := c.staleGet(rd.GetNodeId(), "co-39")
			return err == nil && ok && v == "v"
		})
	}
}

// TestShardingMergeNodeKilled: a node is killed while merges run under
// writes; every merge either succeeds or fails cleanly, and once the node
// is back a merge completes; no acknowledged write is lost, and the
// restarted node's data agrees.
func TestShardingMergeNodeKilled(t *testing.T) {
	c := newCluster(t, 3)
	cl := c.client(1, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	w := startWriter(cl, "mk", 4, 1500, 60*time.Second)
	for w.count() < 200 {
		time.Sleep(10 * time.Millisecond)
	}
	if _, _, err := cl.Split(ctx, []byte("mk-0000800")); err != nil {
		t.Fatal(err)
	}
	// A merge refuses to commit while a replica of the right-hand range
	// is down (the client retries that until its deadline).
	mergeErr := make(chan error, 1)
	go func() {
		mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := cl.Merge(mctx, []byte("mk-0000001"))
		mergeErr <- err
	}()
	time.Sleep(time.Duration(50+time.Now().UnixNano()%200) * time.Millisecond)
	c.node(3).kill()
	err := <-mergeErr
	t.Logf("merge with node 3 killed during it: %v", err)
	c.start(3)
	waitFor(t, 60*time.Second, "a merge with node 3 back", func() bool {
		mctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err := cl.Merge(mctx, []byte("mk-0000001"))
		if err != nil && strings.Contains(err.Error(), "last range") {
			return true // the first merge went through
		}
		if err != nil {
			t.Logf("merge with node 3 back: %v", err)
		}
		return err == nil
	})
	acked := w.wait()
	// Meta's copy of the descriptors trails a merge by a moment: a merge
	// that committed during the kill (its caller told "outcome unknown")
	// is answered "last range" on retry before meta may list it.
	waitFor(t, 20*time.Second, "meta listing 2 ranges after the merge", func() bool {
		return rangeCount(t, cl) == 2
	})
	checkAcked(t, cl, acked)
	for k, v := range acked {
		waitFor(t, 20*time.Second, "node 3 catching up on "+k, func() bool {
			got, ok, err := c.staleGet(3, k)
			return err == nil && ok && got == v
		})
	}
}

// TestShardingAutoMerge: with a short merge delay, the placement
// controller merges adjacent small, cold ranges back into one.
func TestShardingAutoMerge(t *testing.T) {
	c := newCluster(t, 3, "--disable-placement=false", "--placement-interval", "500ms", "--merge-delay", "1s")
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := 0; i < 30; i++ {
		if err := cl.Put(ctx, []byte(fmt.Sprintf("am-%02d", i)), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"am-10", "am-20"} {
		if _, _, err := cl.Split(ctx, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 45*time.Second, "the cold ranges merged back into one", func() bool {
		rs, err := cl.Ranges(ctx)
		return err == nil && len(rs.GetRanges()) == 2
	})
	all := scanAll(t, cl, "am-", "am.", false, 7)
	if len(all) != 30 {
		t.Fatalf("scan after the automatic merges: %d keys; want 30", len(all))
	}
}

// hasReplicaOn reports whether d has a replica on node id.
func hasReplicaOn(d *kvpb.RangeDescriptor, id uint64) bool {
	for _, rd := range d.GetReplicas() {
		if rd.GetNodeId() == id {
			return true
		}
	}
	return false
}

// errorCause returns the gRPC status error inside a client error.
func errorCause(err error) error {
	var ce *client.Error
	if errors.As(err, &ce) && ce.Unwrap() != nil {
		return ce.Unwrap()
	}
	return err
}

// waitFor polls cond every 50 ms until it holds, failing the test after
// timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
