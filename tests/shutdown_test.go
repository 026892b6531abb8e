package tests

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestGracefulStopHandsOffLeadership: a leader stopped with SIGTERM hands
// its ranges to another voter before it exits, so a new leader is in place
// long before a follower's election timeout (set to 5-10 s here) could
// have elected one, and writes go on.
func TestGracefulStopHandsOffLeadership(t *testing.T) {
	// 100 ticks of 50 ms: an election needs 5-10 s of silence.
	c := newCluster(t, 3, "--raft-election-ticks", "100")
	old, _ := c.leader(2, 30*time.Second)
	cl := c.client()
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.Put(ctx, []byte("k"), []byte("before")); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	c.stop(old)
	stopped := time.Since(start)
	next, waited := c.leader(2, 15*time.Second)
	if next == old {
		t.Fatalf("node %d still leads after it stopped", old)
	}
	if total := stopped + waited; total > 3*time.Second {
		t.Fatalf("range 2 had no leader for %v after SIGTERM to its leader (stop %v): no hand-off", total, stopped)
	}
	if !strings.Contains(c.node(old).log(), "handed off leadership") {
		t.Errorf("node %d's log does not mention the hand-off:\n%s", old, tail(c.node(old).log(), 20))
	}
	if err := cl.Put(ctx, []byte("k"), []byte("after")); err != nil {
		t.Fatalf("write after the leader stopped: %v", err)
	}
	t.Logf("node %d stopped in %v; node %d led %v later", old, stopped.Round(time.Millisecond), next, waited.Round(time.Millisecond))
}
