package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/raft"
	"github.com/shaledb/shale/rangesm"
)

// Reads and writes that meet intents (docs/transactions.md, "Readers and
// writers that meet an intent"; push and recovery).
//
// A read at r that meets intents at or below r looks up each
// transaction's record (at the record range's leader) and:
//
//   - COMMITTED at C, or ABORTED: resolves the intents it met (versions
//     at C, or dropped) and reads again;
//   - STAGING with a heartbeat younger than txnExpiry: waits for one of
//     the intents to go, briefly (readWaitMax, woken by a Resolve served
//     here: txn_wait.go), then reads again; after maxIntentRounds the
//     read is answered Unavailable + RetryInfo and the client retries. A
//     reader never passes a staging transaction's intent: it met it at
//     p <= r, and the transaction may be committed at any C from p up
//     to its staging bound S (docs/transactions.md, "Pushed intents");
//   - STAGING with an older heartbeat: recovers it (txn_prevent at S on
//     the range of each listed intent: all there at p <= S means
//     committed at the highest p, else the record is aborted at that S),
//     then resolves;
//   - no record, on an intent older than txnExpiry: the coordinator died
//     before its record was written (or after it was deleted): the
//     record is created ABORTED, so it can never be staged, then
//     resolves.
//
// "Reads again" is at the same timestamp when the client chose it; a
// read at the range's frontier decides its timestamp again instead
// (readPast), since the transaction may have committed above it.
//
// A write that meets an intent waits for it in the key's queue on the
// leader, pushing its transaction as a read at r = +inf would (it can
// ignore nothing), with deadlocks broken through the push graph
// (txn_wait.go).

// txnExpiry is how old a STAGING record's heartbeat (or a recordless
// intent) must be before a pusher takes over: five heartbeat intervals
// of the coordinator (client.TxnHeartbeatInterval).
const txnExpiry = 5 * time.Second

// maxIntentRounds bounds the resolve-and-read-again rounds of one read.
const maxIntentRounds = 4

// readPast decides a read's timestamp (readTimestamp) and runs read at it
// past the intents it meets (readPastIntents). A read served at the
// range's frontier F decides its timestamp again once an intent it met is
// gone: the intent's transaction may have been acknowledged before the
// read began and committed above F (at the intent of the same transaction
// pushed highest, on another range: docs/transactions.md, "Pushed
// intents"), and the resolution that took the intent away raised F to
// that commit timestamp; read at the old F, its write would be missed.
//
// desc is the descriptor the caller checked the read's keys against. A
// read is answered only if the range's descriptor is still at its
// generation after the read, and the range is not frozen for a merge:
// the read looks for intents in the range's lock table under its ID, and
// a split moves its right-hand half's intents to the new range's, a
// merge the right-hand range's to the left-hand range's. Replication
// publishes a shrinking descriptor before the move reaches the engine
// and a growing one after (raft/apply.go), so a read that saw neither
// change before or after looked where the intents were; otherwise it is
// answered with the new descriptor, and the client reads again.
func (n *Node) readPast(ctx context.Context, op string, h *kvpb.RequestHeader, r *raft.Replica, desc *kvpb.RangeDescriptor, multiRange bool,
	read func(rangesm.Reader, hlc.Timestamp) error) (hlc.Timestamp, uint64, error) {
	for again := 0; ; again++ {
		ts, idx, atFrontier, err := n.readTimestamp(ctx, op, h, r, multiRange)
		if err != nil {
			return ts, idx, err
		}
		err = n.readPastIntents(ctx, r, ts, atFrontier, func(rd rangesm.Reader) error { return read(rd, ts) })
		if err == nil {
			if r.Frozen() {
				return ts, idx, n.raftError(op, r.FrozenError())
			}
			if d := r.Descriptor(); d.GetGeneration() != desc.GetGeneration() {
				return ts, idx, n.keyMismatch(h.GetRangeId(), d, op+": the range split or merged during the read")
			}
		}
		if !errors.Is(err, errDecideAgain) {
			if err != nil {
				err = readError(op, err)
			}
			return ts, idx, err
		}
		if again == maxIntentRounds {
			return ts, idx, unavailable(10*time.Millisecond, "%s: intents on range %d kept changing under the read", op, r.RangeID())
		}
	}
}

// errDecideAgain is readPastIntents' answer when an intent it met is gone
// and the read's timestamp is to be decided again (readPast).
var errDecideAgain = errors.New("an intent met at the frontier is gone: decide the read's timestamp again")

// readPastIntents runs read against r's data and lock table, resolving
// the intents it meets as above; it returns read's last error (an
// *rangesm.IntentError when an intent stays in the way), or
// errDecideAgain when decideAgain is set and an intent it met went.
func (n *Node) readPastIntents(ctx context.Context, r *raft.Replica, ts hlc.Timestamp, decideAgain bool, read func(rangesm.Reader) error) error {
	var waitUntil time.Time // the rounds' waits together: readWaitMax
	for round := 0; ; round++ {
		err := read(n.reader(r))
		var ie *rangesm.IntentError
		if !errors.As(err, &ie) || round == maxIntentRounds {
			return err
		}
		if round == 0 {
			n.metrics.intentReads.Inc()
		}
		if n.pushIntents(ctx, ie.Intents, ts) {
			if decideAgain {
				return errDecideAgain
			}
			continue
		}
		if waitUntil.IsZero() {
			waitUntil = time.Now().Add(readWaitMax)
		}
		if !n.awaitIntents(ctx, r, ie.Intents, waitUntil) {
			return err
		}
		if decideAgain {
			return errDecideAgain
		}
	}
}

// pushIntents tries to get met out of the way of an operation at ts
// (hlc.MaxTimestamp for a write); it reports whether anything changed
// (intents resolved).
func (n *Node) pushIntents(ctx context.Context, met []rangesm.Intent, ts hlc.Timestamp) bool {
	byTxn := map[command.TxnID][]rangesm.Intent{}
	var order []command.TxnID
	for _, in := range met {
		if _, ok := byTxn[in.Txn]; !ok {
			order = append(order, in.Txn)
		}
		byTxn[in.Txn] = append(byTxn[in.Txn], in)
	}
	progress := false
	for _, id := range order {
		ins := byTxn[id]
		ok, err := n.pushTxn(ctx, id, ins, ts)
		if err != nil {
			n.log.Debug("pushing a transaction failed", "txn", id, "err", err)
			continue
		}
		progress = progress || ok
	}
	return progress
}

// pushTxn is pushIntents for one transaction's intents ins.
func (n *Node) pushTxn(ctx context.Context, id command.TxnID, ins []rangesm.Intent, ts hlc.Timestamp) (bool, error) {
	rk := ins[0].Record
	rec, err := n.txnRecord(ctx, kvpb.TxnRecordOp_TXN_RECORD_QUERY, id, rk, hlc.Timestamp{})
	if err != nil {
		return false, err
	}
	now := n.clock.PhysicalNow()
	switch rec.GetStatus() {
	case kvpb.TxnStatus_TXN_STATUS_STAGING:
		bound, _, err := timestampFromProto("timestamp", rec.GetTimestamp())
		if err != nil {
			return false, err
		}
		if now-rec.GetHeartbeatUnixNanos() < int64(txnExpiry) {
			return false, nil // alive: wait
		}
		listed := rec.GetKeys()
		if rec, err = n.recoverTxn(ctx, id, rk, bound, listed); err != nil {
			return false, err
		}
		if err := n.finishRecovered(ctx, id, rec, listed); err != nil {
			return false, err
		}
		return true, nil
	case kvpb.TxnStatus_TXN_STATUS_MISSING:
		oldest := ins[0].Provisional
		for _, in := range ins {
			if in.Provisional.Less(oldest) {
				oldest = in.Provisional
			}
		}
		if now-oldest.WallTime < int64(txnExpiry) {
			return false, nil // the record may be on its way
		}
		// Abort the record only if it is still missing: its stage may
		// land between the query above and this abort (a late stage, its
		// intents all in), and an unconditional abort would then abort a
		// transaction its coordinator has acknowledged. An abort applies
		// to a STAGING record only at its own staging timestamp, which is
		// never MaxTimestamp (an oracle timestamp); on a missing record
		// it creates it ABORTED whatever the timestamp.
		if rec, err = n.txnRecord(ctx, kvpb.TxnRecordOp_TXN_RECORD_ABORT, id, rk, hlc.MaxTimestamp); err != nil {
			return false, err
		}
	}
	switch rec.GetStatus() {
	case kvpb.TxnStatus_TXN_STATUS_COMMITTED, kvpb.TxnStatus_TXN_STATUS_ABORTED:
		c, _, err := timestampFromProto("timestamp", rec.GetTimestamp())
		if err != nil {
			return false, err
		}
		committed := rec.GetStatus() == kvpb.TxnStatus_TXN_STATUS_COMMITTED
		ks := make([][]byte, len(ins))
		for i, in := range ins {
			ks[i] = in.Key
		}
		if err := n.resolveTxnKeys(ctx, id, committed, c, ks); err != nil {
			return false, err
		}
		return true, nil
	}
	return false, nil
}

// recoverTxn decides a STAGING transaction whose coordinator stopped
// heartbeating (docs/transactions.md, "Records"): txn_prevent at its
// staging bound S on the range of each intent its record lists; all
// there at p <= S, it is committed at the highest p (the C its
// coordinator computed from the same intents); otherwise its record is
// aborted at that S (the missing intent can no longer be written at or
// below it). It returns the record after the decision (which a
// coordinator that re-staged meanwhile may have made something else).
func (n *Node) recoverTxn(ctx context.Context, id command.TxnID, rk []byte, bound hlc.Timestamp, ks [][]byte) (*kvpb.TxnRecordResponse, error) {
	all := true
	var c hlc.Timestamp
	for _, k := range ks {
		var resp *kvpb.TxnPreventResponse
		err := n.onRangeOf(ctx, k, func(ctx context.Context, cl kvpb.TxnClient, h *kvpb.RequestHeader) (err error) {
			resp, err = cl.Prevent(ctx, &kvpb.TxnPreventRequest{Header: h, TxnId: id[:], Timestamp: rangesm.TimestampProto(bound), Keys: [][]byte{k}})
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("recovering transaction %s: %w", id, err)
		}
		if !resp.GetFound() {
			all = false
			break
		}
		p, ok, err := timestampFromProto("provisional", resp.GetProvisional())
		if err != nil || !ok {
			return nil, fmt.Errorf("recovering transaction %s: the intent on %q was found without its provisional version: %v", id, k, err)
		}
		c = c.Forward(p)
	}
	op, ts := kvpb.TxnRecordOp_TXN_RECORD_ABORT, bound
	if all {
		op, ts = kvpb.TxnRecordOp_TXN_RECORD_COMMIT, c
	}
	n.log.Info("recovered a transaction whose coordinator stopped", "txn", id, "committed", all, "at", ts)
	return n.txnRecord(ctx, op, id, rk, ts)
}

// finishRecovered resolves every intent a transaction recovery decided
// lists (a record still STAGING, re-staged by a coordinator that came
// back, is left to it). The record stays: its coordinator may be alive
// behind a partition, and when it tries to abort its attempt it must find
// the decision (COMMITTED) rather than no record, which its abort would
// turn into ABORTED, telling its caller a committed transaction failed.
func (n *Node) finishRecovered(ctx context.Context, id command.TxnID, rec *kvpb.TxnRecordResponse, ks [][]byte) error {
	st := rec.GetStatus()
	if st != kvpb.TxnStatus_TXN_STATUS_COMMITTED && st != kvpb.TxnStatus_TXN_STATUS_ABORTED {
		return nil
	}
	c, _, err := timestampFromProto("timestamp", rec.GetTimestamp())
	if err != nil {
		return err
	}
	return n.resolveTxnKeys(ctx, id, st == kvpb.TxnStatus_TXN_STATUS_COMMITTED, c, ks)
}

// txnRecord runs one record op (or a query) at the record range.
func (n *Node) txnRecord(ctx context.Context, op kvpb.TxnRecordOp, id command.TxnID, rk []byte, ts hlc.Timestamp) (*kvpb.TxnRecordResponse, error) {
	var resp *kvpb.TxnRecordResponse
	err := n.onRangeOf(ctx, rk, func(ctx context.Context, c kvpb.TxnClient, h *kvpb.RequestHeader) (err error) {
		resp, err = c.Record(ctx, &kvpb.TxnRecordRequest{Header: h, TxnId: id[:], Op: op, RecordKey: rk, Timestamp: rangesm.TimestampProto(ts)})
		return err
	})
	return resp, err
}

// resolveTxnKeys resolves a finished transaction's intents on ks, range
// by range.
func (n *Node) resolveTxnKeys(ctx context.Context, id command.TxnID, committed bool, c hlc.Timestamp, ks [][]byte) error {
	for _, k := range ks {
		err := n.onRangeOf(ctx, k, func(ctx context.Context, cl kvpb.TxnClient, h *kvpb.RequestHeader) error {
			_, err := cl.Resolve(ctx, &kvpb.TxnResolveRequest{Header: h, TxnId: id[:], Committed: committed,
				CommitTimestamp: rangesm.TimestampProto(c), Keys: [][]byte{k}})
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// onRangeOf calls call with a Txn client of the leader (as far as this
// node knows) of the range holding key and a header naming that range,
// retrying with the next replica or a fresh lookup on failure.
func (n *Node) onRangeOf(ctx context.Context, key []byte, call func(context.Context, kvpb.TxnClient, *kvpb.RequestHeader) error) error {
	var last error
	for attempt := 0; attempt < 6; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return errors.Join(last, ctx.Err())
			case <-time.After(time.Duration(attempt) * 20 * time.Millisecond):
			}
		}
		look, err := (&adminServer{n: n}).RangeLookup(ctx, &kvpb.RangeLookupRequest{Key: key, Stale: attempt == 0})
		if err != nil || len(look.GetRanges()) == 0 {
			last = fmt.Errorf("looking up the range of %q: %v", key, err)
			continue
		}
		d := look.GetRanges()[0]
		target := look.GetLeaders()[0].GetNodeId()
		if reps := d.GetReplicas(); target == 0 || attempt > 1 {
			if len(reps) == 0 {
				last = fmt.Errorf("range %d has no replicas", d.GetRangeId())
				continue
			}
			if target == 0 || attempt > 2 {
				target = reps[attempt%len(reps)].GetNodeId()
			}
		}
		var c kvpb.TxnClient = localTxn{&txnServer{n: n}}
		if target != n.ident.NodeID {
			cc, err := n.peers.conn(target)
			if err != nil {
				last = err
				continue
			}
			c = kvpb.NewTxnClient(cc)
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		last = call(cctx, c, &kvpb.RequestHeader{RangeId: d.GetRangeId(), RangeGeneration: d.GetGeneration()})
		cancel()
		if last == nil {
			return nil
		}
	}
	return last
}

// localTxn calls this node's Txn service directly.
type localTxn struct{ s *txnServer }

var _ kvpb.TxnClient = localTxn{}

func (l localTxn) Begin(ctx context.Context, in *kvpb.TxnBeginRequest, _ ...grpc.CallOption) (*kvpb.TxnBeginResponse, error) {
	return l.s.Begin(ctx, in)
}

func (l localTxn) Commit(ctx context.Context, in *kvpb.TxnCommitRequest, _ ...grpc.CallOption) (*kvpb.TxnCommitResponse, error) {
	return l.s.Commit(ctx, in)
}

func (l localTxn) Write(ctx context.Context, in *kvpb.TxnWriteRequest, _ ...grpc.CallOption) (*kvpb.TxnWriteResponse, error) {
	return l.s.Write(ctx, in)
}

func (l localTxn) Record(ctx context.Context, in *kvpb.TxnRecordRequest, _ ...grpc.CallOption) (*kvpb.TxnRecordResponse, error) {
	return l.s.Record(ctx, in)
}

func (l localTxn) Resolve(ctx context.Context, in *kvpb.TxnResolveRequest, _ ...grpc.CallOption) (*kvpb.TxnResolveResponse, error) {
	return l.s.Resolve(ctx, in)
}

func (l localTxn) WaitFor(ctx context.Context, in *kvpb.TxnWaitForRequest, _ ...grpc.CallOption) (*kvpb.TxnWaitForResponse, error) {
	return l.s.WaitFor(ctx, in)
}

func (l localTxn) Lock(ctx context.Context, in *kvpb.TxnLockRequest, _ ...grpc.CallOption) (*kvpb.TxnLockResponse, error) {
	return l.s.Lock(ctx, in)
}

func (l localTxn) Prevent(ctx context.Context, in *kvpb.TxnPreventRequest, _ ...grpc.CallOption) (*kvpb.TxnPreventResponse, error) {
	return l.s.Prevent(ctx, in)
}
