package node

import (
	"context"
	"fmt"
	"sync"

	"google.golang.org/grpc/status"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/raft"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/rangesm"
)

// The Txn service's methods for transactions across ranges
// (docs/transactions.md, "Several ranges"): Write (intents), Record (the
// transaction record), Resolve and Prevent. Each is one command on one
// range, proposed like a Batch (route, validate, propose, wait; eval.go).

// recordRange routes a request about the transaction record at rk: the
// transaction's ID, and the replica and descriptor of the range holding
// rk on this node, once the ID's length and the key's size are valid and
// the key lies in that range.
func (n *Node) recordRange(h *kvpb.RequestHeader, txnID, rk []byte) (command.TxnID, *raft.Replica, *kvpb.RangeDescriptor, error) {
	id, err := txnIDFromProto(txnID)
	if err != nil {
		return id, nil, nil, err
	}
	if err := n.limits.checkKey("record_key", rk); err != nil {
		return id, nil, nil, err
	}
	r, desc, err := n.replicaFor(h, rk)
	if err != nil {
		return id, nil, nil, err
	}
	if err := n.checkKey(h, desc, rk); err != nil {
		return id, nil, nil, err
	}
	return id, r, desc, nil
}

func txnIDFromProto(b []byte) (command.TxnID, error) {
	var id command.TxnID
	if len(b) != command.TxnIDLen {
		return id, invalidArgument("txn_id", "a transaction ID has %d bytes, not %d", command.TxnIDLen, len(b))
	}
	copy(id[:], b)
	return id, nil
}

// Write writes a transaction's intents on one range, after validating its
// reads there, and on the record's range stages the record in the same
// command when asked to; a read that changed, or a record that could not
// be staged, is answered written false (the
// coordinator aborts the attempt and runs the transaction again). A key
// locked by another transaction is waited for (txn_wait.go); a wait that
// ends without it free is answered written false too.
func (s *txnServer) Write(ctx context.Context, req *kvpb.TxnWriteRequest) (*kvpb.TxnWriteResponse, error) {
	const op = "TxnWrite"
	n := s.n
	id, err := txnIDFromProto(req.GetTxnId())
	if err != nil {
		return nil, err
	}
	c0, ok, err := timestampFromProto("commit_timestamp", req.GetCommitTimestamp())
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, invalidArgument("commit_timestamp", "a transaction write needs its commit candidate")
	}
	if limit := n.clock.PhysicalNow() + int64(n.clock.MaxOffset()); c0.WallTime > limit {
		return nil, invalidArgument("commit_timestamp", "future timestamp %s: beyond this node's clock plus the maximum clock offset (%v)", c0, n.clock.MaxOffset())
	}
	rts, ok, err := timestampFromProto("read_timestamp", req.GetReadTimestamp())
	if err != nil {
		return nil, err
	}
	if !ok && len(req.GetReads()) > 0 {
		return nil, invalidArgument("read_timestamp", "a write with reads needs the timestamp they were served at")
	}
	muts, reads := req.GetMutations(), req.GetReads()
	if len(muts) == 0 && len(reads) == 0 {
		return nil, invalidArgument("mutations", "a transaction write needs a mutation or a read")
	}
	if len(muts) > 0 {
		if err := n.limits.checkBatch(&kvpb.BatchRequest{Mutations: muts}); err != nil {
			return nil, err
		}
	}
	if len(reads) > n.limits.MaxBatchOps {
		return nil, countExceeded("reads", "reads", "max_batch_ops", n.limits.MaxBatchOps, len(reads))
	}
	var first []byte
	if len(muts) > 0 {
		first = kvpb.MutationKey(muts[0])
	} else {
		first = reads[0].GetKey()
	}
	r, desc, err := n.replicaFor(req.GetHeader(), first)
	if err != nil {
		return nil, err
	}
	for i, m := range muts {
		if m.GetDeleteRange() != nil {
			return nil, invalidArgument(fmt.Sprintf("mutations[%d]", i), "a transaction across ranges writes puts and deletes, not a delete range")
		}
		if err := n.checkKey(req.GetHeader(), desc, kvpb.MutationKey(m)); err != nil {
			return nil, err
		}
	}
	cmd := batchCmd(&kvpb.BatchRequest{Mutations: muts})
	cmd.Kind = command.KindTxnWrite
	cmd.TxnWrite = command.TxnWrite{ID: id, Record: req.GetRecordKey()}
	if req.GetStageBound() != nil {
		// The record's stage folded into this range's write.
		bound, _, err := timestampFromProto("stage_bound", req.GetStageBound())
		if err != nil {
			return nil, err
		}
		ks := req.GetStageKeys()
		if bound.IsZero() || len(ks) == 0 || len(muts) == 0 {
			return nil, invalidArgument("stage_keys", "a staging write needs its mutations, the staging bound and the keys of the intents")
		}
		if len(ks) > n.limits.MaxBatchOps {
			return nil, countExceeded("stage_keys", "keys", "max_batch_ops", n.limits.MaxBatchOps, len(ks))
		}
		if err := n.limits.checkKey("record_key", req.GetRecordKey()); err != nil {
			return nil, err
		}
		if err := n.checkKey(req.GetHeader(), desc, req.GetRecordKey()); err != nil {
			return nil, err
		}
		cmd.TxnWrite.Stage, cmd.TxnWrite.StageBound, cmd.TxnWrite.StageKeys = true, bound, ks
		cmd.TxnWrite.Heartbeat = req.GetHeartbeatUnixNanos()
	}
	if cmd.TxnWrite.Resolve, err = n.foldedResolves(req, desc); err != nil {
		return nil, err
	}
	if dr := req.GetDeleteRecords(); len(dr) > 0 {
		if len(muts) == 0 {
			return nil, invalidArgument("delete_records", "record deletions ride on a write with mutations only")
		}
		if len(dr) > n.limits.MaxBatchOps {
			return nil, countExceeded("delete_records", "records", "max_batch_ops", n.limits.MaxBatchOps, len(dr))
		}
		cmd.TxnWrite.DeleteRecords = make([]command.TxnID, len(dr))
		for i, b := range dr {
			if cmd.TxnWrite.DeleteRecords[i], err = txnIDFromProto(b); err != nil {
				return nil, err
			}
		}
	}
	cmd.Txn.ReadTimestamp = rts
	if cmd.Txn.Reads, err = n.txnReads(req.GetHeader(), desc, reads); err != nil {
		return nil, err
	}
	// The intents go in at p = max(C0, F.Next()): the proposal timestamp
	// is the commit candidate, not a fresh one (write keeps it).
	cmd.Timestamp = c0
	if err := n.updateClock(op, c0); err != nil {
		return nil, err
	}
	res, idx, err := n.write(ctx, op, req.GetHeader(), r, cmd)
	if len(cmd.TxnWrite.Resolve) > 0 {
		n.lockQueues.wakeRange(r.RangeID()) // intents resolved: waiters look again
	}
	if err != nil {
		return nil, err
	}
	resp := &kvpb.TxnWriteResponse{Header: n.respHeader(r, idx)}
	if res.Code == command.CodeReadChanged || res.Code == command.CodeIntentConflict {
		resp.ReadChanged = &kvpb.ReadChanged{Key: append([]byte{}, res.Value...), Reason: res.Message}
		return resp, nil
	}
	resp.Written, resp.Version = true, rangesm.TimestampProto(res.Version)
	resp.Resolved = len(cmd.TxnWrite.Resolve) > 0 && res.Found
	resp.Contended = n.lockQueues.queued(r.RangeID(), writtenKeys(cmd))
	return resp, nil
}

// foldedResolves returns a Write's folded resolutions (committed
// transactions' intents on this range, resolved by the same command
// before its own checks: docs/transactions.md, "Resolution folded into
// writes"; one with a record key carries that record's COMMITTED). A
// key or record key outside desc (a split the coordinator has not seen)
// drops them all, unanswered (the write's resolved stays false and the
// coordinator resolves them on their own); a malformed one is refused.
func (n *Node) foldedResolves(req *kvpb.TxnWriteRequest, desc *kvpb.RangeDescriptor) ([]command.TxnResolve, error) {
	rs := req.GetResolve()
	if len(rs) == 0 {
		return nil, nil
	}
	if len(req.GetMutations()) == 0 {
		return nil, invalidArgument("resolve", "folded resolutions ride on a write with mutations only")
	}
	if len(rs) > n.limits.MaxBatchOps {
		return nil, countExceeded("resolve", "resolutions", "max_batch_ops", n.limits.MaxBatchOps, len(rs))
	}
	out := make([]command.TxnResolve, len(rs))
	total := 0
	in := true
	for i, f := range rs {
		id, err := txnIDFromProto(f.GetTxnId())
		if err != nil {
			return nil, err
		}
		c, ok, err := timestampFromProto("resolve.commit_timestamp", f.GetCommitTimestamp())
		if err != nil {
			return nil, err
		}
		ks := f.GetKeys()
		if !ok || c.IsZero() || len(ks) == 0 {
			return nil, invalidArgument(fmt.Sprintf("resolve[%d]", i), "a folded resolution needs its commit timestamp and keys")
		}
		if total += len(ks); total > n.limits.MaxBatchOps {
			return nil, countExceeded("resolve", "keys", "max_batch_ops", n.limits.MaxBatchOps, total)
		}
		for _, k := range ks {
			if err := n.limits.checkKey("resolve.keys", k); err != nil {
				return nil, err
			}
			if !keys.ContainsUserKey(desc, k) {
				in = false
			}
		}
		out[i] = command.TxnResolve{ID: id, Committed: true, CommitTimestamp: c, Keys: ks}
		if rk := f.GetRecordKey(); len(rk) > 0 {
			// The transaction's COMMITTED, carried: its record must be
			// this range's too.
			if err := n.limits.checkKey("resolve.record_key", rk); err != nil {
				return nil, err
			}
			if !keys.ContainsUserKey(desc, rk) {
				in = false
			}
			out[i].Record = rk
		}
	}
	if !in {
		return nil, nil
	}
	return out, nil
}

// Record reads or changes a transaction record on the range holding its
// record key. QUERY reads at the leader after a read barrier, so that it
// sees every op acknowledged before it.
func (s *txnServer) Record(ctx context.Context, req *kvpb.TxnRecordRequest) (*kvpb.TxnRecordResponse, error) {
	const op = "TxnRecord"
	n := s.n
	id, r, desc, err := n.recordRange(req.GetHeader(), req.GetTxnId(), req.GetRecordKey())
	if err != nil {
		return nil, err
	}
	rk := req.GetRecordKey()
	if req.GetOp() == kvpb.TxnRecordOp_TXN_RECORD_QUERY {
		if err := n.observeHeader(op, req.GetHeader()); err != nil {
			return nil, err
		}
		idx, err := n.readBarrier(ctx, op, r)
		if err != nil {
			return nil, err
		}
		return n.queriedRecord(op, req.GetHeader(), r, idx, id, rk)
	}
	if req.GetOp() < kvpb.TxnRecordOp_TXN_RECORD_STAGE || req.GetOp() > kvpb.TxnRecordOp_TXN_RECORD_DELETE {
		return nil, invalidArgument("op", "unknown record op %v", req.GetOp())
	}
	ts, _, err := timestampFromProto("timestamp", req.GetTimestamp())
	if err != nil {
		return nil, err
	}
	if req.GetOp() == kvpb.TxnRecordOp_TXN_RECORD_STAGE {
		if len(req.GetKeys()) == 0 || ts.IsZero() {
			return nil, invalidArgument("keys", "a stage needs the keys of the intents and the commit candidate")
		}
	}
	if len(req.GetKeys()) > n.limits.MaxBatchOps {
		return nil, countExceeded("keys", "keys", "max_batch_ops", n.limits.MaxBatchOps, len(req.GetKeys()))
	}
	switch req.GetOp() {
	case kvpb.TxnRecordOp_TXN_RECORD_COMMIT:
		// Keys: the intents of this range to resolve with the commit.
		for _, k := range req.GetKeys() {
			if err := n.checkKey(req.GetHeader(), desc, k); err != nil {
				return nil, err
			}
		}
	case kvpb.TxnRecordOp_TXN_RECORD_DELETE:
		// Keys: the IDs of more finished records to delete.
		for _, k := range req.GetKeys() {
			if _, err := txnIDFromProto(k); err != nil {
				return nil, err
			}
		}
	}
	cmd := &command.Command{Kind: command.KindTxnRecord, TxnRecord: command.TxnRecordCmd{ID: id,
		Op: command.TxnRecordOp(req.GetOp()), RecordKey: rk, Timestamp: ts,
		Heartbeat: req.GetHeartbeatUnixNanos(), Keys: req.GetKeys()}}
	res, idx, err := n.write(ctx, op, req.GetHeader(), r, cmd)
	if err != nil {
		return nil, err
	}
	if req.GetOp() == kvpb.TxnRecordOp_TXN_RECORD_COMMIT && len(req.GetKeys()) > 0 {
		n.lockQueues.wakeRange(r.RangeID()) // intents resolved: waiters look again
	}
	return &kvpb.TxnRecordResponse{Header: n.respHeader(r, idx), Status: kvpb.TxnStatus(res.NodeID),
		Timestamp: rangesm.TimestampProto(res.Version)}, nil
}

// queriedRecord answers a QUERY of transaction id's record (record key
// rk) on r once its read barrier returned idx. The record, the range's
// descriptor and its freeze come from one engine snapshot
// (rangesm.ReadTxnRecordOwned), and the record answers only if the
// range owns rk there and is not frozen. Read apart, the record under
// r's ID and r.Descriptor() disagree while a merge applies: the merge's
// batch moves the right-hand range's records to the left-hand range's
// ID, and the retired right-hand replica still describes its span, so a
// query whose barrier passed before the merge and whose read came after
// answered "missing" (TestRecordQueryAfterMergeIsNotMissing). A split
// moves the record to the new range's ID; the view then shows the
// shorter descriptor, and the client is sent it.
func (n *Node) queriedRecord(op string, h *kvpb.RequestHeader, r *raft.Replica, idx uint64, id command.TxnID, rk []byte) (*kvpb.TxnRecordResponse, error) {
	rec, d, frozen, err := rangesm.ReadTxnRecordOwned(n.db, r.RangeID(), id)
	switch {
	case err != nil:
		return nil, readError(op, err)
	case d == nil:
		return nil, n.raftError(op, fmt.Errorf("%w: range %d merged away or was removed", raft.ErrRangeNotFound, r.RangeID()))
	case frozen:
		return nil, n.raftError(op, r.FrozenError())
	case !keys.ContainsUserKey(d, rk):
		return nil, n.keyMismatch(h.GetRangeId(), d, op+": the record key moved to another range")
	}
	return recordResponse(n.respHeader(r, idx), &rec), nil
}

func recordResponse(h *kvpb.ResponseHeader, rec *rangesm.TxnRecord) *kvpb.TxnRecordResponse {
	return &kvpb.TxnRecordResponse{Header: h, Status: kvpb.TxnStatus(rec.Status), Timestamp: rangesm.TimestampProto(rec.Timestamp),
		HeartbeatUnixNanos: rec.Heartbeat, Keys: rec.Keys}
}

// Resolve resolves a finished transaction's intents on keys of one range.
func (s *txnServer) Resolve(ctx context.Context, req *kvpb.TxnResolveRequest) (*kvpb.TxnResolveResponse, error) {
	const op = "TxnResolve"
	n := s.n
	id, err := txnIDFromProto(req.GetTxnId())
	if err != nil {
		return nil, err
	}
	ks := req.GetKeys()
	if len(ks) == 0 {
		return nil, invalidArgument("keys", "nothing to resolve")
	}
	if len(ks) > n.limits.MaxBatchOps {
		return nil, countExceeded("keys", "keys", "max_batch_ops", n.limits.MaxBatchOps, len(ks))
	}
	c, _, err := timestampFromProto("commit_timestamp", req.GetCommitTimestamp())
	if err != nil {
		return nil, err
	}
	if req.GetCommitted() && c.IsZero() {
		return nil, invalidArgument("commit_timestamp", "a committed transaction resolves at its commit timestamp")
	}
	r, desc, err := n.replicaFor(req.GetHeader(), ks[0])
	if err != nil {
		return nil, err
	}
	for _, k := range ks {
		if err := n.checkKey(req.GetHeader(), desc, k); err != nil {
			return nil, err
		}
	}
	// One resolution of a transaction per range at a time on this node:
	// the coordinator's and a reader's, racing, would both propose; the
	// second waits for the first and then usually finds nothing left.
	done, err := n.resolving.enter(ctx, r.RangeID(), id)
	if err != nil {
		return nil, err
	}
	defer done()
	if idx, gone := n.intentsGone(ctx, op, r, id, ks); gone {
		// Someone resolved them first (a reader that met them, or the
		// coordinator when this is a reader's): nothing to propose.
		return &kvpb.TxnResolveResponse{Header: n.respHeader(r, idx)}, nil
	}
	cmd := &command.Command{Kind: command.KindTxnResolve, TxnResolve: command.TxnResolve{ID: id,
		Committed: req.GetCommitted(), CommitTimestamp: c, Keys: ks}}
	if !req.GetCommitted() {
		cmd.TxnResolve.CommitTimestamp = hlc.Timestamp{}
	}
	res, idx, err := n.write(ctx, op, req.GetHeader(), r, cmd)
	if err != nil {
		return nil, err
	}
	n.lockQueues.wakeRange(r.RangeID()) // writes waiting here look again
	return &kvpb.TxnResolveResponse{Header: n.respHeader(r, idx), Resolved: res.NodeID}, nil
}

// resolveFlights are the resolutions in flight on a node, by range and
// transaction.
type resolveFlights struct {
	mu sync.Mutex
	m  map[resolveFlight]chan struct{}
}

type resolveFlight struct {
	rangeID uint64
	txn     command.TxnID
}

// enter waits until no other resolution of txn on the range is in flight
// here, then marks this one in flight until done is called.
func (f *resolveFlights) enter(ctx context.Context, rangeID uint64, txn command.TxnID) (done func(), err error) {
	k := resolveFlight{rangeID, txn}
	for {
		f.mu.Lock()
		ch, busy := f.m[k]
		if !busy {
			if f.m == nil {
				f.m = map[resolveFlight]chan struct{}{}
			}
			ch = make(chan struct{})
			f.m[k] = ch
			f.mu.Unlock()
			return func() {
				f.mu.Lock()
				delete(f.m, k)
				f.mu.Unlock()
				close(ch)
			}, nil
		}
		f.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
}

// intentsGone reports whether none of ks holds an intent of transaction
// id on r, as of a read barrier at r's leader: a resolution would then
// apply as nothing, and its proposal is spared. Every intent of a
// transaction that is being resolved went in before its coordinator
// decided it (its write was acknowledged, so applied at the leader of
// the time), and the barrier makes this replica's applied state cover
// every entry committed before the check: an intent not in it was
// resolved already. (An aborted transaction's write that comes late,
// after this check, comes after a resolution that applied just as
// well, and is dropped as such a late intent is: its record is
// ABORTED, or missing, and a pusher aborts it.) The barrier is taken
// only when this replica's applied state already shows none of them;
// any failure says false, and the resolution is proposed.
//
// After the barrier the answer comes from one engine snapshot that also
// shows the range's descriptor and freeze (rangesm.TxnIntentsGone), not
// from lookups checked against r.Descriptor(): a split or merge moves
// intents to another range's lock table in the engine before (split)
// or without (merge, for the right-hand range) a change of the
// descriptor in memory, and in that window the lookups missed an intent
// that still stood. The resolution answered "resolved", the coordinator
// deleted the record, and the next reader aborted the record it found
// missing and dropped the committed write (TestChaosShort,
// split-merge-storm; TestResolveDuringMergeKeepsTheIntent).
func (n *Node) intentsGone(ctx context.Context, op string, r *raft.Replica, id command.TxnID, ks [][]byte) (uint64, bool) {
	for _, k := range ks {
		in, found, err := rangesm.ReadIntent(n.db, r.RangeID(), k)
		if err != nil || (found && in.Txn == id) {
			return 0, false
		}
	}
	idx, err := n.readBarrier(ctx, op, r)
	if err != nil {
		return 0, false
	}
	if gone, err := rangesm.TxnIntentsGone(n.db, r.RangeID(), id, ks); err != nil || !gone {
		return 0, false
	}
	return idx, true
}

// Prevent is recovery's check of a staging transaction's intents on one
// range.
func (s *txnServer) Prevent(ctx context.Context, req *kvpb.TxnPreventRequest) (*kvpb.TxnPreventResponse, error) {
	const op = "TxnPrevent"
	n := s.n
	id, err := txnIDFromProto(req.GetTxnId())
	if err != nil {
		return nil, err
	}
	ks := req.GetKeys()
	if len(ks) == 0 || len(ks) > n.limits.MaxBatchOps {
		return nil, invalidArgument("keys", "between 1 and %d keys, not %d", n.limits.MaxBatchOps, len(ks))
	}
	ts, ok, err := timestampFromProto("timestamp", req.GetTimestamp())
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, invalidArgument("timestamp", "the staging timestamp is required")
	}
	if limit := n.clock.PhysicalNow() + int64(n.clock.MaxOffset()); ts.WallTime > limit {
		return nil, invalidArgument("timestamp", "future timestamp %s", ts)
	}
	r, desc, err := n.replicaFor(req.GetHeader(), ks[0])
	if err != nil {
		return nil, err
	}
	for _, k := range ks {
		if err := n.checkKey(req.GetHeader(), desc, k); err != nil {
			return nil, err
		}
	}
	cmd := &command.Command{Kind: command.KindTxnPrevent, TxnPrevent: command.TxnPrevent{ID: id, Timestamp: ts, Keys: ks}}
	res, idx, err := n.write(ctx, op, req.GetHeader(), r, cmd)
	if err != nil {
		return nil, err
	}
	resp := &kvpb.TxnPreventResponse{Header: n.respHeader(r, idx), Found: res.Found, MissingKey: res.Value}
	if res.Found {
		resp.Provisional = rangesm.TimestampProto(res.Version)
	}
	return resp, nil
}
