package node

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/shaledb/shale/api/kvpb"
)

// Admin requests are checked before they act (docs/operations.md,
// "Changing membership and leadership"): a range that does not exist, a
// target node that is not registered, is being removed or does not
// answer, or an address where no node answers, is refused at once with
// an error that says which, instead of starting a change that cannot
// finish (a learner no one can reach, a phantom node) or waiting out the
// deadline. NotFound (without a RangeNotFound detail, which would mean
// stale routing) for what does not exist; FailedPrecondition for what
// exists but cannot take part now.

// probeWait bounds the health probe of a node an admin request names.
const probeWait = 2 * time.Second

// metaCatchUp is how long a node whose copy of meta lacks a range waits
// for it to catch up (a split that just committed) before saying the
// range does not exist.
const metaCatchUp = 300 * time.Millisecond

// checkRangeExists refuses rangeID when neither this node nor its copy of
// meta knows it. Without a copy of meta here it lets the request go on to
// the nodes that have one.
func (n *Node) checkRangeExists(ctx context.Context, op string, rangeID uint64) error {
	deadline := time.Now().Add(metaCatchUp)
	for {
		if _, err := n.store.Replica(rangeID); err == nil {
			return nil
		}
		ds, err := n.store.MetaDescriptors()
		if err != nil {
			return nil
		}
		for _, d := range ds {
			if d.GetRangeId() == rangeID {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return status.Errorf(codes.NotFound, "%s: range %d does not exist (shalectl ranges lists the ranges)", op, rangeID)
		}
		select {
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// checkTargetNode refuses a node that cannot take a replica or a range's
// leadership: not registered, being removed, or not answering.
func (n *Node) checkTargetNode(ctx context.Context, op string, id uint64) error {
	nodes, err := n.store.MetaNodes()
	if err != nil {
		return nil // no copy of meta here: the range's leader decides
	}
	var target *kvpb.NodeDescriptor
	for _, m := range nodes {
		if m.GetNodeId() == id {
			target = m
		}
	}
	switch {
	case target == nil:
		return status.Errorf(codes.NotFound, "%s: node %d is not registered (shalectl nodes lists the nodes; shalectl node add registers one)", op, id)
	case target.GetDecommissioning():
		return status.Errorf(codes.FailedPrecondition, "%s: node %d is being removed (decommissioning); it takes no new replicas or leaders", op, id)
	case id == n.ident.NodeID:
		return nil
	}
	if last := n.lastSeen(id); !last.IsZero() && time.Since(last) < liveAfter {
		return nil
	}
	// Not heard from lately (or a node just added): ask it now.
	cc, err := n.peers.conn(id)
	if err == nil {
		err = probe(ctx, cc.Connect, func(ctx context.Context) (*healthpb.HealthCheckResponse, error) {
			return healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
		})
	}
	if err != nil {
		return status.Errorf(codes.FailedPrecondition, "%s: node %d (%s) is not live: %v", op, id, target.GetAddress(), err)
	}
	n.live.note(id, time.Now())
	return nil
}

// probe runs check within probeWait (and ctx) and says why it failed.
// The check does not wait for the connection: a refused connection fails
// at once with the transport's reason.
func probe(ctx context.Context, connect func(), check func(context.Context) (*healthpb.HealthCheckResponse, error)) error {
	connect()
	pctx, cancel := context.WithTimeout(ctx, probeWait)
	defer cancel()
	resp, err := check(pctx)
	switch {
	case err != nil && pctx.Err() != nil && ctx.Err() == nil:
		return fmt.Errorf("no answer to a health check within %v", probeWait)
	case err != nil:
		return fmt.Errorf("health check: %s", status.Convert(err).Message())
	case resp.GetStatus() != healthpb.HealthCheckResponse_SERVING:
		return fmt.Errorf("it reports %s", resp.GetStatus())
	}
	return nil
}
