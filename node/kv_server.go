package node

import (
	"context"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/rangesm"
)

// kvServer implements kvpb.KVServer. Every write goes through the same
// steps: route to the range's replica, validate against the limits and
// the range's span, turn into a command and propose it through Raft
// (eval.go). Reads route and validate, then wait for the read barrier the
// consistency asks for and read the engine (read.go).
type kvServer struct {
	kvpb.UnimplementedKVServer
	n *Node
}

var _ kvpb.KVServer = (*kvServer)(nil)

func (s *kvServer) Put(ctx context.Context, req *kvpb.PutRequest) (*kvpb.PutResponse, error) {
	if err := s.n.limits.checkPut(req); err != nil {
		return nil, err
	}
	r, desc, err := s.n.replicaFor(req.GetHeader(), req.GetKey())
	if err != nil {
		return nil, err
	}
	if err := s.n.checkKey(req.GetHeader(), desc, req.GetKey()); err != nil {
		return nil, err
	}
	cmd := putCmd(req)
	if id := req.GetLease(); id != 0 {
		// Attach first: an unknown or ended lease writes nothing
		// (docs/leases.md, "Attach").
		deadline, err := s.n.attachLease(ctx, id, req.GetKey())
		if err != nil {
			return nil, err
		}
		cmd.Kind, cmd.Lease = command.KindLeasePut, command.Lease{ID: id, Deadline: deadline}
	}
	res, idx, err := s.n.write(ctx, "Put", req.GetHeader(), r, cmd)
	if err != nil {
		return nil, err
	}
	return &kvpb.PutResponse{Header: s.n.respHeader(r, idx), Version: rangesm.TimestampProto(res.Version)}, nil
}

func (s *kvServer) Delete(ctx context.Context, req *kvpb.DeleteRequest) (*kvpb.DeleteResponse, error) {
	if err := s.n.limits.checkDelete(req); err != nil {
		return nil, err
	}
	r, desc, err := s.n.replicaFor(req.GetHeader(), req.GetKey())
	if err != nil {
		return nil, err
	}
	if err := s.n.checkKey(req.GetHeader(), desc, req.GetKey()); err != nil {
		return nil, err
	}
	res, idx, err := s.n.write(ctx, "Delete", req.GetHeader(), r, deleteCmd(req))
	if err != nil {
		return nil, err
	}
	return &kvpb.DeleteResponse{Header: s.n.respHeader(r, idx), Version: rangesm.TimestampProto(res.Version)}, nil
}

func (s *kvServer) Batch(ctx context.Context, req *kvpb.BatchRequest) (*kvpb.BatchResponse, error) {
	if err := s.n.limits.checkBatch(req); err != nil {
		return nil, err
	}
	muts := req.GetMutations()
	var first []byte
	if len(muts) > 0 {
		first = kvpb.MutationKey(muts[0])
	}
	r, desc, err := s.n.replicaFor(req.GetHeader(), first)
	if err != nil {
		return nil, err
	}
	if len(muts) == 0 {
		return &kvpb.BatchResponse{Header: s.n.respHeader(r, r.AppliedIndex())}, nil
	}
	for _, m := range muts {
		if dr := m.GetDeleteRange(); dr != nil {
			err = s.n.checkSpan(req.GetHeader(), desc, dr.GetStartKey(), dr.GetEndKey())
		} else {
			err = s.n.checkKey(req.GetHeader(), desc, kvpb.MutationKey(m))
		}
		if err != nil {
			return nil, err
		}
	}
	cmd := batchCmd(req)
	if err := s.n.attachBatchLeases(ctx, cmd); err != nil {
		return nil, err
	}
	res, idx, err := s.n.write(ctx, "Batch", req.GetHeader(), r, cmd)
	if err != nil {
		return nil, err
	}
	return &kvpb.BatchResponse{Header: s.n.respHeader(r, idx), Version: rangesm.TimestampProto(res.Version)}, nil
}

func (s *kvServer) DeleteRange(ctx context.Context, req *kvpb.DeleteRangeRequest) (*kvpb.DeleteRangeResponse, error) {
	if err := s.n.limits.checkDeleteRange(req); err != nil {
		return nil, err
	}
	r, desc, err := s.n.replicaFor(req.GetHeader(), req.GetStartKey())
	if err != nil {
		return nil, err
	}
	if err := s.n.checkSpan(req.GetHeader(), desc, req.GetStartKey(), req.GetEndKey()); err != nil {
		return nil, err
	}
	res, idx, err := s.n.write(ctx, "DeleteRange", req.GetHeader(), r, deleteRangeCmd(req))
	if err != nil {
		return nil, err
	}
	return &kvpb.DeleteRangeResponse{Header: s.n.respHeader(r, idx), Version: rangesm.TimestampProto(res.Version)}, nil
}

// CompareAndSwap is evaluated when its log entry applies, against the
// state every earlier entry left: no write can land between its
// comparison and its swap.
func (s *kvServer) CompareAndSwap(ctx context.Context, req *kvpb.CompareAndSwapRequest) (*kvpb.CompareAndSwapResponse, error) {
	if err := s.n.limits.checkCompareAndSwap(req); err != nil {
		return nil, err
	}
	r, desc, err := s.n.replicaFor(req.GetHeader(), req.GetKey())
	if err != nil {
		return nil, err
	}
	if err := s.n.checkKey(req.GetHeader(), desc, req.GetKey()); err != nil {
		return nil, err
	}
	cmd, err := casCmd(req)
	if err != nil {
		return nil, err
	}
	if id := req.GetLease(); id != 0 {
		if req.GetDelete() {
			return nil, invalidArgument("lease", "CompareAndDelete takes no lease: a lease attaches a value it writes")
		}
		// Attach first, as Put does: an unknown or ended lease writes
		// nothing, whatever the comparison would say.
		deadline, err := s.n.attachLease(ctx, id, req.GetKey())
		if err != nil {
			return nil, err
		}
		cmd.Kind, cmd.Lease = command.KindLeaseCAS, command.Lease{ID: id, Deadline: deadline}
	}
	res, idx, err := s.n.write(ctx, "CompareAndSwap", req.GetHeader(), r, cmd)
	if err != nil {
		return nil, err
	}
	resp := &kvpb.CompareAndSwapResponse{Header: s.n.respHeader(r, idx), Succeeded: res.Succeeded, Found: res.Found,
		Version: rangesm.TimestampProto(res.Version)}
	if res.Found {
		resp.CurrentValue = append([]byte{}, res.Value...)
		resp.CurrentVersion = rangesm.TimestampProto(res.CurrentVersion)
		resp.CurrentCreateVersion = rangesm.TimestampProto(res.CurrentCreated)
	}
	return resp, nil
}

// attachBatchLeases attaches every leased put of a batch to its lease,
// one after the other, and makes cmd a KindLeaseBatch when it has any.
// An unknown or ended lease fails the batch before anything is written;
// the attachments made before it stay listed in meta, which is harmless
// (docs/leases.md, "Where leases live": the list may hold stale
// entries).
func (n *Node) attachBatchLeases(ctx context.Context, cmd *command.Command) error {
	leased := false
	for i := range cmd.Mutations {
		m := &cmd.Mutations[i]
		if m.Lease == 0 {
			continue
		}
		deadline, err := n.attachLease(ctx, m.Lease, m.Key)
		if err != nil {
			return err
		}
		m.Kind, m.Deadline, leased = command.KindLeasePut, deadline, true
	}
	if leased {
		cmd.Kind = command.KindLeaseBatch
	}
	return nil
}
