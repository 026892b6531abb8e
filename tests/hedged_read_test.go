package tests

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/shaledb/shale/client"
)

// hedgeClient dials every node with a long attempt timeout and a short
// hedge delay, so that only hedging can answer a read held up by a node
// well before the attempt times out (hedge is client.Options.HedgeDelay).
func (c *testCluster) hedgeClient(attempt, hedge time.Duration) *client.Client {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, c.endpoints(), &client.Options{RequestTimeout: 30 * time.Second, AttemptTimeout: attempt, HedgeDelay: hedge})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { cl.Close() })
	return cl
}

// TestClusterHedgedStaleReadsPassOverAPausedNode pauses (SIGSTOP) the node
// the client routes the user range's reads to (its leader). Stale reads -
// Get, BatchGet and a Scan page - must be answered by another replica
// about one hedge delay later, far below the attempt timeout of 5 s that
// is all a client without hedging has to move on.
func TestClusterHedgedStaleReadsPassOverAPausedNode(t *testing.T) {
	c := newCluster(t, 3)
	const attempt, hedge = 5 * time.Second, 100 * time.Millisecond
	cl := c.hedgeClient(attempt, hedge)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	keys := [][]byte{[]byte("h1"), []byte("h2"), []byte("h3")}
	for _, k := range keys {
		if err := cl.Put(ctx, k, []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	// Every replica has applied the writes (stale reads of a lagging
	// follower could miss them).
	lead, _ := c.leader(userRange, 10*time.Second)
	rs, err := c.rangeState(lead, userRange)
	if err != nil {
		t.Fatal(err)
	}
	for _, cn := range c.all() {
		c.waitApplied(cn.id, userRange, rs.GetRaft().GetAppliedIndex(), 10*time.Second)
	}
	// The client's cache names the leader: its reads go there first.
	if _, _, err := cl.Get(ctx, keys[0], client.StaleRead(time.Minute)); err != nil {
		t.Fatal(err)
	}
	cn := c.node(lead)
	if err := cn.proc.Pause(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cn.proc.Resume() }()

	bound := attempt / 5 // a hedge delay plus a loaded machine's slack
	timed := func(what string, f func(ctx context.Context) error) {
		t.Helper()
		rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
		defer rcancel()
		start := time.Now()
		err := f(rctx)
		took := time.Since(start)
		t.Logf("%s with n%d paused: %v (%v)", what, lead, took, err)
		switch {
		case err != nil:
			t.Errorf("%s: %v", what, err)
		case took > bound:
			t.Errorf("%s took %v with n%d paused, over %v (hedge delay %v, attempt timeout %v)", what, took, lead, bound, hedge, attempt)
		}
	}
	for i := 0; i < 3; i++ {
		timed(fmt.Sprintf("stale Get %d", i), func(ctx context.Context) error {
			v, found, err := cl.Get(ctx, keys[i], client.StaleRead(time.Minute))
			if err == nil && (!found || string(v) != "v") {
				err = fmt.Errorf("got %q, %v", v, found)
			}
			return err
		})
	}
	timed("stale BatchGet", func(ctx context.Context) error {
		res, err := cl.BatchGet(ctx, keys, client.StaleRead(time.Minute))
		for i, r := range res {
			if err == nil && (!r.Found || string(r.Value) != "v") {
				err = fmt.Errorf("key %s: %+v", keys[i], r)
			}
		}
		return err
	})
	timed("stale Scan", func(ctx context.Context) error {
		n := 0
		for _, err := range cl.Scan(ctx, []byte("h"), []byte("i"), nil, client.StaleRead(time.Minute)) {
			if err != nil {
				return err
			}
			n++
		}
		if n != len(keys) {
			return fmt.Errorf("scanned %d keys, want %d", n, len(keys))
		}
		return nil
	})
}

// TestClusterHedgedReadsPassOverADiskStalledLeader stalls the disk of the
// user range's leader while a write is in flight there: the write
// commits on the followers, but the leader cannot apply it, so a
// linearizable read it serves waits on its disk. Such a read must be
// answered within two election timeouts (plus slack) by the follower the
// leadership moves to (raft/diskstall.go): hedges to the followers learn
// the new leader, where a client without hedging waits out its attempt
// timeout of 10 s at the stalled node.
func TestClusterHedgedReadsPassOverADiskStalledLeader(t *testing.T) {
	c := newFaultsCluster(t, 3)
	const attempt, hedge = 10 * time.Second, 100 * time.Millisecond
	cl := c.hedgeClient(attempt, hedge)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cl.Put(ctx, []byte("k"), []byte("v1")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := cl.Get(ctx, []byte("k")); err != nil {
		t.Fatal(err)
	}
	old, _ := c.leader(userRange, 10*time.Second)
	if err := c.setDiskDelay(old, "sync", 50*time.Second); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.setDiskDelay(old, "", 0) }()
	stalled := time.Now()
	// A write in flight on the stalled leader: committed by the
	// followers, not applicable there.
	wdone := make(chan error, 1)
	go func() { wdone <- cl.Put(ctx, []byte("k"), []byte("v2")) }()
	time.Sleep(2 * clusterTick) // let it reach the leader

	bound := 2*electionTimeout + electionTimeout // slack for a loaded 2-core machine
	for time.Since(stalled) < 3*electionTimeout {
		start := time.Now()
		rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
		v, _, err := cl.Get(rctx, []byte("k"))
		rcancel()
		took := time.Since(start)
		if err != nil {
			t.Fatalf("Get after stalling n%d's disk: %v (after %v)", old, err, took)
		}
		if took > bound {
			t.Fatalf("a Get took %v after stalling the leader n%d's disk, over %v (hedge delay %v, attempt timeout %v)", took, old, bound, hedge, attempt)
		}
		if took > hedge {
			t.Logf("Get %v after the stall: %q in %v", time.Since(stalled).Round(time.Millisecond), v, took.Round(time.Millisecond))
		}
	}
	if err := c.setDiskDelay(old, "", 0); err != nil {
		t.Fatal(err)
	}
	if err := <-wdone; err != nil {
		t.Logf("the write in flight at the stall: %v", err)
	}
}
