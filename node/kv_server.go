package node

import (
	"context"
	"errors"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/internal/keys"
	"github.com/shaledb/shale/storage"
)

// kvServer implements kvpb.KVServer. Every write goes through the same
// steps: check the range, validate against the limits, evaluate into a
// writeCmd, then commit under the command's latches. Reads validate and
// read the engine directly.
type kvServer struct {
	kvpb.UnimplementedKVServer
	n *Node
}

var _ kvpb.KVServer = (*kvServer)(nil)

// write commits cmd under its latches.
func (n *Node) write(ctx context.Context, op string, cmd *writeCmd) error {
	release := n.latches.acquireShared(cmd.latch)
	defer release()
	if err := n.committer.Commit(ctx, &cmd.batch); err != nil {
		return writeError(op, err)
	}
	return nil
}

func (s *kvServer) Get(ctx context.Context, req *kvpb.GetRequest) (*kvpb.GetResponse, error) {
	if err := s.n.checkRange(req.GetHeader()); err != nil {
		return nil, err
	}
	if err := s.n.limits.checkGet(req); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, readError("Get", err)
	}
	v, err := s.n.db.Get(keys.UserKey(req.Key))
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return &kvpb.GetResponse{Header: s.n.respHeader()}, nil
	case err != nil:
		return nil, readError("Get", err)
	}
	return &kvpb.GetResponse{Header: s.n.respHeader(), Found: true, Value: v}, nil
}

func (s *kvServer) Put(ctx context.Context, req *kvpb.PutRequest) (*kvpb.PutResponse, error) {
	if err := s.n.checkRange(req.GetHeader()); err != nil {
		return nil, err
	}
	if err := s.n.limits.checkPut(req); err != nil {
		return nil, err
	}
	if err := s.n.write(ctx, "Put", s.n.evalPut(req)); err != nil {
		return nil, err
	}
	return &kvpb.PutResponse{Header: s.n.respHeader()}, nil
}

func (s *kvServer) Delete(ctx context.Context, req *kvpb.DeleteRequest) (*kvpb.DeleteResponse, error) {
	if err := s.n.checkRange(req.GetHeader()); err != nil {
		return nil, err
	}
	if err := s.n.limits.checkDelete(req); err != nil {
		return nil, err
	}
	if err := s.n.write(ctx, "Delete", s.n.evalDelete(req)); err != nil {
		return nil, err
	}
	return &kvpb.DeleteResponse{Header: s.n.respHeader()}, nil
}

func (s *kvServer) Batch(ctx context.Context, req *kvpb.BatchRequest) (*kvpb.BatchResponse, error) {
	if err := s.n.checkRange(req.GetHeader()); err != nil {
		return nil, err
	}
	if err := s.n.limits.checkBatch(req); err != nil {
		return nil, err
	}
	if len(req.Mutations) > 0 {
		if err := s.n.write(ctx, "Batch", s.n.evalBatch(req)); err != nil {
			return nil, err
		}
	}
	return &kvpb.BatchResponse{Header: s.n.respHeader()}, nil
}

func (s *kvServer) DeleteRange(ctx context.Context, req *kvpb.DeleteRangeRequest) (*kvpb.DeleteRangeResponse, error) {
	if err := s.n.checkRange(req.GetHeader()); err != nil {
		return nil, err
	}
	if err := s.n.limits.checkDeleteRange(req); err != nil {
		return nil, err
	}
	if err := s.n.write(ctx, "DeleteRange", s.n.evalDeleteRange(req)); err != nil {
		return nil, err
	}
	return &kvpb.DeleteRangeResponse{Header: s.n.respHeader()}, nil
}

// CompareAndSwap holds the key's latch exclusively from its read to the end
// of its commit, so no other write to the key lands in between.
func (s *kvServer) CompareAndSwap(ctx context.Context, req *kvpb.CompareAndSwapRequest) (*kvpb.CompareAndSwapResponse, error) {
	if err := s.n.checkRange(req.GetHeader()); err != nil {
		return nil, err
	}
	if err := s.n.limits.checkCompareAndSwap(req); err != nil {
		return nil, err
	}
	release := s.n.latches.acquireExclusive(req.Key)
	defer release()
	if err := ctx.Err(); err != nil {
		return nil, readError("CompareAndSwap", err)
	}
	cur, err := s.n.db.Get(keys.UserKey(req.Key))
	found := err == nil
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return nil, readError("CompareAndSwap", err)
	}
	resp, batch := evalCompareAndSwap(req, cur, found)
	if batch != nil {
		if err := s.n.committer.Commit(ctx, batch); err != nil {
			return nil, writeError("CompareAndSwap", err)
		}
	}
	resp.Header = s.n.respHeader()
	return resp, nil
}
