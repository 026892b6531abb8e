package tests

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/client"
)

// TestNodeRemoveCoordinatesWithPlacement: on a 4-node cluster with
// placement on and ranges of three replicas, shalectl node remove 4
// replaces node 4's replicas on the other nodes (no range ever has fewer
// than three voters), succeeds, and placement never puts a replica back
// on node 4. It used to remove the replicas outright (ranges at two
// copies), race placement (which moved one back to node 4 seconds later)
// and time out.
func TestNodeRemoveCoordinatesWithPlacement(t *testing.T) {
	c := newCluster(t, 3, placementFlags...)
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for i := 1; i <= 4; i++ {
		if _, _, err := cl.Split(ctx, []byte(fmt.Sprintf("rm-%04d", i*100))); err != nil {
			t.Fatal(err)
		}
	}
	c.newNode(4)
	c.start(4, "--join", c.node(1).grpcAddr)
	waitUntil(t, 60*time.Second, "node 4 gets replicas", func() string {
		reps, _, _ := replicaCounts(t, cl)
		if reps[4] < 3 {
			return fmt.Sprintf("replicas per node %v", reps)
		}
		return ""
	})

	// Watch every range's voters while node 4 is removed.
	var mu sync.Mutex
	fewest, fewestAt := 3, ""
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
			rs, err := cl.Ranges(rctx)
			rcancel()
			if err != nil {
				continue
			}
			for _, r := range rs.GetRanges() {
				d := r.GetRangeDescriptor()
				if d.GetRangeId() == 0 {
					continue
				}
				v := 0
				for _, rd := range d.GetReplicas() {
					if rd.GetType() != kvpb.ReplicaType_REPLICA_TYPE_LEARNER {
						v++
					}
				}
				mu.Lock()
				if v < fewest {
					fewest, fewestAt = v, fmt.Sprintf("range %d: %v", d.GetRangeId(), d.GetReplicas())
				}
				mu.Unlock()
			}
		}
	}()
	stdout, stderr, code := runCtl(t, c.node(1).grpcAddr, "--timeout", "90s", "node", "remove", "4")
	close(stop)
	wg.Wait()
	if code != 0 {
		t.Fatalf("shalectl node remove 4: exit %d: %s%s", code, stdout, stderr)
	}
	if fewest < 3 {
		t.Errorf("a range dropped to %d voters during the removal: %s", fewest, fewestAt)
	}
	// Placement passes run every 300ms: give it many, and check that
	// nothing comes back to node 4 and every range keeps three replicas.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		reps, _, ranges := replicaCounts(t, cl)
		if reps[4] != 0 {
			t.Fatalf("node 4 holds %d replicas after its removal", reps[4])
		}
		for _, r := range ranges {
			if n := len(r.GetRangeDescriptor().GetReplicas()); n < 3 {
				t.Fatalf("range %d has %d replicas after the removal", r.GetRangeDescriptor().GetRangeId(), n)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	nodes, err := cl.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range nodes.GetNodes() {
		if ns.GetNode().GetNodeId() == 4 {
			t.Errorf("node 4 is still registered: %v", ns)
		}
	}
	if !strings.Contains(stdout, "node 4 removed") {
		t.Errorf("shalectl said %q", stdout)
	}
}

// TestRemoveThreeNodesHoldingARange: removing at once the three nodes
// that hold every voter of a range (its leader listed first) replaces all
// three. Placement used to try the leader's replica first every pass,
// which needs a usable voter to take the leadership, found none, and left
// the range on the drained nodes: the removals never finished.
func TestRemoveThreeNodesHoldingARange(t *testing.T) {
	c := newCluster(t, 3, placementFlags...)
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for i := 1; i <= 5; i++ {
		if _, _, err := cl.Split(ctx, []byte(fmt.Sprintf("rm3-%04d", i*100))); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []uint64{4, 5, 6} {
		c.newNode(id)
		c.start(id, "--join", c.node(1).grpcAddr)
	}
	var pick *kvpb.RangeDescriptor
	waitUntil(t, 90*time.Second, "replicas spread, one user range off node 1", func() string {
		reps, _, ranges := replicaCounts(t, cl)
		lo, hi := 1<<30, 0
		for id := uint64(1); id <= 6; id++ {
			lo, hi = min(lo, reps[id]), max(hi, reps[id])
		}
		if hi-lo > 1 {
			return fmt.Sprintf("replicas per node %v", reps)
		}
		pick = nil
		for _, r := range ranges {
			d := r.GetRangeDescriptor()
			if d.GetRangeId() != 1 && voters(d) == 3 && len(d.GetReplicas()) == 3 && !holdsReplica(d, 1) {
				pick = d
			}
		}
		if pick == nil {
			return "every user range has a replica on node 1"
		}
		return ""
	})
	var victims []uint64
	for _, rd := range pick.GetReplicas() {
		victims = append(victims, rd.GetNodeId())
	}
	if err := cl.TransferLeader(ctx, pick.GetRangeId(), victims[0]); err != nil {
		t.Fatal(err)
	}
	t.Logf("removing nodes %v, which hold range %d (led by node %d)", victims, pick.GetRangeId(), victims[0])
	rest := c.client(1) // node 1 stays
	var wg sync.WaitGroup
	errs := make([]error, len(victims))
	for i, id := range victims {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rctx, rcancel := context.WithTimeout(ctx, 90*time.Second)
			defer rcancel()
			// A removal whose outcome is unknown (a leadership change
			// on meta) is asked again; NotFound then means the first
			// one applied.
			for try := 0; ; try++ {
				err := rest.RemoveNode(rctx, id, true)
				if try > 0 && errors.Is(err, client.ErrNotFound) {
					err = nil
				}
				if !errors.Is(err, client.ErrAmbiguous) || rctx.Err() != nil {
					errs[i] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("removing node %d: %v", victims[i], err)
		}
	}
	_, _, ranges := replicaCounts(t, rest)
	for _, r := range ranges {
		d := r.GetRangeDescriptor()
		if voters(d) != 3 {
			t.Errorf("range %d has %d voters after the removals: %v", d.GetRangeId(), voters(d), d.GetReplicas())
		}
		for _, id := range victims {
			if holdsReplica(d, id) {
				t.Errorf("range %d still has a replica on removed node %d", d.GetRangeId(), id)
			}
		}
	}
}

func voters(d *kvpb.RangeDescriptor) int {
	n := 0
	for _, rd := range d.GetReplicas() {
		if rd.GetType() == kvpb.ReplicaType_REPLICA_TYPE_VOTER {
			n++
		}
	}
	return n
}

func holdsReplica(d *kvpb.RangeDescriptor, node uint64) bool {
	for _, rd := range d.GetReplicas() {
		if rd.GetNodeId() == node {
			return true
		}
	}
	return false
}
