package node

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/shaledb/shale/api/kvpb"
)

// Removing a node with force (shalectl node remove; docs/operations.md,
// "Changing membership and leadership") coordinates with placement
// instead of racing it. The node is first marked decommissioning in
// meta's registry, so that placement stops choosing it for replicas and
// leaders (it used to add a replica back to the node being removed
// seconds later). Then each of its replicas is replaced, not just
// removed: a voter is added on a live node that holds none of the range
// and the node's is removed in one change (joint consensus), so the range
// never drops below its replica count. With placement on, placement makes
// those moves (it drains decommissioning nodes) and the removal waits for
// them: two movers of one range would undo each other's half-done moves.
// With placement off, the removal makes them itself. Only a range with no
// node to go to (a cluster no bigger than the range's replica count)
// loses the replica without a replacement. Each round starts from the
// ranges' leaders' own descriptors. The node leaves the registry once it
// holds nothing.

// removalRounds bounds the passes over the node's replicas.
const removalRounds = 10

// drainForRemoval marks node id decommissioning and moves its replicas
// off it (see above). It returns once the node holds no replica.
func (s *adminServer) drainForRemoval(ctx context.Context, id uint64) error {
	n := s.n
	if err := n.markDecommissioning(ctx, id); err != nil {
		return err
	}
	var last error
	for round := 0; ; round++ {
		ds, err := n.currentDescriptors(ctx)
		if err != nil {
			return n.raftError("RemoveNode", err)
		}
		held := 0
		last = nil // only this round's failures count against the bound below
		for _, d := range ds {
			if !holds(d, id) {
				continue
			}
			held++
			changes := []*kvpb.ReplicaChange{{Kind: kvpb.ReplicaChange_REMOVE, NodeId: id}}
			spare := n.spareFor(ds, d, id)
			switch {
			case spare == 0 && !n.cfg.Sharding.DisablePlacement && midMove(d, n.cfg.Sharding.ReplicationFactor):
				// No spare only because placement is moving this range
				// (a learner, or one voter too many): removing the
				// node's replica now, on top of placement's removal of
				// another, would leave too few. Wait for it to settle.
				continue
			case spare != 0 && !n.cfg.Sharding.DisablePlacement:
				// Placement drains a decommissioning node by the same
				// kind of move; two movers of one range would undo each
				// other's half-done moves.
				continue
			case spare != 0:
				changes = append([]*kvpb.ReplicaChange{{Kind: kvpb.ReplicaChange_ADD_VOTER, NodeId: spare}}, changes...)
			}
			// At d's generation: a change decided from a descriptor that
			// has moved on since (placement finished a move) is refused
			// and decided again next round, never applied to the newer one.
			req := &kvpb.ChangeReplicasRequest{RangeId: d.GetRangeId(), Changes: changes, ExpectedGeneration: d.GetGeneration()}
			if _, err := s.ChangeReplicas(ctx, req); err != nil {
				st := status.Convert(err)
				last = status.Errorf(st.Code(), "RemoveNode: moving node %d's replica of range %d: %s", id, d.GetRangeId(), st.Message())
				if ctx.Err() != nil {
					return last
				}
			}
		}
		if held == 0 {
			return nil
		}
		if round >= removalRounds && last != nil {
			return last
		}
		select {
		case <-ctx.Done():
			if last == nil {
				last = status.FromContextError(ctx.Err()).Err()
			}
			return last
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// markDecommissioning sets node id's decommissioning mark in meta.
func (n *Node) markDecommissioning(ctx context.Context, id uint64) error {
	nodes, err := n.store.MetaNodes()
	if err != nil {
		return n.raftError("RemoveNode", err)
	}
	for _, m := range nodes {
		if m.GetNodeId() != id {
			continue
		}
		if m.GetDecommissioning() {
			return nil
		}
		target := proto.Clone(m).(*kvpb.NodeDescriptor)
		target.Decommissioning = true
		if _, err := n.store.RegisterNode(ctx, target); err != nil {
			return n.raftError("RemoveNode", err)
		}
		return nil
	}
	return status.Errorf(codes.NotFound, "RemoveNode: node %d is not registered", id)
}

// currentDescriptors returns meta's descriptors, replaced by the ranges'
// leaders' own where those are newer: meta's copy trails a change by a
// moment (its update is best effort), and a replacement computed from a
// stale descriptor could name a node that already holds the range.
func (n *Node) currentDescriptors(ctx context.Context) ([]*kvpb.RangeDescriptor, error) {
	nodes, err := n.store.MetaNodes()
	if err != nil {
		return nil, err
	}
	ds, err := n.store.MetaDescriptors()
	if err != nil {
		return nil, err
	}
	return freshDescriptors(ds, n.gatherHeartbeats(ctx, nodes)), nil
}

// spareFor returns a node to take over node leaving's replica of d: live,
// registered, not decommissioning, holding no replica of d, with the
// fewest replicas; 0 if there is none.
func (n *Node) spareFor(ds []*kvpb.RangeDescriptor, d *kvpb.RangeDescriptor, leaving uint64) uint64 {
	nodes, err := n.store.MetaNodes()
	if err != nil {
		return 0
	}
	count := map[uint64]int{}
	for _, x := range ds {
		for _, rd := range x.GetReplicas() {
			count[rd.GetNodeId()]++
		}
	}
	var best uint64
	for _, m := range nodes {
		id := m.GetNodeId()
		if id == leaving || m.GetDecommissioning() || holds(d, id) {
			continue
		}
		if last := n.lastSeen(id); id != n.ident.NodeID && (last.IsZero() || time.Since(last) > liveAfter) {
			continue
		}
		if best == 0 || count[id] < count[best] {
			best = id
		}
	}
	return best
}

// holds reports whether node id has a replica of d.
func holds(d *kvpb.RangeDescriptor, id uint64) bool {
	for _, rd := range d.GetReplicas() {
		if rd.GetNodeId() == id {
			return true
		}
	}
	return false
}

// midMove reports whether d is part way through a replica move: it has a
// learner, or more voters than the replication factor.
func midMove(d *kvpb.RangeDescriptor, factor int) bool {
	voters := 0
	for _, rd := range d.GetReplicas() {
		if rd.GetType() == kvpb.ReplicaType_REPLICA_TYPE_LEARNER {
			return true
		}
		voters++
	}
	return voters > factor
}
