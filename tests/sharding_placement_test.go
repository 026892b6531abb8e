package tests

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/client"
)

// placementFlags turn the controller on with test timings.
var placementFlags = []string{"--disable-placement=false", "--placement-interval", "300ms",
	"--dead-node-timeout", "3s", "--placement-max-moves", "6"}

// replicaCounts returns, from meta, how many replicas and (per the
// leaders' own reports) leaders each node holds.
func replicaCounts(t *testing.T, cl *client.Client) (replicas, leaders map[uint64]int, ranges []*kvpb.RangeStatus) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rs, err := cl.Ranges(ctx)
	if err != nil {
		t.Fatal(err)
	}
	replicas, leaders = map[uint64]int{}, map[uint64]int{}
	for _, r := range rs.GetRanges() {
		for _, rd := range r.GetRangeDescriptor().GetReplicas() {
			replicas[rd.GetNodeId()]++
		}
		if r.GetLeaderNodeId() != 0 {
			leaders[r.GetLeaderNodeId()]++
		}
	}
	return replicas, leaders, rs.GetRanges()
}

// waitUntil polls cond every 200ms until it returns "" or timeout passes,
// then fails with cond's last complaint.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		msg := cond()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v: %s", what, timeout, msg)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestShardingPlacement: on a 3-node cluster with 12 ranges, a 4th and a
// 5th node join and get a fair share of replicas and leaders; then one
// node is killed and its replicas are re-created elsewhere after the dead
// node timeout, while writes go on; then another node is decommissioned
// and drained to zero replicas. No acknowledged write is lost.
func TestShardingPlacement(t *testing.T) {
	c := newCluster(t, 3, placementFlags...)
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for i := 1; i <= 10; i++ {
		if _, _, err := cl.Split(ctx, []byte(fmt.Sprintf("pl-%04d", i*100))); err != nil {
			t.Fatal(err)
		}
	}
	w := startWriter(cl, "pl", 4, 0, 150*time.Second)

	// 1. Two nodes join: each gets a fair share. 12 ranges x 3 replicas
	// over 5 nodes is 7.2 each: every node ends with 7 or 8 (the
	// controller stops when max - min <= 1), and leads at least one.
	for _, id := range []uint64{4, 5} {
		c.newNode(id)
		c.start(id, "--join", c.node(1).grpcAddr)
	}
	waitUntil(t, 60*time.Second, "nodes 4 and 5 get a fair share", func() string {
		reps, leads, ranges := replicaCounts(t, cl)
		lo, hi := 1<<30, 0
		for id := uint64(1); id <= 5; id++ {
			lo, hi = min(lo, reps[id]), max(hi, reps[id])
		}
		if hi-lo > 1 || leads[4] == 0 || leads[5] == 0 {
			return fmt.Sprintf("replicas %v, leaders %v, %d ranges", reps, leads, len(ranges))
		}
		return ""
	})
	reps, leads, _ := replicaCounts(t, cl)
	t.Logf("after the joins: replicas per node %v, leaders %v", reps, leads)

	// 2. A node dies: after the dead node timeout its replicas live
	// elsewhere, and writes continue.
	victim := uint64(5)
	before := w.count()
	c.node(victim).kill()
	start := time.Now()
	// (A move to node 5 in flight when it dies holds the controller up to
	// its 20 s move timeout.)
	waitUntil(t, 90*time.Second, "node 5's replicas re-created elsewhere", func() string {
		reps, _, ranges := replicaCounts(t, cl)
		for _, r := range ranges {
			if n := len(r.GetRangeDescriptor().GetReplicas()); n != 3 {
				return fmt.Sprintf("range %d has %d replicas", r.GetRangeDescriptor().GetRangeId(), n)
			}
		}
		if reps[victim] != 0 {
			return fmt.Sprintf("node %d still holds %d replicas", victim, reps[victim])
		}
		return ""
	})
	t.Logf("node %d's replicas moved %v after it died", victim, time.Since(start).Round(100*time.Millisecond))
	if time.Since(start) < 3*time.Second {
		t.Fatalf("replicas moved %v after the kill, before the 3s dead node timeout", time.Since(start))
	}
	waitUntil(t, 30*time.Second, "writes continue after the repair", func() string {
		if w.count() < before+200 {
			return fmt.Sprintf("%d writes since the kill", w.count()-before)
		}
		return ""
	})

	// 3. Decommission drains a node to zero replicas.
	drained := uint64(4)
	left, err := cl.Decommission(ctx, drained, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("node %d holds %d replicas when its decommission starts", drained, left)
	waitUntil(t, 60*time.Second, "decommissioned node drained", func() string {
		reps, leads, _ := replicaCounts(t, cl)
		if reps[drained] != 0 || leads[drained] != 0 {
			return fmt.Sprintf("node %d holds %d replicas, leads %d", drained, reps[drained], leads[drained])
		}
		return ""
	})
	waitUntil(t, 10*time.Second, "the drained node reported as decommissioned", func() string {
		nodes, err := cl.Nodes(ctx)
		if err != nil {
			return err.Error()
		}
		for _, ns := range nodes.GetNodes() {
			if ns.GetNode().GetNodeId() == drained && ns.GetState() != kvpb.NodeState_NODE_STATE_DECOMMISSIONED {
				return fmt.Sprintf("node %d is %v", drained, ns.GetState())
			}
		}
		return ""
	})
	acked := w.finish()
	t.Logf("%d writes acknowledged, %d ambiguous, %d failed (last: %v)", len(acked), w.ambiguous, w.failed, w.lastErr)
	checkAcked(t, cl, acked)
}
