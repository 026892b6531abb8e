package tests

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/client"
)

// adminFailFast bounds how long an admin request that cannot work may take
// to be refused: a meta lookup and a health probe, far below the deadline.
const adminFailFast = 5 * time.Second

// TestAdminValidatesBeforeActing: admin requests naming what does not
// exist, or a node that cannot take part, are refused at once with an
// error that says which, and change nothing: transfer-leader for a range
// that does not exist, move-replica to an unregistered node, node add of
// an address where nothing listens (through the client and shalectl),
// and as ErrFailedPrecondition (not ErrInternal) removing a node that
// holds replicas and merging the last range.
func TestAdminValidatesBeforeActing(t *testing.T) {
	c := newCluster(t, 3)
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	before, err := cl.Ranges(ctx)
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, call func(ctx context.Context) error, want error, msg string) {
		t.Helper()
		rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
		defer rcancel()
		start := time.Now()
		err := call(rctx)
		took := time.Since(start)
		switch {
		case err == nil:
			t.Errorf("%s: succeeded", what)
		case !errors.Is(err, want) || errors.Is(err, client.ErrAmbiguous):
			t.Errorf("%s: %v, want %v", what, err, want)
		case !strings.Contains(err.Error(), msg):
			t.Errorf("%s: %q does not say %q", what, err, msg)
		case took > adminFailFast:
			t.Errorf("%s: refused after %v, not at once: %v", what, took, err)
		}
	}
	check("transfer-leader of range 99", func(ctx context.Context) error { return cl.TransferLeader(ctx, 99, 1) },
		client.ErrNotFound, "range 99 does not exist")
	check("move-replica to unregistered node 9", func(ctx context.Context) error {
		_, err := cl.MoveReplica(ctx, userRange, 1, 9)
		return err
	}, client.ErrNotFound, "node 9 is not registered")
	check("add a voter of range 99", func(ctx context.Context) error {
		_, err := cl.ChangeReplicas(ctx, 99, &kvpb.ReplicaChange{Kind: kvpb.ReplicaChange_ADD_VOTER, NodeId: 2})
		return err
	}, client.ErrNotFound, "range 99 does not exist")
	// What exists but cannot be done now is a precondition, not an
	// internal error, and says it was not applied.
	check("remove node 3 holding replicas", func(ctx context.Context) error { return cl.RemoveNode(ctx, 3, false) },
		client.ErrFailedPrecondition, "still holds replicas")
	check("merge the last range", func(ctx context.Context) error {
		_, err := cl.Merge(ctx, []byte("k"))
		return err
	}, client.ErrFailedPrecondition, "Merge")
	for _, call := range []func(ctx context.Context) error{
		func(ctx context.Context) error { return cl.RemoveNode(ctx, 3, false) },
		func(ctx context.Context) error { _, err := cl.Merge(ctx, []byte("k")); return err },
	} {
		var ce *client.Error
		if err := call(ctx); !errors.As(err, &ce) || errors.Is(err, client.ErrInternal) || ce.Outcome() != client.NotApplied {
			t.Errorf("a refused admin request: %v (want a precondition error, not applied)", err)
		}
	}
	// An address where nothing listens: a port held, never listened on.
	nowhere := reserveAddr(t, "127.0.0.1")
	check("node add "+nowhere, func(ctx context.Context) error {
		_, err := cl.AddNode(ctx, &kvpb.NodeDescriptor{Address: nowhere})
		return err
	}, client.ErrUnavailable, "no node answers at "+nowhere)
	if _, stderr, code := runCtl(t, c.node(1).grpcAddr, "node", "add", nowhere); code == 0 || !strings.Contains(stderr, "no node answers at") {
		t.Errorf("shalectl node add %s: exit %d, stderr %q", nowhere, code, stderr)
	}
	if _, stderr, code := runCtl(t, c.node(1).grpcAddr, "transfer-leader", "99", "1"); code == 0 || !strings.Contains(stderr, "range 99 does not exist") {
		t.Errorf("shalectl transfer-leader 99 1: exit %d, stderr %q", code, stderr)
	}

	// Nothing changed: no phantom node, no learner on node 9.
	nodes, err := cl.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range nodes.GetNodes() {
		if ns.GetNode().GetAddress() == nowhere || ns.GetNode().GetNodeId() > 3 {
			t.Errorf("a node was registered: %v", ns.GetNode())
		}
	}
	after, err := cl.Ranges(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, rs := range after.GetRanges() {
		if i < len(before.GetRanges()) && rs.GetRangeDescriptor().GetGeneration() != before.GetRanges()[i].GetRangeDescriptor().GetGeneration() {
			t.Errorf("range %d changed: %v", rs.GetRangeDescriptor().GetRangeId(), rs.GetRangeDescriptor())
		}
	}
}
