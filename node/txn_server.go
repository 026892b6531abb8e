package node

import (
	"context"
	"fmt"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/rangesm"
)

// txnServer implements kvpb.TxnServer: the read timestamp a transaction
// starts from, and the one-range commit (docs/transactions.md). A commit
// goes through the same steps as a Batch (route, validate, propose,
// wait; eval.go) as a TxnCommit command, whose reads rangesm validates at
// apply time.
type txnServer struct {
	kvpb.UnimplementedTxnServer
	n *Node
}

var _ kvpb.TxnServer = (*txnServer)(nil)

// Begin returns an oracle timestamp issued after the request arrived.
func (s *txnServer) Begin(ctx context.Context, req *kvpb.TxnBeginRequest) (*kvpb.TxnBeginResponse, error) {
	const op = "TxnBegin"
	if err := s.n.observeHeader(op, req.GetHeader()); err != nil {
		return nil, err
	}
	ts, err := s.n.proposalTimestamp(ctx, op)
	if err != nil {
		return nil, err
	}
	if err := s.n.updateClock(op, ts); err != nil {
		return nil, err
	}
	return &kvpb.TxnBeginResponse{
		Header:        &kvpb.ResponseHeader{NodeId: s.n.ident.NodeID, Now: rangesm.TimestampProto(s.n.clock.Now())},
		ReadTimestamp: rangesm.TimestampProto(ts),
	}, nil
}

// Commit validates the request like a Batch (limits, every key and span
// in the addressed range) and proposes it as one TxnCommit.
func (s *txnServer) Commit(ctx context.Context, req *kvpb.TxnCommitRequest) (*kvpb.TxnCommitResponse, error) {
	const op = "TxnCommit"
	n := s.n
	if err := n.limits.checkTxnCommit(req); err != nil {
		return nil, err
	}
	// Without reads the timestamp plays no part (zero is sent).
	rts, ok, err := timestampFromProto("read_timestamp", req.GetReadTimestamp())
	if err != nil {
		return nil, err
	}
	if !ok && len(req.GetReads()) > 0 {
		return nil, invalidArgument("read_timestamp", "a commit with reads needs the timestamp they were served at")
	}
	muts := req.GetMutations()
	r, desc, err := n.replicaFor(req.GetHeader(), kvpb.MutationKey(muts[0]))
	if err != nil {
		return nil, err
	}
	bq := &kvpb.BatchRequest{Header: req.GetHeader(), Mutations: muts}
	for _, m := range muts {
		if dr := m.GetDeleteRange(); dr != nil {
			err = n.checkSpan(req.GetHeader(), desc, dr.GetStartKey(), dr.GetEndKey())
		} else {
			err = n.checkKey(req.GetHeader(), desc, kvpb.MutationKey(m))
		}
		if err != nil {
			return nil, err
		}
	}
	cmd := batchCmd(bq)
	cmd.Kind = command.KindTxnCommit
	cmd.Txn.ReadTimestamp = rts
	if cmd.Txn.Reads, err = n.txnReads(req.GetHeader(), desc, req.GetReads()); err != nil {
		return nil, err
	}
	res, idx, err := n.write(ctx, op, req.GetHeader(), r, cmd)
	if err != nil {
		return nil, err
	}
	resp := &kvpb.TxnCommitResponse{Header: n.respHeader(r, idx)}
	if res.Code == command.CodeReadChanged || res.Code == command.CodeIntentConflict {
		resp.ReadChanged = &kvpb.ReadChanged{Key: append([]byte{}, res.Value...), Reason: res.Message}
		return resp, nil
	}
	resp.Committed, resp.Version = true, rangesm.TimestampProto(res.Version)
	return resp, nil
}

// txnReads checks that every key and span a transaction read lies in the
// range desc the request is addressed to, and returns them as the
// command carries them to be validated at apply.
func (n *Node) txnReads(h *kvpb.RequestHeader, desc *kvpb.RangeDescriptor, reads []*kvpb.TxnRead) ([]command.TxnRead, error) {
	out := make([]command.TxnRead, len(reads))
	for i, rd := range reads {
		var err error
		if rd.GetSpan() {
			err = n.checkSpan(h, desc, rd.GetKey(), rd.GetEndKey())
		} else {
			err = n.checkKey(h, desc, rd.GetKey())
		}
		if err != nil {
			return nil, err
		}
		out[i] = command.TxnRead{Key: rd.GetKey(), End: rd.GetEndKey(), Span: rd.GetSpan()}
	}
	return out, nil
}

// checkTxnCommit applies a Batch's limits to a commit's mutations, and
// the key limits and the batch count to its reads.
func (l *Limits) checkTxnCommit(req *kvpb.TxnCommitRequest) error {
	if len(req.GetMutations()) == 0 {
		return invalidArgument("mutations", "a commit needs at least one mutation (a transaction that only reads has nothing to commit)")
	}
	if err := l.checkBatch(&kvpb.BatchRequest{Mutations: req.GetMutations()}); err != nil {
		return err
	}
	for i, m := range req.GetMutations() {
		if m.GetPut().GetLease() != 0 {
			return invalidArgument(fmt.Sprintf("mutations[%d].put.lease", i), "a transaction's puts take no lease (a Batch's do)")
		}
	}
	reads := req.GetReads()
	if len(reads) > l.MaxBatchOps {
		return countExceeded("reads", "reads", "max_batch_ops", l.MaxBatchOps, len(reads))
	}
	for i, rd := range reads {
		field := fmt.Sprintf("reads[%d]", i)
		if rd.GetSpan() {
			if err := l.checkSpan(field+".", rd.GetKey(), rd.GetEndKey()); err != nil {
				return err
			}
		} else if err := l.checkKey(field+".key", rd.GetKey()); err != nil {
			return err
		}
	}
	return nil
}
