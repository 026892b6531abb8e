package client

import (
	"context"

	"github.com/shaledb/shale/api/kvpb"
)

// Sharding administration (docs/sharding.md). Like the other admin
// operations, any node answers and forwards to whoever carries it out.

// Split splits the range holding key at key (key becomes the first key of
// the new right-hand range) and returns both descriptors. No data moves.
func (c *Client) Split(ctx context.Context, key []byte) (left, right *kvpb.RangeDescriptor, err error) {
	var resp *kvpb.SplitResponse
	err = c.do(ctx, "Split", true, func(ctx context.Context, e *endpoint) (err error) {
		resp, err = e.admin.Split(ctx, &kvpb.SplitRequest{SplitKey: key})
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	c.cache.insert(resp.GetLeft(), 0)
	c.cache.insert(resp.GetRight(), 0)
	return resp.GetLeft(), resp.GetRight(), nil
}

// Merge merges the range holding key with its right-hand neighbour and
// returns the merged descriptor. The right-hand range's replicas are moved
// to the left-hand range's nodes first if they are elsewhere. No data is
// copied. The last range has no neighbour: merging it is refused.
func (c *Client) Merge(ctx context.Context, key []byte) (*kvpb.RangeDescriptor, error) {
	var resp *kvpb.MergeResponse
	err := c.do(ctx, "Merge", true, func(ctx context.Context, e *endpoint) (err error) {
		resp, err = e.admin.Merge(ctx, &kvpb.MergeRequest{Key: key})
		return err
	})
	if err != nil {
		return nil, err
	}
	c.cache.insert(resp.GetMerged(), 0)
	return resp.GetMerged(), nil
}

// MoveReplica moves range rangeID's replica on node from to node to (add
// learner, snapshot, promote, remove).
func (c *Client) MoveReplica(ctx context.Context, rangeID, from, to uint64) (*kvpb.RangeDescriptor, error) {
	return c.ChangeReplicas(ctx, rangeID,
		&kvpb.ReplicaChange{Kind: kvpb.ReplicaChange_ADD_VOTER, NodeId: to},
		&kvpb.ReplicaChange{Kind: kvpb.ReplicaChange_REMOVE, NodeId: from})
}

// Decommission starts draining node nodeID: placement moves its replicas
// and leaders to other nodes. With wait it returns once the node holds no
// replica or ctx ends; it returns the replicas still on the node.
func (c *Client) Decommission(ctx context.Context, nodeID uint64, wait bool) (uint64, error) {
	var resp *kvpb.DecommissionResponse
	err := c.do(ctx, "Decommission", true, func(ctx context.Context, e *endpoint) (err error) {
		resp, err = e.admin.Decommission(ctx, &kvpb.DecommissionRequest{NodeId: nodeID, Wait: wait})
		return err
	})
	if err != nil {
		return 0, err
	}
	return resp.GetRemainingReplicas(), nil
}

// RangeLookup returns the descriptors of the range holding key and of up
// to prefetch following ranges, as meta holds them.
func (c *Client) RangeLookup(ctx context.Context, key []byte, prefetch uint32) (*kvpb.RangeLookupResponse, error) {
	var resp *kvpb.RangeLookupResponse
	err := c.do(ctx, "RangeLookup", false, func(ctx context.Context, e *endpoint) (err error) {
		resp, err = e.admin.RangeLookup(ctx, &kvpb.RangeLookupRequest{Key: key, Prefetch: prefetch})
		return err
	})
	return resp, err
}

// CachedRanges returns how many ranges the client's routing cache holds.
func (c *Client) CachedRanges() int { return c.cache.size() }
