package tests

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// TestShardingLoadSplitUniform: a uniform load well over --split-qps does
// not keep splitting. Splitting by load helps while one range carries more
// than its share of its leader's load; once the ranges a node leads carry
// about the same traffic, another split only multiplies the ranges (and
// each range's per-round Raft work). So the cluster ends with a handful
// of ranges, where a bare QPS threshold splits until every range is below
// it (dozens here). TestShardingAutoSplit checks that a hot range still
// splits.
func TestShardingLoadSplitUniform(t *testing.T) {
	c := newCluster(t, 3, "--disable-auto-split=false", "--split-check-interval", "500ms",
		"--split-qps", "20", "--disable-placement=false", "--placement-interval", "1s")
	cl := c.client()

	// Reads of random keys spread over the whole key space: every range
	// sees traffic in proportion to its share of it.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, _, _ = cl.Get(rctx, []byte(fmt.Sprintf("u/%08d", rand.IntN(100000000))))
				rcancel()
			}
		}()
	}
	// Long enough for a bare threshold to split a few times over (one
	// check every 500 ms, each split halving a range's traffic).
	time.Sleep(15 * time.Second)
	close(stop)
	wg.Wait()

	n := rangeCount(t, cl)
	if n < 3 {
		t.Fatalf("%d ranges: the load passed --split-qps but nothing split", n)
	}
	// The meta range, plus about two user ranges per node: a node leading
	// one range splits it; leaders of ranges of equal load stop.
	if n > 10 {
		t.Fatalf("%d ranges after a uniform load: load splits did not stop at a fair share", n)
	}
	t.Logf("%d ranges after 15 s of uniform reads", n)
}
