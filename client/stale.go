package client

import (
	"context"

	"github.com/shaledb/shale/api/kvpb"
)

// Stale reads are served by whichever replica the client reaches (the
// preferred endpoint first) from the state it has applied, without a round
// to the leader: they are cheaper and spread over every node, but may miss
// writes acknowledged moments before. They never return a value that was
// never written (docs/replication.md, "Reads and leases").

// staleHeader is the request header of a stale read.
func (c *Client) staleHeader() *kvpb.RequestHeader {
	h := c.header(false)
	h.ReadConsistency = kvpb.ReadConsistency_READ_CONSISTENCY_STALE
	return h
}

// GetStale reads key from any replica, possibly missing recent writes. A
// missing key is not an error: found is false.
func (c *Client) GetStale(ctx context.Context, key []byte) (value []byte, found bool, err error) {
	req := &kvpb.GetRequest{Header: c.staleHeader(), Key: key}
	var resp *kvpb.GetResponse
	err = c.do(ctx, "GetStale", false, func(ctx context.Context, e *endpoint) (err error) {
		resp, err = e.kv.Get(ctx, req)
		return err
	})
	if err != nil {
		return nil, false, err
	}
	if !resp.Found {
		return nil, false, nil
	}
	if resp.Value == nil {
		return []byte{}, true, nil
	}
	return resp.Value, true, nil
}

// BatchGetStale reads keys at one point of one replica's applied state,
// possibly missing recent writes. results[i] answers keys[i].
func (c *Client) BatchGetStale(ctx context.Context, keys [][]byte) ([]GetResult, error) {
	req := &kvpb.BatchGetRequest{Header: c.staleHeader(), Keys: keys}
	var resp *kvpb.BatchGetResponse
	err := c.do(ctx, "BatchGetStale", false, func(ctx context.Context, e *endpoint) (err error) {
		resp, err = e.kv.BatchGet(ctx, req)
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(resp.Results) != len(keys) {
		return nil, &Error{Op: "BatchGetStale", Msg: "the node answered a different number of keys than asked", kind: ErrInternal}
	}
	out := make([]GetResult, len(keys))
	for i, r := range resp.Results {
		out[i] = GetResult{Value: r.Value, Found: r.Found}
		if r.Found && r.Value == nil {
			out[i].Value = []byte{}
		}
	}
	return out, nil
}
