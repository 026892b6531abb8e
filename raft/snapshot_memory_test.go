package raft

import (
	"fmt"
	"testing"
	"time"

	"github.com/shaledb/shale/raft/keys"
)

// TestSnapshotWaitsForMemory: an incoming snapshot whose node has no room
// left in the allowance of incoming snapshots is not staged (its sender
// is held back) until room is made; then it is applied and the node
// catches up.
func TestSnapshotWaitsForMemory(t *testing.T) {
	mem := newSnapshotMemory(64 << 10)
	var down uint64
	c := newTestCluster(t, 3, func(cfg *Config) {
		cfg.LogTruncateMinEntries = 20
		cfg.LogMaxEntries = 100
		if cfg.NodeID == down {
			cfg.testSnapshotMemory = mem
		}
	})
	ctx := ctxT(t, 90*time.Second)
	l := c.leader(keys.FirstUserRangeID)
	for _, id := range c.ids() {
		if id != l.id {
			down = id
			break
		}
	}
	c.stop(down)
	var last uint64
	for i := 0; i < 400; i++ {
		idx, err := c.put(ctx, keys.FirstUserRangeID, fmt.Sprintf("k%04d", i), fmt.Sprint("v", i))
		if err != nil {
			t.Fatal(err)
		}
		last = idx
	}
	// Other snapshots hold the whole allowance.
	if err := mem.sem.Acquire(ctx, mem.limit); err != nil {
		t.Fatal(err)
	}
	held := true
	defer func() {
		if held {
			mem.sem.Release(mem.limit)
		}
	}()
	c.start(down)
	// The leader sends the snapshot (its log was truncated past the down
	// node); the node cannot stage it. Watch for a while that it does
	// not: the snapshot would be counted as received once staged.
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if got := counterValue(c.storeOf(down).metrics.snapshotsReceived); got != 0 {
			t.Fatalf("node %d staged a snapshot with no room in the allowance", down)
		}
	}
	mem.sem.Release(mem.limit)
	held = false
	c.waitApplied(keys.FirstUserRangeID, last)
	if got := counterValue(c.storeOf(down).metrics.snapshotsReceived); got < 1 {
		t.Fatalf("node %d caught up without a snapshot", down)
	}
	for i := 0; i < 400; i += 37 {
		if v, ok := c.get(down, fmt.Sprintf("k%04d", i)); !ok || v != fmt.Sprint("v", i) {
			t.Fatalf("node %d after the snapshot: k%04d = %q %v", down, i, v, ok)
		}
	}
	// Everything it took is given back: the handler releases its share
	// once it returns, which may be after the snapshot is applied, so
	// wait for the whole allowance (ctx bounds the wait).
	if err := mem.sem.Acquire(ctx, mem.limit); err != nil {
		t.Fatalf("the allowance was not given back after the snapshot was applied: %v", err)
	}
	mem.sem.Release(mem.limit)
}
