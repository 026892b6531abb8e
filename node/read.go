package node

import (
	"context"
	"fmt"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/raft"
	"github.com/shaledb/shale/rangesm"
)

// readBarrier waits until r may serve a read of the request's
// consistency and returns the applied index the read will see at least:
// a linearizable read waits for the leader's barrier (ReadIndex or lease,
// docs/replication.md "Reads and leases"); a stale read is served from
// whatever this replica has applied.
func (n *Node) readBarrier(ctx context.Context, op string, h *kvpb.RequestHeader, r *raft.Replica) (uint64, error) {
	if h.GetReadConsistency() == kvpb.ReadConsistency_READ_CONSISTENCY_STALE {
		return r.AppliedIndex(), nil
	}
	if err := n.awaitLeader(ctx, op, r, r.Descriptor()); err != nil {
		return 0, err
	}
	idx, err := r.ReadBarrier(ctx)
	if err != nil {
		return 0, n.raftError(op, err)
	}
	// A range frozen for a merge serves no linearizable read: once the
	// merge commits, writes to its keys go to the left-hand range, which
	// this replica does not see. The barrier waited for the commit index,
	// so a read that began after the freeze committed sees the freeze.
	if r.Frozen() {
		return 0, n.raftError(op, r.FrozenError())
	}
	return idx, nil
}

// Get reads one key.
func (s *kvServer) Get(ctx context.Context, req *kvpb.GetRequest) (*kvpb.GetResponse, error) {
	if err := s.n.limits.checkGet(req); err != nil {
		return nil, err
	}
	r, desc, err := s.n.replicaFor(req.GetHeader(), req.GetKey())
	if err != nil {
		return nil, err
	}
	if err := s.n.checkKey(req.GetHeader(), desc, req.GetKey()); err != nil {
		return nil, err
	}
	idx, err := s.n.readBarrier(ctx, "Get", req.GetHeader(), r)
	if err != nil {
		return nil, err
	}
	v, found, err := s.n.data.Get(req.GetKey())
	if err != nil {
		return nil, readError("Get", err)
	}
	return &kvpb.GetResponse{Header: s.n.respHeader(r, idx), Found: found, Value: v}, nil
}

// Scan reads one page of [start_key, end_key) from a consistent engine view
// (the iterator's), forward or in reverse.
//
// A page also ends at the range's boundary when the request goes on past
// it: more is then set and resume_key is the boundary (the range's end key
// forward, its start key in reverse), so that the client continues in the
// next range.
//
// A page ends at the request's limit or max_bytes. It always holds at least
// one entry when one exists, so max_bytes can be exceeded by one entry but
// a scan always makes progress. When it stops early, more is set and
// resume_key says where to continue: the next key for a forward scan (the
// next start_key), the last returned key for a reverse scan (the next,
// exclusive, end_key).
func (s *kvServer) Scan(ctx context.Context, req *kvpb.ScanRequest) (*kvpb.ScanResponse, error) {
	limit, maxBytes, err := s.n.limits.checkScan(req)
	if err != nil {
		return nil, err
	}
	routeKey := req.GetStartKey()
	if req.GetReverse() && len(req.GetEndKey()) > 0 {
		// The range holding the last key before end.
		routeKey = kvpb.KeyBefore(req.GetEndKey())
	}
	r, desc, err := s.n.replicaFor(req.GetHeader(), routeKey)
	if err != nil {
		return nil, err
	}
	start, end, err := s.n.clipToRange(req.GetHeader(), desc, req.GetStartKey(), req.GetEndKey(), req.GetReverse())
	if err != nil {
		return nil, err
	}
	idx, err := s.n.readBarrier(ctx, "Scan", req.GetHeader(), r)
	if err != nil {
		return nil, err
	}
	page, err := s.n.data.Scan(rangesm.ScanOptions{Start: start, End: end, Reverse: req.GetReverse(), KeysOnly: req.GetKeysOnly(),
		Limit: limit, MaxBytes: maxBytes})
	if err != nil {
		return nil, readError("Scan", err)
	}
	resp := &kvpb.ScanResponse{Header: s.n.respHeader(r, idx), Kvs: page.Kvs, More: page.More, ResumeKey: page.ResumeKey}
	if !page.More {
		if rk, ok := rangeBoundaryResume(desc, req.GetStartKey(), req.GetEndKey(), req.GetReverse()); ok {
			// The range ended before the request did: the next range
			// continues it (docs/wire-protocol.md, "Scans across ranges").
			resp.More, resp.ResumeKey = true, rk
		}
	}
	return resp, nil
}

// BatchGet reads every key at one consistent point with one engine call.
func (s *kvServer) BatchGet(ctx context.Context, req *kvpb.BatchGetRequest) (*kvpb.BatchGetResponse, error) {
	if err := s.n.limits.checkBatchGet(req); err != nil {
		return nil, err
	}
	var first []byte
	if len(req.Keys) > 0 {
		first = req.Keys[0]
	}
	r, desc, err := s.n.replicaFor(req.GetHeader(), first)
	if err != nil {
		return nil, err
	}
	for _, k := range req.Keys {
		if err := s.n.checkKey(req.GetHeader(), desc, k); err != nil {
			return nil, err
		}
	}
	idx, err := s.n.readBarrier(ctx, "BatchGet", req.GetHeader(), r)
	if err != nil {
		return nil, err
	}
	vals, err := s.n.data.MultiGet(req.Keys)
	if err != nil {
		return nil, readError("BatchGet", err)
	}
	resp := &kvpb.BatchGetResponse{Header: s.n.respHeader(r, idx), Results: make([]*kvpb.GetResult, len(vals))}
	total := 0
	for i, v := range vals {
		total += len(v)
		resp.Results[i] = &kvpb.GetResult{Found: v != nil, Value: v}
	}
	if total > s.n.limits.MaxResponseBytes {
		return nil, limitExceeded("keys", fmt.Sprintf("the values of %d keys", len(vals)), "max_response_bytes",
			s.n.limits.MaxResponseBytes, total)
	}
	return resp, nil
}

func clone(b []byte) []byte { return append([]byte{}, b...) }
