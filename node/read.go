package node

import (
	"context"
	"fmt"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/internal/keys"
	"github.com/shaledb/shale/storage"
)

// Scan reads one page of [start_key, end_key) from a consistent engine view
// (the iterator's), forward or in reverse.
//
// A page ends at the request's limit or max_bytes. It always holds at least
// one entry when one exists, so max_bytes can be exceeded by one entry but
// a scan always makes progress. When it stops early, more is set and
// resume_key says where to continue: the next key for a forward scan (the
// next start_key), the last returned key for a reverse scan (the next,
// exclusive, end_key).
func (s *kvServer) Scan(ctx context.Context, req *kvpb.ScanRequest) (*kvpb.ScanResponse, error) {
	if err := s.n.checkRange(req.GetHeader()); err != nil {
		return nil, err
	}
	limit, maxBytes, err := s.n.limits.checkScan(req)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, readError("Scan", err)
	}
	lo, hi := keys.UserSpan(req.StartKey, req.EndKey)
	it, err := s.n.db.NewIter(&storage.IterOptions{LowerBound: lo, UpperBound: hi, KeysOnly: req.KeysOnly})
	if err != nil {
		return nil, readError("Scan", err)
	}
	defer it.Close()

	resp := &kvpb.ScanResponse{Header: s.n.respHeader()}
	step := it.Next
	valid := false
	if req.Reverse {
		step = it.Prev
		valid = it.Last()
	} else {
		valid = it.First()
	}
	size := 0
	for ; valid; valid = step() {
		k, err := keys.DecodeUserKey(it.UnsafeKey())
		if err != nil {
			return nil, readError("Scan", err)
		}
		entry := len(k) + len(it.UnsafeValue())
		if len(resp.Kvs) == limit || (len(resp.Kvs) > 0 && size+entry > maxBytes) {
			break
		}
		kv := &kvpb.KeyValue{Key: clone(k)}
		if !req.KeysOnly {
			kv.Value = it.Value()
		}
		resp.Kvs = append(resp.Kvs, kv)
		size += entry
	}
	if err := it.Error(); err != nil {
		return nil, readError("Scan", err)
	}
	if valid {
		resp.More = true
		if req.Reverse {
			resp.ResumeKey = resp.Kvs[len(resp.Kvs)-1].Key
		} else {
			k, _ := keys.DecodeUserKey(it.UnsafeKey())
			resp.ResumeKey = clone(k)
		}
	}
	return resp, nil
}

// BatchGet reads every key at one consistent point with one engine call.
func (s *kvServer) BatchGet(ctx context.Context, req *kvpb.BatchGetRequest) (*kvpb.BatchGetResponse, error) {
	if err := s.n.checkRange(req.GetHeader()); err != nil {
		return nil, err
	}
	if err := s.n.limits.checkBatchGet(req); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, readError("BatchGet", err)
	}
	eks := make([][]byte, len(req.Keys))
	for i, k := range req.Keys {
		eks[i] = keys.UserKey(k)
	}
	vals, err := s.n.db.MultiGet(eks)
	if err != nil {
		return nil, readError("BatchGet", err)
	}
	resp := &kvpb.BatchGetResponse{Header: s.n.respHeader(), Results: make([]*kvpb.GetResult, len(vals))}
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
