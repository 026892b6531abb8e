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

// TestLeaseCheckCatchesPlantedBug: lease workers run on a cluster of a
// faults build and the lease checker (lease_check_test.go) passes their
// history. Then the planted bug is set on every node (a faults build's
// /debug/faults/lease-early: keep-alives are acknowledged without
// renewing the lease) and the workers run again: the checker must report
// keys that went before their TTL since the last acknowledged keep-alive.
func TestLeaseCheckCatchesPlantedBug(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping a multi-process test in -short mode")
	}
	c := startClusterBin(t, faultsBinary(t), filepath.Join(t.TempDir(), "c"), 3, false)
	runWorkers := func(d time.Duration) *leaseWorkload {
		w := &leaseWorkload{}
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		var wg sync.WaitGroup
		for i := range 3 {
			s, err := newSession(c, t)
			if err != nil {
				t.Fatal(err)
			}
			defer s.close()
			wg.Add(1)
			go func() { defer wg.Done(); w.worker(ctx, i, s, rand.New(rand.NewPCG(7, uint64(i)))) }()
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

	clean := runWorkers(20 * time.Second)
	cc := checkLeases(clean.sessions, nil, time.Time{})
	if p := cc.problems(); len(p) > 0 {
		t.Fatalf("without the planted bug the checker found: %v", p)
	}
	if cc.kept == 0 {
		t.Fatalf("no session had an acknowledged keep-alive (%d sessions, %d failures): the run checked nothing", cc.sessions, clean.failures)
	}
	t.Logf("clean run: %d sessions, %d kept alive, %d revoked; no violation", cc.sessions, cc.kept, cc.revoked)

	plant(true)
	defer plant(false)
	planted := runWorkers(20 * time.Second)
	pc := checkLeases(planted.sessions, nil, time.Time{})
	if len(pc.early) == 0 {
		t.Fatalf("with keep-alives that do not renew, the checker found no key gone early (%d sessions, %d kept alive)", pc.sessions, pc.kept)
	}
	t.Logf("planted bug caught: %v", pc.problems())
}
