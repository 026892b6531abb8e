package raft

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/shaledb/shale/raft/keys"
)

// TestApplyWriteSharedAcrossRanges: concurrent writes to eight ranges are
// applied with fewer engine writes than range applies (a round writes the
// client writes of all the ranges a worker handled at once), and every
// write is on every node afterwards, including those applied between a
// split's and a merge's own writes.
func TestApplyWriteSharedAcrossRanges(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	ctx := ctxT(t, 90*time.Second)
	rangeFor := map[string]uint64{"k0": keys.FirstUserRangeID}
	for i := 7; i >= 1; i-- {
		l := c.leader(keys.FirstUserRangeID)
		_, right, err := l.store.Split(ctx, keys.FirstUserRangeID, []byte(fmt.Sprintf("k%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		rangeFor[fmt.Sprintf("k%d", i)] = right.GetRangeId()
	}
	// Splitting the first range at k7, then k6 ... k1 leaves it ["", k1)
	// and the range of k_i covering [k_i, k_i+1).
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	const writers, each = 32, 20
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			prefix := fmt.Sprintf("k%d", w%8)
			for i := 0; i < each; i++ {
				if _, err := c.put(ctx, rangeFor[prefix], fmt.Sprintf("%s/%02d-%02d", prefix, w, i), "v"); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, rid := range rangeFor {
		l := c.leader(rid)
		r, _ := l.store.Replica(rid)
		c.waitApplied(rid, r.AppliedIndex())
	}
	for id := uint64(1); id <= 3; id++ {
		for w := 0; w < writers; w++ {
			for i := 0; i < each; i++ {
				k := fmt.Sprintf("k%d/%02d-%02d", w%8, w, i)
				if v, ok := c.get(id, k); !ok || v != "v" {
					t.Fatalf("node %d: %s = %q, %v", id, k, v, ok)
				}
			}
		}
	}
	var writes, applies, sent, coalesced float64
	for _, s := range c.running() {
		writes += counterValue(s.metrics.applyWrites)
		applies += counterValue(s.metrics.rangeApplies)
		sent += counterValue(s.metrics.messagesSent)
		coalesced += counterValue(s.metrics.messagesCoalesced)
	}
	t.Logf("%.0f apply writes for %.0f range applies; %.0f messages sent, %.0f empty appends coalesced", writes, applies, sent, coalesced)
	if writes >= applies {
		t.Fatalf("%.0f engine writes for %.0f range applies: the ranges of a round were not written together", writes, applies)
	}
}
