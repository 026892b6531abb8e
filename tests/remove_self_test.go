package tests

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/client"
)

// TestClusterRemoveNodeAskedOfItself: RemoveNode sent to the node being
// removed succeeds. The node used to remove its own replicas one range at a
// time, lose its copy of meta on the way, and then fail ("holds no copy of
// meta and knows no other node") with the node half removed. Found by the
// membership nemesis of tests/jepsen.
func TestClusterRemoveNodeAskedOfItself(t *testing.T) {
	c := newCluster(t, 4)
	_, admin, done := c.raw(4)
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := admin.RemoveNode(ctx, &kvpb.RemoveNodeRequest{NodeId: 4, Force: true}); err != nil {
		t.Fatalf("RemoveNode(4) asked of node 4: %v", err)
	}
	// Nodes and Ranges answer from the asked node's copy of meta, which may
	// trail the removal briefly.
	cl := c.client(1, 2, 3)
	deadline := time.Now().Add(10 * time.Second)
	for {
		still := holdsNode(t, cl, 4)
		if still == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("10s after its removal: %s", still)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Node 4 ends with no copy of meta but still knows the others'
	// addresses: it forwards what needs meta instead of failing with
	// "knows no other node". Until its meta replica hears of its own
	// removal it answers from that copy, which trails like the others'.
	for {
		nodes, err := admin.Nodes(ctx, &kvpb.NodesRequest{})
		if err != nil {
			t.Fatalf("Nodes asked of the removed node 4: %v", err)
		}
		if len(nodes.GetNodes()) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the removed node 4 lists %d nodes, want the 3 members", len(nodes.GetNodes()))
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The cluster still serves writes.
	if err := cl.Put(ctx, []byte("after"), []byte("removal")); err != nil {
		t.Fatal(err)
	}
}

// holdsNode says where the cluster still lists node id, or "".
func holdsNode(t *testing.T, cl *client.Client, id uint64) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nodes, err := cl.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range nodes.GetNodes() {
		if ns.GetNode().GetNodeId() == id {
			return fmt.Sprintf("node %d is still registered", id)
		}
	}
	rs, err := cl.Ranges(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs.GetRanges() {
		for _, rd := range r.GetRangeDescriptor().GetReplicas() {
			if rd.GetNodeId() == id {
				return fmt.Sprintf("range %d still has a replica on node %d", r.GetRangeDescriptor().GetRangeId(), id)
			}
		}
	}
	return ""
}
