package node

import (
	"context"
	"fmt"
	"time"

	"github.com/shaledb/shale/api/kvpb"
)

// appliedWaiter implements raft.AppliedWaiter for merges: it asks each
// node of a range (Admin.Status; this node directly) for its replica's
// applied index until every one has reached the index.
type appliedWaiter struct{ n *Node }

func (w appliedWaiter) WaitApplied(ctx context.Context, desc *kvpb.RangeDescriptor, index uint64) error {
	for _, rd := range desc.GetReplicas() {
		for {
			applied, err := w.appliedOn(ctx, rd.GetNodeId(), desc.GetRangeId())
			if err == nil && applied >= index {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("range %d on node %d at applied index %d, waiting for %d (%v): %w",
					desc.GetRangeId(), rd.GetNodeId(), applied, index, err, ctx.Err())
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return nil
}

// appliedOn returns the applied index of node id's replica of rangeID.
func (w appliedWaiter) appliedOn(ctx context.Context, id, rangeID uint64) (uint64, error) {
	if id == w.n.ident.NodeID {
		r, err := w.n.store.Replica(rangeID)
		if err != nil {
			return 0, err
		}
		return r.AppliedIndex(), nil
	}
	c, err := w.n.peers.admin(id)
	if err != nil {
		return 0, err
	}
	sctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	st, err := c.Status(sctx, &kvpb.StatusRequest{})
	if err != nil {
		return 0, err
	}
	for _, r := range st.GetRanges() {
		if r.GetRaft().GetRangeId() == rangeID {
			return r.GetRaft().GetAppliedIndex(), nil
		}
	}
	return 0, fmt.Errorf("node %d holds no replica of range %d", id, rangeID)
}
