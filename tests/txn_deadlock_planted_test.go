package tests

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shaledb/shale/client"
)

// setDeadlockIgnore plants (on) or removes the deadlock detector's bug
// on every node of a faults cluster: a waiter that finds itself in a
// cycle keeps waiting instead of giving up (node/faults_on.go).
func setDeadlockIgnore(t *testing.T, c *testCluster, on bool) {
	t.Helper()
	method := http.MethodDelete
	if on {
		method = http.MethodPut
	}
	for _, cn := range c.all() {
		req, err := http.NewRequest(method, "http://"+cn.httpAddr+"/debug/faults/deadlock-ignore", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s deadlock-ignore on %s: %s", method, cn.httpAddr, resp.Status)
		}
	}
}

// TestTxnDeadlockPlantedBugCaught shows the deadlock detector catching a
// planted bug. Two transactions lock two accounts in opposite orders
// (one in each of two ranges), each taking its first lock before either
// asks for its second: a deadlock. With the detector's cycle breaking
// disabled on every node (a faults build's deadlock-ignore), the
// workload stalls: nothing commits and no deadlock is counted until a
// wait ends by its bound (shale_txn_lock_wait_timeouts_total), the only
// thing left that ends it. With the detector on (the same workload on
// fresh accounts), the younger gives up, both commit, a deadlock is
// counted, and no wait ends by its bound.
func TestTxnDeadlockPlantedBugCaught(t *testing.T) {
	c := newFaultsCluster(t, 3)
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, _, err := cl.Split(ctx, []byte("dp/m")); err != nil {
		t.Fatal(err)
	}
	counts := func() (deadlocks, timeouts float64) {
		return c.metricSum("shale_txn_deadlocks_total"), c.metricSum("shale_txn_lock_wait_timeouts_total")
	}
	// deadlock runs the two transfers on a and z in opposite orders
	// until both end (ctx bounds them), counting in committed each that
	// commits as it does; it returns their errors.
	deadlock := func(ctx context.Context, a, z []byte, committed *atomic.Int32) []error {
		for _, k := range [][]byte{a, z} {
			if err := cl.Put(ctx, k, []byte("100")); err != nil {
				t.Fatal(err)
			}
		}
		var both sync.WaitGroup // both hold their first lock
		both.Add(2)
		run := func(first, second []byte) error {
			var runs atomic.Int32
			err := cl.Txn(ctx, func(tx *client.Tx) error {
				n := runs.Add(1)
				fv, _, err := tx.GetForUpdate(ctx, first)
				if err != nil {
					return err
				}
				if n == 1 {
					both.Done()
					both.Wait()
				}
				sv, _, err := tx.GetForUpdate(ctx, second)
				if err != nil {
					return err
				}
				return putTransfer(tx, first, second, fv, sv, 1)
			})
			if err == nil {
				committed.Add(1)
			}
			return err
		}
		errs := make([]error, 2)
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); errs[0] = run(a, z) }()
		go func() { defer wg.Done(); errs[1] = run(z, a) }()
		wg.Wait()
		return errs
	}

	// Planted: the cycle is not broken.
	setDeadlockIgnore(t, c, true)
	d0, t0 := counts()
	var plantedCommits atomic.Int32
	pctx, stop := context.WithCancel(ctx)
	done := make(chan []error, 1)
	go func() { done <- deadlock(pctx, []byte("dp/a1"), []byte("dp/z1"), &plantedCommits) }()
	for {
		d, to := counts()
		if d != d0 {
			t.Fatalf("with deadlock breaking off, the nodes counted %v deadlocks broken", d-d0)
		}
		if n := plantedCommits.Load(); n > 0 {
			t.Fatalf("with deadlock breaking off, %d transfer(s) committed before any wait ended by its bound: the deadlock was never there", n)
		}
		if to > t0 {
			break // stalled until the bound ended a wait
		}
		select {
		case <-ctx.Done():
			t.Fatal("with deadlock breaking off, no wait ended by its bound either")
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Log("planted bug caught: the deadlocked transfers stalled until a wait ended by its bound")
	stop()
	<-done
	setDeadlockIgnore(t, c, false)

	// The detector on: the younger gives up, both commit.
	d0, t0 = counts()
	var commits atomic.Int32
	start := time.Now()
	for _, err := range deadlock(ctx, []byte("dp/a2"), []byte("dp/z2"), &commits) {
		if err != nil {
			t.Fatal(err)
		}
	}
	d, to := counts()
	if commits.Load() != 2 {
		t.Fatalf("%d of the 2 deadlocked transfers committed with the detector on", commits.Load())
	}
	if d == d0 {
		t.Fatal("the detector on counted no deadlock")
	}
	if to != t0 {
		t.Fatalf("with the detector on, %v waits ended by their bound", to-t0)
	}
	t.Logf("with the detector on, the deadlock was broken and both committed in %v", time.Since(start).Round(time.Millisecond))
}
