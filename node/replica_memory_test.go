package node

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/shaledb/shale/api/kvpb"
)

// idleRangeHeapBound is the Go heap a node may hold per idle range it
// serves, node layer included (docs/replication.md, "Memory per
// replica"): measured at 4.5 KiB with one node, bounded with margin.
const idleRangeHeapBound = 8 << 10

// TestIdleRangeHeapOnNode: a real node (one voter per range) is split
// through its admin API into 300 more ranges, each written once through
// the KV API and left to rest; the Go heap they added (after a
// collection), per range, stays under idleRangeHeapBound. Where raft's
// TestIdleReplicaHeap counts replicas with followers, this counts what
// the node layer keeps per range as well (load and hot-key tracking,
// range sizes). It waits on state only: no timing is measured.
func TestIdleRangeHeapOnNode(t *testing.T) {
	if testing.Short() {
		t.Skip("splits a range many times")
	}
	const n = 300
	tn := startNode(t, "", Config{})
	ctx := ctxT(t)
	if _, err := tn.kv.Put(ctx, &kvpb.PutRequest{Key: []byte("a"), Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	atRest := func(want int) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for {
			q := 0
			for _, r := range tn.n.store.Replicas() {
				if r.Status().Quiescent {
					q++
				}
			}
			if q == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d ranges at rest after 2 minutes", q, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	atRest(2)
	before := heapAfterGC()
	for i := n; i > 0; i-- {
		if _, err := tn.admin.Split(ctx, &kvpb.SplitRequest{SplitKey: []byte(fmt.Sprintf("idle-%06d", i))}); err != nil {
			t.Fatalf("split at idle-%06d: %v", i, err)
		}
	}
	value := make([]byte, 256)
	for i := 1; i <= n; i++ {
		if _, err := tn.kv.Put(ctx, &kvpb.PutRequest{Key: []byte(fmt.Sprintf("idle-%06d-w", i)), Value: value}); err != nil {
			t.Fatal(err)
		}
	}
	atRest(n + 2)
	per := float64(heapAfterGC()-before) / n
	t.Logf("%d idle ranges: %.1f KiB of Go heap each (bound %d KiB)", n, per/1024, idleRangeHeapBound>>10)
	if per > idleRangeHeapBound {
		t.Errorf("an idle range holds %.1f KiB of Go heap on its node, more than the bound of %d KiB", per/1024, idleRangeHeapBound>>10)
	}
}

// heapAfterGC returns the bytes of live Go heap after a full collection.
func heapAfterGC() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
