package node

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/raft"
)

// Merge merges the range holding req.key with its right-hand neighbour
// (docs/sharding.md, "Merges"). It runs on the left-hand range's leader
// (forwarded there if need be); when the two ranges' replicas are not on
// the same nodes it first moves the right-hand range's replicas to the
// left-hand range's nodes, then merges.
func (s *adminServer) Merge(ctx context.Context, req *kvpb.MergeRequest) (*kvpb.MergeResponse, error) {
	if len(req.GetKey()) > 0 {
		if err := s.n.limits.checkKey("key", req.GetKey()); err != nil {
			return nil, err
		}
	}
	for attempt := 0; ; attempt++ {
		leftID := s.n.rangeIDForKey(req.GetKey())
		if leftID == 0 {
			return forwardTo(s, ctx, func(c kvpb.AdminClient) (*kvpb.MergeResponse, error) {
				return c.Merge(forwardCtx(ctx), req)
			})
		}
		colocate := false
		resp, err := onLeader(s, ctx, "Merge", leftID, func() (*kvpb.MergeResponse, error) {
			// The merge's own calls to other nodes (meta's update, the
			// replicas' applied indexes) are first hops even when this
			// request was forwarded here.
			s.n.awaitRightLeader(ctx, leftID)
			d, err := s.n.store.Merge(metadata.NewIncomingContext(ctx, metadata.MD{}), leftID)
			switch {
			case errors.Is(err, raft.ErrMergeInvalid):
				return nil, status.Errorf(codes.FailedPrecondition, "Merge: %v", err)
			case errors.Is(err, raft.ErrMergeNotColocated):
				colocate = true
				return nil, status.Errorf(codes.Aborted, "Merge: %v", err)
			case err != nil:
				return nil, s.n.raftError("Merge", err)
			}
			return &kvpb.MergeResponse{Merged: d}, nil
		}, func(ctx context.Context, c kvpb.AdminClient) (*kvpb.MergeResponse, error) {
			return c.Merge(ctx, req)
		})
		if !colocate || attempt == 4 {
			return resp, err
		}
		if err := s.colocateForMerge(ctx, leftID); err != nil {
			return nil, err
		}
	}
}

// awaitRightLeader waits as awaitMemberLeader for range leftID's
// right-hand neighbour, on the left-hand range's leader (which holds a
// replica of the neighbour once the two are colocated).
func (n *Node) awaitRightLeader(ctx context.Context, leftID uint64) {
	l, err := n.store.Replica(leftID)
	if err != nil {
		return
	}
	end := l.Descriptor().GetEndKey()
	if len(end) == 0 {
		return // the last range: no neighbour
	}
	if r, err := n.store.ReplicaForKey(end); err == nil {
		n.awaitMemberLeader(ctx, r.RangeID())
	}
}

// awaitMemberLeader waits, for up to two election timeouts or ctx, until
// this node's replica of range id (if it has one) knows a leader that is
// one of the range's replicas. Colocation may have removed the
// right-hand range's leader, whose followers only notice after an
// election timeout: a freeze proposed into that election comes back
// ambiguous and fails the merge.
func (n *Node) awaitMemberLeader(ctx context.Context, id uint64) {
	r, err := n.store.Replica(id)
	if err != nil {
		return
	}
	cfg := n.store.Config()
	deadline := time.Now().Add(2 * time.Duration(cfg.ElectionTicks) * cfg.TickInterval)
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for r.Status().LeaderNodeID == 0 && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// colocateForMerge moves the replicas of range leftID's right-hand
// neighbour onto leftID's nodes (one ChangeReplicas on the neighbour's
// leader: the missing ones are added, the extra ones removed).
func (s *adminServer) colocateForMerge(ctx context.Context, leftID uint64) error {
	l, err := s.n.store.Replica(leftID)
	if err != nil {
		return s.n.raftError("Merge", err)
	}
	ld := l.Descriptor()
	right, err := s.n.descriptorForKey(ld.GetEndKey())
	if err != nil {
		return err
	}
	var changes []*kvpb.ReplicaChange
	for _, rd := range ld.GetReplicas() {
		if replicaOnNode(right, rd.GetNodeId()) == nil {
			changes = append(changes, &kvpb.ReplicaChange{Kind: kvpb.ReplicaChange_ADD_VOTER, NodeId: rd.GetNodeId()})
		}
	}
	for _, rd := range right.GetReplicas() {
		if replicaOnNode(ld, rd.GetNodeId()) == nil {
			changes = append(changes, &kvpb.ReplicaChange{Kind: kvpb.ReplicaChange_REMOVE, NodeId: rd.GetNodeId()})
		}
	}
	if len(changes) == 0 {
		return nil
	}
	s.n.log.Info("moving replicas to colocate a merge", "range", leftID, "right", right.GetRangeId(), "changes", len(changes))
	// A context of its own (with the caller's deadline): this request may
	// have been forwarded, and the change must be forwardable to the
	// neighbour's leader.
	cctx := context.Background()
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		cctx, cancel = context.WithDeadline(cctx, dl)
		defer cancel()
	} else {
		var cancel context.CancelFunc
		cctx, cancel = context.WithTimeout(cctx, time.Minute)
		defer cancel()
	}
	if _, err := s.ChangeReplicas(cctx, &kvpb.ChangeReplicasRequest{RangeId: right.GetRangeId(), Changes: changes}); err != nil {
		return status.Errorf(status.Code(err), "Merge: moving the replicas of range %d to the nodes of range %d: %v",
			right.GetRangeId(), leftID, status.Convert(err).Message())
	}
	return nil
}

// descriptorForKey returns the descriptor of the user range holding key:
// a local replica's, else meta's copy.
func (n *Node) descriptorForKey(key []byte) (*kvpb.RangeDescriptor, error) {
	if r, err := n.store.ReplicaForKey(key); err == nil {
		return r.Descriptor(), nil
	}
	ds, err := n.store.MetaLookup(key, 0)
	if err != nil || len(ds) == 0 {
		return nil, unavailable(100*time.Millisecond, "Merge: no descriptor known for the range holding %q: %v", clip(key), err)
	}
	return ds[0], nil
}

// replicaOnNode returns desc's replica on node id, or nil.
func replicaOnNode(desc *kvpb.RangeDescriptor, id uint64) *kvpb.ReplicaDescriptor {
	for _, rd := range desc.GetReplicas() {
		if rd.GetNodeId() == id {
			return rd
		}
	}
	return nil
}
