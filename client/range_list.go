package client

import (
	"context"

	"github.com/shaledb/shale/api/kvpb"
)

// RangeState is one range of the cluster as RangeList reports it, in a
// client-owned type.
type RangeState struct {
	Descriptor *kvpb.RangeDescriptor
	// LeaderNodeID is the leader the answering node knows; 0 if none.
	LeaderNodeID uint64
	// Raft is the answering node's replica's Raft state; nil when it
	// holds no replica of the range.
	Raft             *kvpb.RaftStatus
	ApproximateBytes uint64
	ApproximateKeys  uint64
	QPS              float64
}

// RangeList lists the cluster's ranges in key order (Ranges, in
// client-owned types).
func (c *Client) RangeList(ctx context.Context) ([]RangeState, error) {
	resp, err := c.Ranges(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]RangeState, 0, len(resp.GetRanges()))
	for _, r := range resp.GetRanges() {
		out = append(out, RangeState{Descriptor: r.GetRangeDescriptor(), LeaderNodeID: r.GetLeaderNodeId(), Raft: r.GetRaft(),
			ApproximateBytes: r.GetApproximateBytes(), ApproximateKeys: r.GetApproximateKeys(), QPS: r.GetQps()})
	}
	return out, nil
}
