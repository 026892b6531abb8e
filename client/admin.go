package client

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/shaledb/shale/api/kvpb"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
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

// StatusOf reports on every endpoint the client was dialled with: one
// status or error each, in the order of the endpoints. The endpoints are
// asked in parallel, each under its own deadline of perNode (at most ctx's;
// perNode <= 0 means Options.RequestTimeout), so a paused or unreachable
// node costs its own answer only: it fails with ErrUnavailable after
// perNode while the others answer. StatusOf returns when every endpoint
// has answered or timed out.
func (c *Client) StatusOf(ctx context.Context, perNode time.Duration) ([]*kvpb.StatusResponse, []error) {
	return c.statusEach(ctx, c.conns, perNode, false)
}

// statusEach asks each endpoint for its status in parallel, each bounded
// by perNode.
func (c *Client) statusEach(ctx context.Context, eps []*endpoint, perNode time.Duration, nodeOnly bool) ([]*kvpb.StatusResponse, []error) {
	if perNode <= 0 {
		perNode = c.opts.RequestTimeout
	}
	sts := make([]*kvpb.StatusResponse, len(eps))
	errs := make([]error, len(eps))
	var wg sync.WaitGroup
	for i, e := range eps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nctx, cancel := context.WithTimeout(ctx, perNode)
			defer cancel()
			st, err := e.admin.Status(nctx, &kvpb.StatusRequest{NodeOnly: nodeOnly})
			if err != nil {
				errs[i] = classify("Status", e.addr, false, err, nctx.Err()).err
				return
			}
			sts[i] = st
		}()
	}
	wg.Wait()
	return sts, errs
}

// AddNode registers a node by its address and returns its node ID (an
// address already registered keeps its ID). It does not give the node
// replicas: see ChangeReplicas. It first checks that a node answers at the
// address (a gRPC health check, within 2s): an address where nothing
// listens is refused with ErrUnavailable and nothing is registered.
func (c *Client) AddNode(ctx context.Context, node *kvpb.NodeDescriptor) (*kvpb.AddNodeResponse, error) {
	if err := c.probeAddress(ctx, "AddNode", node.GetAddress()); err != nil {
		return nil, err
	}
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
	return resp.GetRangeDescriptor(), err
}

// TransferLeader moves a range's leadership to its replica on a node.
func (c *Client) TransferLeader(ctx context.Context, rangeID, nodeID uint64) error {
	return c.do(ctx, "TransferLeader", false, func(ctx context.Context, e *endpoint) error {
		_, err := e.admin.TransferLeader(ctx, &kvpb.TransferLeaderRequest{RangeId: rangeID, TargetNodeId: nodeID})
		return err
	})
}

// NodeStatus is one node's answer to NodeStatuses.
type NodeStatus struct {
	NodeID  uint64
	Address string
	Status  *kvpb.StatusResponse // nil when Err is set
	Err     error
}

// NodeStatuses asks every node of the cluster (as Nodes lists them, not
// only the endpoints the client was dialled with) for its status, in
// parallel, each within perNode (<= 0: Options.RequestTimeout), over the
// client's own credentials. A node that does not answer costs only its
// own entry, with Err set (ErrUnavailable after perNode).
func (c *Client) NodeStatuses(ctx context.Context, perNode time.Duration) ([]NodeStatus, error) {
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]NodeStatus, len(nodes.GetNodes()))
	var eps []*endpoint
	var at []int
	for i, ns := range nodes.GetNodes() {
		out[i] = NodeStatus{NodeID: ns.GetNode().GetNodeId(), Address: ns.GetNode().GetAddress()}
		e, err := c.endpointFor(out[i].Address)
		if err != nil {
			out[i].Err = err
			continue
		}
		eps, at = append(eps, e), append(at, i)
	}
	sts, errs := c.statusEach(ctx, eps, perNode, false)
	for j, i := range at {
		out[i].Status, out[i].Err = sts[j], errs[j]
	}
	return out, nil
}

// addNodeProbeWait bounds AddNode's health check of the new node.
const addNodeProbeWait = 2 * time.Second

// probeAddress checks that a node answers the gRPC health check at addr.
func (c *Client) probeAddress(ctx context.Context, op, addr string) error {
	if addr == "" {
		return nil // the node refuses it with its own message
	}
	e, err := c.endpointFor(addr)
	if err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, addNodeProbeWait)
	defer cancel()
	e.cc.Connect()
	// Not WaitForReady: a refused connection fails at once with the
	// transport's reason.
	var reason string
	for {
		resp, err := healthpb.NewHealthClient(e.cc).Check(pctx, &healthpb.HealthCheckRequest{})
		switch {
		case err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING:
			return nil
		case err == nil:
			reason = "it reports " + resp.GetStatus().String()
		case pctx.Err() != nil && reason == "":
			reason = fmt.Sprintf("no answer within %v", addNodeProbeWait)
		case pctx.Err() == nil:
			reason = explainTransportFailure(status.Convert(err).Message(), c.opts.TLS != nil)
		}
		if pctx.Err() != nil || !sleep(pctx, 100*time.Millisecond) {
			return &Error{Op: op, Endpoint: addr, kind: ErrUnavailable,
				Msg: "no node answers at " + addr + " (" + reason + "); start the node first: nothing was registered"}
		}
	}
}
