package raft

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shaledb/shale/raft/keys"
)

// TestTruncateByBytes: a log of few but large entries is truncated once
// the entries that can go hold LogTruncateMinBytes, long before there are
// LogTruncateMinEntries of them, so that they are deleted while still in
// the memtable; a log of as many small entries is not.
func TestTruncateByBytes(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) {
		cfg.LogTruncateMinEntries = 1000
		cfg.LogTruncateMinBytes = 256 << 10
	})
	ctx := ctxT(t, 60*time.Second)
	// 40 small entries: a few KiB of log, nothing to truncate.
	var last uint64
	for i := 0; i < 40; i++ {
		idx, err := c.put(ctx, keys.FirstUserRangeID, fmt.Sprintf("small%02d", i), "v")
		if err != nil {
			t.Fatal(err)
		}
		last = idx
	}
	c.waitApplied(keys.FirstUserRangeID, last)
	before := mustStatus(t, c.leader(keys.FirstUserRangeID), keys.FirstUserRangeID).Truncated
	// 40 entries of 32 KiB: 1.25 MiB of log, several truncations' worth.
	big := strings.Repeat("x", 32<<10)
	for i := 0; i < 40; i++ {
		idx, err := c.put(ctx, keys.FirstUserRangeID, fmt.Sprintf("big%02d", i), big)
		if err != nil {
			t.Fatal(err)
		}
		last = idx
	}
	c.waitApplied(keys.FirstUserRangeID, last)
	// Every replica truncates its own log: each one's is now short.
	waitFor(t, 10*time.Second, "every replica's log truncated by bytes", func() bool {
		for _, s := range c.running() {
			r, err := s.Replica(keys.FirstUserRangeID)
			if err != nil {
				return false
			}
			st := r.Status()
			if st.Truncated <= before || st.LastIndex-st.Truncated > 20 {
				return false
			}
		}
		return true
	})
	if before > 10 {
		// The small entries alone (under LogTruncateMinBytes) must not
		// have been truncated; the bootstrap entries may be.
		t.Fatalf("small entries truncated to %d", before)
	}
	for _, id := range c.ids() {
		if v, ok := c.get(id, "big39"); !ok || v != big {
			t.Fatalf("node %d lost big39", id)
		}
	}
}
