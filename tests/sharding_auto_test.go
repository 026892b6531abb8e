package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// TestShardingAutoSplit: a range that outgrows --split-size splits at its
// middle, and a range whose traffic passes --split-qps splits at a key
// that divides it. Then shalectl lists the ranges and nodes, splits, and
// refuses a split at a range's start.
func TestShardingAutoSplit(t *testing.T) {
	c := newCluster(t, 3, "--disable-auto-split=false", "--split-check-interval", "500ms",
		"--split-size", "262144", "--split-qps", "200", "--engine-write-buffer-size", "131072",
		// The test's own load keeps the machine's CPUs busy; whether a
		// load split waits for spare CPU is TestShardingLoadSplitWaitsForSpareCPU's.
		"--split-host-cpu", "1")
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Size: about 1.5 MiB of values under "big/" splits by size (the
	// memtable is small, so the data reaches SST files, which the size
	// estimate counts). The values are random: the estimate counts
	// compressed bytes, and 1,500 copies of one repeated byte compress
	// to about 60 KiB, under --split-size: the test then depended on
	// what else the estimate happened to count, and on a loaded machine
	// it often saw no split at all.
	rng := rand.New(rand.NewPCG(1, 2))
	value := make([]byte, 1000)
	for i := 0; i < 1500; i++ {
		for j := range value {
			value[j] = byte(rng.Uint32())
		}
		if err := cl.Put(ctx, []byte(fmt.Sprintf("big/%05d", i)), value); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, 30*time.Second, "a split by size", func() string {
		if n := rangeCount(t, cl); n < 3 {
			return fmt.Sprintf("%d ranges", n)
		}
		return ""
	})
	if c.metric(1, "shale_raft_range_splits_total")+c.metric(2, "shale_raft_range_splits_total")+
		c.metric(3, "shale_raft_range_splits_total") < 1 {
		t.Fatal("ranges multiplied but no node counts a split")
	}
	before := rangeCount(t, cl)

	// Load: reads hammer "hot/" keys (few bytes: no size split) at well
	// over 200 requests/s; the range holding them splits inside "hot/".
	for i := 0; i < 100; i++ {
		if err := cl.Put(ctx, []byte(fmt.Sprintf("hot/%03d", i)), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	stopReads := startReads(cl, 8, func(n int) string { return fmt.Sprintf("hot/%03d", n%100) })
	waitUntil(t, 30*time.Second, "a split by load inside hot/", func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		rs, err := cl.Ranges(ctx)
		if err != nil {
			return err.Error()
		}
		for _, r := range rs.GetRanges() {
			k := string(r.GetRangeDescriptor().GetStartKey())
			if strings.HasPrefix(k, "hot/") && k > "hot/000" {
				return ""
			}
		}
		return fmt.Sprintf("%d ranges, none starting inside hot/", len(rs.GetRanges()))
	})
	stopReads()
	if rangeCount(t, cl) <= before {
		t.Fatal("the load split did not add a range")
	}

	// shalectl.
	ep := c.node(1).grpcAddr
	out, errOut, code := runCtl(t, ep, "split", "m/1")
	if code != 0 || !strings.Contains(out, `m/1)`) {
		t.Fatalf("shalectl split: %d %q %q", code, out, errOut)
	}
	_, errOut, code = runCtl(t, ep, "split", "m/1")
	if code == 0 || !strings.Contains(errOut, "not strictly inside") {
		t.Fatalf("shalectl split at a range's start: exit %d, %q; want a clear refusal", code, errOut)
	}
	out, errOut, code = runCtl(t, ep, "ranges")
	if code != 0 || !strings.Contains(out, "LEADER") || !strings.Contains(out, `[m/1, `) {
		t.Fatalf("shalectl ranges: %d %q %q", code, out, errOut)
	}
	// Every range lists its leader. A range the load split just made
	// may still be electing its first one (on a loaded machine, beyond
	// the campaign the split starts), so the listing is asked again
	// until it names them all.
	waitUntil(t, 15*time.Second, "shalectl ranges --json naming every range's leader", func() string {
		out, errOut, code := runCtl(t, ep, "ranges", "--json")
		var rs struct {
			Ranges []struct {
				Descriptor struct {
					RangeID uint64 `json:"rangeId"`
				} `json:"descriptor"`
				LeaderNodeID uint64 `json:"leaderNodeId"`
			} `json:"ranges"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &rs) != nil || len(rs.Ranges) != rangeCount(t, cl) {
			t.Fatalf("shalectl ranges --json: %d %q %q", code, out, errOut)
		}
		for _, r := range rs.Ranges {
			if r.LeaderNodeID == 0 {
				return fmt.Sprintf("range %d without a leader: %s", r.Descriptor.RangeID, out)
			}
		}
		return ""
	})
	out, errOut, code = runCtl(t, ep, "nodes")
	if code != 0 || strings.Count(out, "live") != 3 {
		t.Fatalf("shalectl nodes: %d %q %q", code, out, errOut)
	}
}
