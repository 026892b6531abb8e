package tests

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/shaledb/shale/client"
)

// TestClusterOracleCallFollowsMetaMove: a node's call to the timestamp
// oracle on meta's old leader, frozen by SIGSTOP, ends as soon as the
// node's replica of meta learns of the new leader, not at the call's
// attempt timeout (docs/unavailability.md). Every write of the node waits
// for that one call.
//
// To tell the two apart without a race against the election, the writing
// node (5) has an election timeout, and so an oracle attempt timeout, of
// 10 s, while the other four elect meta's new leader in about a second
// (they are a quorum of meta's five voters without node 5): a write there
// that waited out the attempt would take about 10 s after the pause.
func TestClusterOracleCallFollowsMetaMove(t *testing.T) {
	const writer = oracleMoveWriter
	c, wcl, oracle, attemptTimeout := oracleMoveCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	cn := c.node(oracle)
	if err := cn.proc.Pause(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cn.proc.Resume() }()
	paused := time.Now()
	done := make(chan error, 1)
	go func() { done <- wcl.Put(ctx, []byte("during"), []byte("pause")) }()

	// Wait until the writer's replica of meta knows the new leader.
	var learned time.Time
	for learned.IsZero() {
		select {
		case err := <-done:
			// Ended before the harness saw the writer learn: it cannot
			// have waited out the attempt.
			if err != nil {
				t.Fatalf("the write during the pause: %v", err)
			}
			if d := time.Since(paused); d > attemptTimeout/2 {
				t.Fatalf("the write ended %v after pausing the oracle on node %d (attempt timeout %v)", d, oracle, attemptTimeout)
			}
			return
		case <-time.After(20 * time.Millisecond):
		}
		if rs, err := c.rangeState(writer, metaRange); err == nil {
			if l := rs.GetLeaderNodeId(); l != 0 && l != oracle {
				learned = time.Now()
			}
		}
		if time.Since(paused) > attemptTimeout {
			t.Fatalf("the writer did not learn of a new leader of meta within %v of pausing node %d", attemptTimeout, oracle)
		}
	}
	// The write needs a round to the new oracle and a Raft round of the
	// user range: far below the attempt timeout, with room for a machine
	// running several clusters.
	bound := attemptTimeout / 4
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the write during the pause: %v", err)
		}
		t.Logf("the write ended %v after the pause, %v after the writer learned of meta's new leader",
			time.Since(paused).Round(time.Millisecond), time.Since(learned).Round(time.Millisecond))
	case <-time.After(bound):
		t.Fatalf("the write still waits %v after the writer learned of meta's new leader (%v after pausing the oracle on node %d; attempt timeout %v)",
			bound, time.Since(paused).Round(time.Millisecond), oracle, attemptTimeout)
	}
}

// TestClusterOracleCallAfterMetaMoved: a node's first oracle call after
// its replica of meta learned of meta's new leader goes to that leader,
// not to the old oracle its last successful call remembers. The old
// oracle is frozen by SIGSTOP (a partition cuts it off the same way), and
// no call of the writer is in flight while meta elects, so none is
// abandoned on the move: the call that follows the write made after the
// election must not wait out its attempt timeout (10 s at the writer)
// on the frozen node. In the unavailability bench a partitioned leader of
// both ranges left every write waiting on such a call for a whole attempt
// timeout (1 s) after both elections (docs/unavailability.md).
func TestClusterOracleCallAfterMetaMoved(t *testing.T) {
	const writer = oracleMoveWriter
	c, wcl, oracle, attemptTimeout := oracleMoveCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	cn := c.node(oracle)
	if err := cn.proc.Pause(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cn.proc.Resume() }()
	waitFor(t, attemptTimeout, "the writer's replica of meta learning of a new leader", func() bool {
		rs, err := c.rangeState(writer, metaRange)
		return err == nil && rs.GetLeaderNodeId() != 0 && rs.GetLeaderNodeId() != oracle
	})
	learned := time.Now()
	// The write needs a round to the new oracle (whose first issue raises
	// its window through meta's log) and a Raft round of the user range.
	wctx, wcancel := context.WithTimeout(ctx, attemptTimeout/4)
	defer wcancel()
	if err := wcl.Put(wctx, []byte("after"), []byte("move")); err != nil {
		t.Fatalf("the write after meta's new leader was known: %v (%v after; the writer's oracle attempt timeout %v)",
			err, time.Since(learned).Round(time.Millisecond), attemptTimeout)
	}
	t.Logf("the write ended %v after the writer learned of meta's new leader", time.Since(learned).Round(time.Millisecond))
}

// oracleMoveWriter is the node whose oracle calls the oracle-move tests watch.
const oracleMoveWriter = 5

// oracleMoveCluster starts the five nodes of the oracle-move tests:
// oracleMoveWriter leads the user range, so it takes its writes'
// timestamps, with an election timeout, and so an oracle attempt timeout,
// of attemptTimeout (10 s); another node, oracle, leads meta and holds the
// oracle, which the writer has called once (its replica of meta knows it,
// its transport remembers it). wcl writes through the writer.
func oracleMoveCluster(t *testing.T) (c *testCluster, wcl *client.Client, oracle uint64, attemptTimeout time.Duration) {
	const writer = oracleMoveWriter
	const slowTicks = 200 // x 50 ms ticks: a 10 s attempt timeout at the writer
	sec := &clusterCreds{nodeArgs: func(id uint64) []string {
		if id == writer {
			return []string{"--raft-election-ticks", fmt.Sprint(slowTicks)}
		}
		return nil
	}}
	c = newClusterWith(t, 5, sec)
	attemptTimeout = slowTicks * clusterTick
	cl := c.client(1, 2, 3, 4, 5)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// The writer leads the user range (so it takes its writes' timestamps)
	// and another node leads meta (so it holds the oracle).
	if err := cl.TransferLeader(ctx, userRange, writer); err != nil {
		t.Fatalf("moving the user range's leadership to node %d: %v", writer, err)
	}
	if l, _ := c.leader(metaRange, 10*time.Second); l == writer {
		if err := cl.TransferLeader(ctx, metaRange, 1); err != nil {
			t.Fatalf("moving meta's leadership off node %d: %v", writer, err)
		}
	}
	waitFor(t, 10*time.Second, "the writer leading the user range and another node meta", func() bool {
		u, _ := c.leader(userRange, 10*time.Second)
		m, _ := c.leader(metaRange, 10*time.Second)
		return u == writer && m != writer
	})
	oracle, _ = c.leader(metaRange, 10*time.Second)
	wcl = c.client(writer)
	// One write through the oracle on node oracle, so that the writer's
	// replica of meta knows it and its transport has dialed it.
	if err := wcl.Put(ctx, []byte("before"), []byte("pause")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the writer's replica of meta knowing its leader", func() bool {
		rs, err := c.rangeState(writer, metaRange)
		return err == nil && rs.GetLeaderNodeId() == oracle
	})
	return c, wcl, oracle, attemptTimeout
}
