package client

import (
	"context"
	"sync"
	"time"

	"github.com/shaledb/shale/api/kvpb"
)

// Hot ranges and keys (docs/operations.md, "Hot ranges and keys"). Each
// node measures the load it serves; HotSpots asks every node.

// SingleKeyShare is the share of its range's requests above which a hot
// key is called a single-key hotspot: the range's load is mostly that one
// key, and splitting the range cannot spread it (a split divides keys,
// not the requests of one key). Cache the key's value in the application
// or spread it over several keys instead.
const SingleKeyShare = 0.5

// NodeHotSpots is one node's busiest ranges and sampled keys.
type NodeHotSpots struct {
	NodeID  uint64
	Address string
	// Window is the span the rates were measured over.
	Window time.Duration
	// SampleRate is the fraction of requests whose keys were sampled.
	SampleRate float64
	Ranges     []HotRange // busiest first
	Keys       []HotKey   // busiest first
	// Err is set when the node did not answer; the rest is then empty.
	Err error
}

// HotRange is one range's load on one node over the window.
type HotRange struct {
	RangeID           uint64
	StartKey, EndKey  []byte
	RequestsPerSecond float64 // exact
	BytesPerSecond    float64 // request and response messages, exact
	CPUShare          float64 // share of the node's request-serving time
	Leader            bool    // the node's replica leads the range
	NodeID            uint64  // the node that measured it
}

// HotKey is one sampled key's estimated load on one node.
type HotKey struct {
	Key     []byte
	RangeID uint64
	// RequestsPerSecond is estimated from a sample and may overstate the
	// key's rate by at most ErrorPerSecond.
	RequestsPerSecond float64
	ErrorPerSecond    float64
	// RangeShare is the key's share of its range's requests, counting
	// only what the key surely had.
	RangeShare float64
	NodeID     uint64
}

// SingleKeyHotspot says whether the key is most of its range's load
// (RangeShare >= SingleKeyShare): a split cannot fix it.
func (k HotKey) SingleKeyHotspot() bool { return k.RangeShare >= SingleKeyShare }

// HotSpots asks every node of the cluster (as Nodes lists them) for its
// busiest ranges and keys, at most limit of each (0: the node's default),
// in parallel and each within perNode (<= 0: Options.RequestTimeout), so
// a node that does not answer costs only its own entry, with Err set.
func (c *Client) HotSpots(ctx context.Context, limit int, perNode time.Duration) ([]NodeHotSpots, error) {
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	if perNode <= 0 {
		perNode = c.opts.RequestTimeout
	}
	out := make([]NodeHotSpots, len(nodes.GetNodes()))
	var wg sync.WaitGroup
	for i, ns := range nodes.GetNodes() {
		nd := ns.GetNode()
		out[i] = NodeHotSpots{NodeID: nd.GetNodeId(), Address: nd.GetAddress()}
		e, err := c.endpointFor(nd.GetAddress())
		if err != nil {
			out[i].Err = err
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			nctx, cancel := context.WithTimeout(ctx, perNode)
			defer cancel()
			resp, err := e.admin.HotSpots(nctx, &kvpb.HotSpotsRequest{Limit: uint32(max(limit, 0))})
			if err != nil {
				out[i].Err = classify("HotSpots", e.addr, false, err, nctx.Err()).err
				return
			}
			out[i].fill(resp)
		}()
	}
	wg.Wait()
	return out, nil
}

// fill copies a node's answer into client-owned types.
func (h *NodeHotSpots) fill(resp *kvpb.HotSpotsResponse) {
	h.Window = time.Duration(resp.GetWindowSeconds() * float64(time.Second))
	h.SampleRate = resp.GetSampleRate()
	for _, r := range resp.GetRanges() {
		h.Ranges = append(h.Ranges, HotRange{RangeID: r.GetRangeId(), StartKey: r.GetStartKey(), EndKey: r.GetEndKey(),
			RequestsPerSecond: r.GetRequestsPerSecond(), BytesPerSecond: r.GetBytesPerSecond(), CPUShare: r.GetCpuShare(),
			Leader: r.GetLeader(), NodeID: h.NodeID})
	}
	for _, k := range resp.GetKeys() {
		h.Keys = append(h.Keys, HotKey{Key: k.GetKey(), RangeID: k.GetRangeId(), RequestsPerSecond: k.GetRequestsPerSecond(),
			ErrorPerSecond: k.GetErrorPerSecond(), RangeShare: k.GetRangeShare(), NodeID: h.NodeID})
	}
}
