package raft

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shaledb/shale/raft/keys"
)

// idleReplicaHeapBound is the Go heap one idle replica may hold, once its
// range is at rest on every node (docs/replication.md, "Memory per
// replica"): measured at 4.5 KiB, bounded with margin; before the apply
// batch was allocated lazily and freed at rest, and before the transport
// stopped keeping sent batches for replay, it was 17 KiB.
const idleReplicaHeapBound = 8 << 10

// TestIdleReplicaHeap: a 3-node cluster in one process, on the real
// engine, is split into many ranges, each replicated on every node,
// written once each and left to rest; the Go heap the splits added (after
// a collection), divided by the replicas they created, stays under
// idleReplicaHeapBound. It waits on state only: no timing is measured.
// SHALE_IDLE_REPLICA_RANGES sets the count (default 150);
// SHALE_IDLE_REPLICA_HEAPPROFILE names a file to write a heap profile to
// once every range is at rest (and, with ".base" added, one before the
// splits, for pprof -diff_base).
func TestIdleReplicaHeap(t *testing.T) {
	if testing.Short() {
		t.Skip("splits a range many times")
	}
	n := 150
	if v := os.Getenv("SHALE_IDLE_REPLICA_RANGES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("SHALE_IDLE_REPLICA_RANGES=%q: want a positive count", v)
		}
	}
	profile := os.Getenv("SHALE_IDLE_REPLICA_HEAPPROFILE")
	if profile != "" {
		// One allocation in about every KiB sampled: fine enough for a
		// per-replica profile, cheap enough to keep elections steady.
		defer func(rate int) { runtime.MemProfileRate = rate }(runtime.MemProfileRate)
		runtime.MemProfileRate = 1 << 10
	}
	c := newTestCluster(t, 3, nil)
	ctx := ctxT(t, 10*time.Minute)
	if _, err := c.put(ctx, keys.FirstUserRangeID, "k", "v"); err != nil {
		t.Fatal(err)
	}
	c.waitQuiescent(keys.FirstUserRangeID)
	c.waitQuiescent(keys.MetaRangeID)
	before := heapInUse()
	if profile != "" {
		writeHeapProfile(t, profile+".base")
	}

	// Split the first user range at descending keys: it keeps its ID and
	// its leader, and each split adds one range on every node.
	for i := n; i > 0; i-- {
		key := []byte(fmt.Sprintf("idle-%06d", i))
		for try := 0; ; try++ {
			l := c.leader(keys.FirstUserRangeID)
			_, _, err := l.store.Split(ctx, keys.FirstUserRangeID, key)
			// A split whose outcome was unknown and that applied leaves
			// the key a range's start: no split key any more.
			if err == nil || (try > 0 && errors.Is(err, ErrSplitKey)) {
				break
			}
			if ctx.Err() != nil || !(errors.Is(err, ErrNotLeader) || errors.Is(err, ErrUnavailable) || errors.Is(err, ErrAmbiguous)) {
				t.Fatalf("split %d at %q: %v", n-i, key, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// One write to each new range, so that each has applied a batch and
	// cached an entry before it rests: at rest it must give them back.
	value := strings.Repeat("v", 256)
	for i := 1; i <= n; i++ {
		key := fmt.Sprintf("idle-%06d-w", i)
		r, err := c.node(1).store.ReplicaForKey([]byte(key))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.put(ctx, r.RangeID(), key, value); err != nil {
			t.Fatalf("put %q: %v", key, err)
		}
	}
	waitFor(t, 5*time.Minute, fmt.Sprintf("%d ranges at rest on every node", n+2), func() bool {
		for _, s := range c.running() {
			if got := gaugeValue(s.metrics.quiescent); got != float64(n+2) {
				return false
			}
		}
		return true
	})
	after := heapInUse()
	if profile != "" {
		writeHeapProfile(t, profile)
	}
	per := float64(after-before) / float64(3*n)
	t.Logf("%d idle replicas added %d KiB of Go heap: %.1f KiB per replica (bound %d KiB)",
		3*n, (after-before)>>10, per/1024, idleReplicaHeapBound>>10)
	if per > idleReplicaHeapBound {
		t.Errorf("an idle replica holds %.1f KiB of Go heap, more than the bound of %d KiB", per/1024, idleReplicaHeapBound>>10)
	}
}

// heapInUse returns the bytes of live Go heap after a full collection.
func heapInUse() int64 {
	var ms runtime.MemStats
	for i := 0; i < 2; i++ {
		runtime.GC()
	}
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

func writeHeapProfile(t *testing.T, path string) {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		t.Fatal(err)
	}
}
