package raft

import (
	"fmt"
	"testing"
	"time"

	"github.com/shaledb/shale/raft/keys"
)

// TestCommitOnlyAppendsSkipLogWriter: sequential writes move each
// range's commit index on every replica with nothing else to persist, and
// those appends complete in their Ready instead of going through the log
// writer; every replica still applies every write and the range still
// goes to rest (which needs each follower's commit index and
// acknowledgements in place).
func TestCommitOnlyAppendsSkipLogWriter(t *testing.T) {
	rid := uint64(keys.FirstUserRangeID)
	c := newTestCluster(t, 3, nil)
	ctx := ctxT(t, 60*time.Second)
	if _, err := c.put(ctx, rid, "k", "v"); err != nil {
		t.Fatal(err)
	}
	sum := func() float64 {
		n := 0.0
		for _, s := range c.running() {
			n += counterValue(s.metrics.appendsWithoutWrite)
		}
		return n
	}
	inline0 := sum()
	const writes = 50
	var idx uint64
	for i := 0; i < writes; i++ {
		var err error
		if idx, err = c.put(ctx, rid, fmt.Sprintf("k%d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	c.waitApplied(rid, idx)
	for _, id := range c.ids() {
		for i := 0; i < writes; i += 7 {
			if v, _ := c.get(id, fmt.Sprintf("k%d", i)); v != "v" {
				t.Errorf("node %d holds k%d=%q, want v", id, i, v)
			}
		}
	}
	inline := sum() - inline0
	t.Logf("%d writes: %v appends completed without the log writer", writes, inline)
	// Each write's commit reaches at least one follower idle by then.
	if inline < writes {
		t.Errorf("%v appends completed without the log writer over %d writes, want at least %d", inline, writes, writes)
	}
	c.waitQuiescent(rid)
}
