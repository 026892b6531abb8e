package jepsen

import (
	"context"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestLockCheckCatchesPlantedBug: lock workers with long turns run on a
// cluster of a faults build and the lock checker passes their history;
// then keep-alives are acknowledged without renewing leases
// (/debug/faults/lease-early on every node) and the workers run again: a
// holder's lease ends while it holds and believes it alive, the next
// worker takes the lock, and the checker must name the overlap.
func TestLockCheckCatchesPlantedBug(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping a multi-process test in -short mode")
	}
	c := startClusterBin(t, faultsBinary(t), filepath.Join(t.TempDir(), "c"), 3, false)
	runWorkers := func(d time.Duration) *lockWorkload {
		w := &lockWorkload{hold: func(r *rand.Rand) time.Duration { return 2*leaseTTL + time.Duration(r.Int64N(int64(time.Second))) }}
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		var wg sync.WaitGroup
		for i := range 2 {
			s, err := newSession(c, t)
			if err != nil {
				t.Fatal(err)
			}
			defer s.close()
			wg.Add(1)
			go func() { defer wg.Done(); w.worker(ctx, i, s, rand.New(rand.NewPCG(11, uint64(i)))) }()
		}
		wg.Wait()
		return w
	}
	plant := func(on bool) {
		method := map[bool]string{true: http.MethodPut, false: http.MethodDelete}[on]
		for _, nd := range c.nodes(false) {
			req, _ := http.NewRequest(method, "http://"+nd.httpAddr+"/debug/faults/lease-early", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s lease-early on node %d: %s", method, nd.id, resp.Status)
			}
		}
	}

	clean := runWorkers(25 * time.Second)
	cc := checkLocks(clean.holds)
	if p := cc.problems(); len(p) > 0 {
		t.Fatalf("without the planted bug the checker found: %v", p)
	}
	if cc.holds < 2 || cc.writes == 0 {
		t.Fatalf("%d turns and %d fenced writes (%d failures): the run checked nothing", cc.holds, cc.writes, clean.failures)
	}
	t.Logf("clean run: %d turns, %d fenced writes, %d fenced out; no violation", cc.holds, cc.writes, cc.fenced)

	plant(true)
	defer plant(false)
	planted := runWorkers(25 * time.Second)
	pc := checkLocks(planted.holds)
	if len(pc.overlaps) == 0 {
		t.Fatalf("with keep-alives that do not renew, the checker found no overlapping holders (%d turns, %d writes, %d fenced out)", pc.holds, pc.writes, pc.fenced)
	}
	t.Logf("planted bug caught: %v", pc.problems())
}
