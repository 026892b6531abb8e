package client

import (
	"context"

	"github.com/shaledb/shale/api/kvpb"
)

// Cluster administration. Any node answers these: a node forwards an
// operation to whoever must carry it out (a range's leader, a node holding
// meta). Operations that change the cluster are sent like writes: a
// connection failure while one is in flight is reported as ambiguous
// rather than retried.

// Nodes lists the cluster's nodes with their liveness and replica counts.
func (c *Client) Nodes(ctx context.Context) (*kvpb.NodesResponse, error) {
	var resp *kvpb.NodesResponse
	err := c.do(ctx, "Nodes", false, func(ctx context.Context, e *endpoint) (err error) {
		resp, err = e.admin.Nodes(ctx, &kvpb.NodesRequest{})
		return err
	})
	return resp, err
}

// Ranges lists the cluster's ranges, with Raft state where the answering
// node holds a replica.
func (c *Client) Ranges(ctx context.Context) (*kvpb.RangesResponse, error) {
	var resp *kvpb.RangesResponse
	err := c.do(ctx, "Ranges", false, func(ctx context.Context, e *endpoint) (err error) {
		resp, err = e.admin.Ranges(ctx, &kvpb.RangesRequest{})
		return err
	})
	return resp, err
}

// StatusOf reports on every endpoint the client was dialled with, in order:
// one status or error each.
func (c *Client) StatusOf(ctx context.Context) ([]*kvpb.StatusResponse, []error) {
	sts := make([]*kvpb.StatusResponse, len(c.conns))
	errs := make([]error, len(c.conns))
	for i, e := range c.conns {
		sts[i], errs[i] = e.admin.Status(ctx, &kvpb.StatusRequest{})
		if errs[i] != nil {
			errs[i] = classify("Status", e.addr, false, errs[i], ctx.Err()).err
		}
	}
	return sts, errs
}

// AddNode registers a node by its address and returns its node ID (an
// address already registered keeps its ID). It does not give the node
// replicas: see ChangeReplicas.
func (c *Client) AddNode(ctx context.Context, node *kvpb.NodeDescriptor) (*kvpb.AddNodeResponse, error) {
	var resp *kvpb.AddNodeResponse
	err := c.do(ctx, "AddNode", true, func(ctx context.Context, e *endpoint) (err error) {
		resp, err = e.admin.AddNode(ctx, &kvpb.AddNodeRequest{Node: node})
		return err
	})
	return resp, err
}

// RemoveNode removes a node from the cluster; with force, its replicas
// are removed from every range first.
func (c *Client) RemoveNode(ctx context.Context, nodeID uint64, force bool) error {
	return c.do(ctx, "RemoveNode", true, func(ctx context.Context, e *endpoint) error {
		_, err := e.admin.RemoveNode(ctx, &kvpb.RemoveNodeRequest{NodeId: nodeID, Force: force})
		return err
	})
}

// ChangeReplicas adds (learner first, then promotion) and removes replicas
// of one range, and returns its new descriptor.
func (c *Client) ChangeReplicas(ctx context.Context, rangeID uint64, changes ...*kvpb.ReplicaChange) (*kvpb.RangeDescriptor, error) {
	var resp *kvpb.ChangeReplicasResponse
	err := c.do(ctx, "ChangeReplicas", true, func(ctx context.Context, e *endpoint) (err error) {
		resp, err = e.admin.ChangeReplicas(ctx, &kvpb.ChangeReplicasRequest{RangeId: rangeID, Changes: changes})
		return err
	})
	return resp.GetDescriptor_(), err
}

// TransferLeader moves a range's leadership to its replica on a node.
func (c *Client) TransferLeader(ctx context.Context, rangeID, nodeID uint64) error {
	return c.do(ctx, "TransferLeader", false, func(ctx context.Context, e *endpoint) error {
		_, err := e.admin.TransferLeader(ctx, &kvpb.TransferLeaderRequest{RangeId: rangeID, TargetNodeId: nodeID})
		return err
	})
}
