package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/raft"
	"github.com/shaledb/shale/raft/keys"
)

// The sharding operations of the Admin service: Split, Merge (in
// admin_merge.go), Decommission, and UpdateMeta (node to node). docs/sharding.md explains
// them.

// rangeIDForKey returns the ID of the user range holding key, as this node
// knows it: a local replica's descriptor, else its copy of meta. 0 if it
// knows of none.
func (n *Node) rangeIDForKey(key []byte) uint64 {
	if r, err := n.store.ReplicaForKey(key); err == nil {
		return r.RangeID()
	}
	if ds, err := n.store.MetaLookup(key, 0); err == nil && len(ds) > 0 {
		return ds[0].GetRangeId()
	}
	return 0
}

func (s *adminServer) Split(ctx context.Context, req *kvpb.SplitRequest) (*kvpb.SplitResponse, error) {
	if len(req.GetSplitKey()) == 0 {
		return nil, invalidArgument("split_key", "a split needs a key (the first key of the new right-hand range)")
	}
	if err := s.n.limits.checkKey("split_key", req.GetSplitKey()); err != nil {
		return nil, err
	}
	// A concurrent split can move the key to another range, and this
	// node's view of the ranges can trail the leader's: find it again
	// (a few times, backing off).
	for attempt := 0; ; attempt++ {
		rangeID := s.n.rangeIDForKey(req.GetSplitKey())
		if rangeID == 0 {
			return forwardTo(s, ctx, func(c kvpb.AdminClient) (*kvpb.SplitResponse, error) {
				return c.Split(forwardCtx(ctx), req)
			})
		}
		moved := false
		resp, err := onLeader(s, ctx, "Split", rangeID, func() (*kvpb.SplitResponse, error) {
			// Its calls to meta are first hops even when this request
			// was forwarded here (see Merge).
			l, r, err := s.n.store.Split(metadata.NewIncomingContext(ctx, metadata.MD{}), rangeID, req.GetSplitKey())
			switch {
			case errors.Is(err, raft.ErrSplitMoved):
				moved = true
				return nil, status.Errorf(codes.Aborted, "Split: %v; retry", err)
			case errors.Is(err, raft.ErrSplitKey):
				return nil, status.Errorf(codes.InvalidArgument, "Split: %v", err)
			case err != nil:
				return nil, s.n.raftError("Split", err)
			}
			return &kvpb.SplitResponse{Left: l, Right: r}, nil
		}, func(ctx context.Context, c kvpb.AdminClient) (*kvpb.SplitResponse, error) {
			return c.Split(ctx, req)
		})
		// Aborted also comes back from a leader this request was
		// forwarded to: its own lookups moved on.
		if (!moved && status.Code(err) != codes.Aborted) || attempt == 9 {
			return resp, err
		}
		// This node's view of the ranges (its replicas, its copy of
		// meta) trails the leader that applied the split by a moment.
		select {
		case <-ctx.Done():
			return resp, err
		case <-time.After(time.Duration(attempt+1) * 20 * time.Millisecond):
		}
	}
}

// UpdateMeta serves a node without a replica of meta: it proposes the meta
// operation through this node's replica (forwarded once to another node if
// this one has none either).
func (s *adminServer) UpdateMeta(ctx context.Context, req *kvpb.UpdateMetaRequest) (*kvpb.UpdateMetaResponse, error) {
	n := s.n
	if _, err := n.store.Replica(keys.MetaRangeID); err != nil {
		return forwardTo(s, ctx, func(c kvpb.AdminClient) (*kvpb.UpdateMetaResponse, error) {
			return c.UpdateMeta(forwardCtx(ctx), req)
		})
	}
	resp := &kvpb.UpdateMetaResponse{}
	if req.GetAllocRangeId() {
		id, err := n.store.AllocRangeID(ctx)
		if err != nil {
			return nil, n.raftError("UpdateMeta", err)
		}
		resp.RangeId = id
	}
	if len(req.GetDescriptors()) > 0 {
		if err := n.store.PutDescriptors(ctx, req.GetDescriptors()); err != nil {
			return nil, n.raftError("UpdateMeta", err)
		}
	}
	return resp, nil
}

// remoteMeta implements raft.RemoteMeta over UpdateMeta.
type remoteMeta struct{ s *adminServer }

func (m remoteMeta) AllocRangeID(ctx context.Context) (uint64, error) {
	resp, err := forwardTo(m.s, ctx, func(c kvpb.AdminClient) (*kvpb.UpdateMetaResponse, error) {
		return c.UpdateMeta(ctx, &kvpb.UpdateMetaRequest{AllocRangeId: true})
	})
	if err != nil {
		return 0, fmt.Errorf("%w: allocating a range ID through another node: %v", raft.ErrUnavailable, err)
	}
	return resp.GetRangeId(), nil
}

func (m remoteMeta) PutDescriptors(ctx context.Context, descs []*kvpb.RangeDescriptor) error {
	_, err := forwardTo(m.s, ctx, func(c kvpb.AdminClient) (*kvpb.UpdateMetaResponse, error) {
		return c.UpdateMeta(ctx, &kvpb.UpdateMetaRequest{Descriptors: descs})
	})
	if err != nil {
		return fmt.Errorf("%w: updating meta through another node: %v", raft.ErrUnavailable, err)
	}
	return nil
}

// Decommission marks a node as decommissioning in meta's registry; the
// placement controller then moves its replicas and leaders away. With wait
// it returns once the node holds no replica (or the deadline passes, with
// the count left).
func (s *adminServer) Decommission(ctx context.Context, req *kvpb.DecommissionRequest) (*kvpb.DecommissionResponse, error) {
	n := s.n
	nodes, err := n.store.MetaNodes()
	if err != nil {
		return forwardTo(s, ctx, func(c kvpb.AdminClient) (*kvpb.DecommissionResponse, error) {
			return c.Decommission(forwardCtx(ctx), req)
		})
	}
	var target *kvpb.NodeDescriptor
	for _, m := range nodes {
		if m.GetNodeId() == req.GetNodeId() {
			target = proto.Clone(m).(*kvpb.NodeDescriptor)
		}
	}
	if target == nil {
		return nil, status.Errorf(codes.NotFound, "Decommission: node %d is not registered", req.GetNodeId())
	}
	if !target.GetDecommissioning() {
		target.Decommissioning = true
		if _, err := n.store.RegisterNode(ctx, target); err != nil {
			return nil, n.raftError("Decommission", err)
		}
	}
	for {
		left, err := n.replicasOn(req.GetNodeId())
		if err != nil {
			return nil, n.raftError("Decommission", err)
		}
		if !req.GetWait() || left == 0 {
			return &kvpb.DecommissionResponse{RemainingReplicas: left}, nil
		}
		select {
		case <-ctx.Done():
			return &kvpb.DecommissionResponse{RemainingReplicas: left}, nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// replicasOn counts the replicas meta places on node id.
func (n *Node) replicasOn(id uint64) (uint64, error) {
	ds, err := n.store.MetaDescriptors()
	if err != nil {
		return 0, err
	}
	var c uint64
	for _, d := range ds {
		for _, rd := range d.GetReplicas() {
			if rd.GetNodeId() == id {
				c++
			}
		}
	}
	return c, nil
}
