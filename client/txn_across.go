package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shaledb/shale/api/kvpb"
)

// Transactions across ranges: the client is the coordinator of parallel
// commits (docs/transactions.md, "Several ranges").
//
//  1. C0, the commit candidate, is a fresh oracle timestamp (Begin), or
//     the read timestamp R when every read is covered (candidate).
//  2. Ranges the transaction only read validate its reads there first
//     (Txn.Write without mutations), which also lifts their frontier to
//     C0: nothing it read there can change at or below C0 after.
//  3. In parallel: Txn.Write on every range it wrote (its reads there
//     validated, its writes as intents at p = max(C0, F.Next())), the
//     record STAGING at its bound S with the keys of every intent in the
//     same command as the intents of its range (the first write's). S
//     is C0, or C0 + txnStageLead when every read is of a key the
//     transaction writes (txn_refresh.go).
//  4. Every intent in at p <= S and the record STAGING at S: the
//     transaction is committed at C = the highest p, and Txn returns.
//     An intent above S: the reads its intents do not cover are
//     refreshed at C and the record staged again at C (txn_refresh.go).
//     Resolution runs after, off the caller's path: the record
//     COMMITTED with its range's intents turned into versions at C (one
//     command, carried by a write of the client to that range when one
//     comes soon), then the other ranges' intents, then the record
//     deleted in a batch (finish; txn_resolve.go).
//  5. Anything else (a read changed, a key locked by another
//     transaction, the record aborted by a pusher): the coordinator
//     aborts its own record (if the abort finds it COMMITTED, recovery
//     decided the transaction committed, and so it is), drops its
//     intents, and Txn runs the function again.
//
// While steps 3 and 4 are in flight the coordinator heartbeats its record
// every TxnHeartbeatInterval; a record whose heartbeat is five intervals
// old is recovered by whoever meets its intents.

// TxnHeartbeatInterval is how often a coordinator refreshes its record
// while its commit is in flight.
const TxnHeartbeatInterval = time.Second

// txnResolveTimeout bounds the resolution that follows a commit.
const txnResolveTimeout = 30 * time.Second

// errRegroup: a range of the transaction changed (split or merge) between
// grouping and sending; the attempt is abandoned and run again.
var errRegroup = errors.New("a range changed under the transaction")

// txnGroup is the part of a transaction that one range holds.
type txnGroup struct {
	desc  *kvpb.RangeDescriptor
	muts  []*kvpb.Mutation
	reads []*kvpb.TxnRead
	// contended: the leader answered its write with someone waiting
	// for one of its keys (kvpb.TxnWriteResponse.contended), so its
	// intents are resolved at once after the commit (finish).
	contended atomic.Bool
}

func (g *txnGroup) firstKey() []byte {
	if len(g.muts) > 0 {
		return kvpb.MutationKey(g.muts[0])
	}
	return g.reads[0].GetKey()
}

// holds reports whether every key of g lies in d.
func (g *txnGroup) holds(d *kvpb.RangeDescriptor) bool {
	for _, m := range g.muts {
		if dr := m.GetDeleteRange(); dr != nil {
			if !containsSpan(d, dr.GetStartKey(), dr.GetEndKey()) {
				return false
			}
		} else if !containsKey(d, kvpb.MutationKey(m)) {
			return false
		}
	}
	for _, r := range g.reads {
		if r.GetSpan() {
			if !containsSpan(d, r.GetKey(), r.GetEndKey()) {
				return false
			}
		} else if !containsKey(d, r.GetKey()) {
			return false
		}
	}
	return true
}

// groupByRange splits the transaction's writes and reads by range (a
// scanned span that crosses ranges into one piece per range).
func (tx *Tx) groupByRange(ctx context.Context, op string) ([]*txnGroup, error) {
	c := tx.c
	if g, ok, err := tx.oneGroup(ctx, op); err != nil {
		return nil, err
	} else if ok {
		return []*txnGroup{g}, nil
	}
	var groups []*txnGroup
	byID := map[uint64]*txnGroup{}
	groupOf := func(key []byte) (*txnGroup, error) {
		ent, err := c.locate(ctx, op, routeKey{key: key})
		if err != nil {
			return nil, err
		}
		g := byID[ent.desc.GetRangeId()]
		if g == nil {
			g = &txnGroup{desc: ent.desc}
			byID[ent.desc.GetRangeId()] = g
			groups = append(groups, g)
		}
		return g, nil
	}
	deletesSpan := false
	for _, m := range tx.muts {
		g, err := groupOf(kvpb.MutationKey(m))
		if err != nil {
			return nil, err
		}
		if dr := m.GetDeleteRange(); dr != nil {
			deletesSpan = true
			if !containsSpan(g.desc, dr.GetStartKey(), dr.GetEndKey()) {
				return nil, errDeleteSpanAcross(op)
			}
		}
		g.muts = append(g.muts, m)
	}
	for _, r := range tx.reads {
		if !r.GetSpan() {
			g, err := groupOf(r.GetKey())
			if err != nil {
				return nil, err
			}
			g.reads = append(g.reads, r)
			continue
		}
		start, end := r.GetKey(), r.GetEndKey()
		for {
			g, err := groupOf(start)
			if err != nil {
				return nil, err
			}
			dEnd := g.desc.GetEndKey()
			if len(dEnd) == 0 || (len(end) > 0 && bytes.Compare(end, dEnd) <= 0) {
				g.reads = append(g.reads, &kvpb.TxnRead{Key: start, EndKey: end, Span: true})
				break
			}
			g.reads = append(g.reads, &kvpb.TxnRead{Key: start, EndKey: dEnd, Span: true})
			start = dEnd
		}
	}
	if deletesSpan && len(groups) > 1 {
		return nil, errDeleteSpanAcross(op)
	}
	return groups, nil
}

// oneGroup is groupByRange's fast path for the common case of a
// transaction whose keys all lie in the range of its first write: one
// range lookup, no map.
func (tx *Tx) oneGroup(ctx context.Context, op string) (*txnGroup, bool, error) {
	ent, err := tx.c.locate(ctx, op, routeKey{key: kvpb.MutationKey(tx.muts[0])})
	if err != nil {
		return nil, false, err
	}
	g := &txnGroup{desc: ent.desc, muts: tx.muts, reads: tx.reads}
	return g, g.holds(ent.desc), nil
}

func errDeleteSpanAcross(op string) *Error {
	return &Error{Op: op, kind: ErrTxnSpansRanges,
		Msg: "a transaction across ranges cannot delete a span (DeleteRange) yet (docs/transactions.md); delete its keys one by one or keep the transaction in one range"}
}

// txnWriteResult is one range's answer to Txn.Write.
type txnWriteResult struct {
	written bool
	p       Timestamp
	reason  string
	err     error
	// resolved: the folds the write carried applied.
	resolved bool
}

// commitAcross commits a transaction whose keys lie in several ranges.
func (tx *Tx) commitAcross(ctx context.Context, groups []*txnGroup) (committed bool, changed *Error, err error) {
	const op = "Txn"
	c := tx.c
	refresh, covered := toRefresh(groups)
	c0, err := tx.candidate(ctx, covered)
	if err != nil {
		return false, nil, err
	}
	knobs := c.knobs()
	if knobs.AfterCandidate != nil {
		knobs.AfterCandidate(c0)
	}
	id := tx.lockID // the ID its locks are held under, if it took any
	if id == ([16]byte{}) {
		_, err = rand.Read(id[:])
	}
	if err != nil {
		return false, nil, &Error{Op: op, Msg: "no random transaction ID: " + err.Error(), kind: ErrInternal, cause: err}
	}
	rk := kvpb.MutationKey(tx.muts[0])
	var readOnly, writing []*txnGroup
	var intentKeys [][]byte
	for _, g := range groups {
		if len(g.muts) == 0 {
			readOnly = append(readOnly, g)
			continue
		}
		writing = append(writing, g)
		for _, m := range g.muts {
			intentKeys = append(intentKeys, kvpb.MutationKey(m))
		}
	}
	bound := c0
	if covered {
		bound = c0.Add(txnStageLead)
	}
	// The record goes in with the intents of its own range (the range
	// of the first write), in the same command: one proposal fewer than
	// a stage of its own, and nothing to wait for besides the intents.
	var stager *txnGroup
	if len(writing) > 0 && containsKey(writing[0].desc, rk) {
		stager = writing[0]
	}
	// sendWrite writes g's intents (none: validates its reads) at ts,
	// staging the record at bound with them when stage is set.
	// The intents of the client's committed transactions in the way:
	// their resolution rides on this transaction's writes.
	// A COMMITTED this transaction's write carries goes with the write to
	// its record's range; the writes to its other ranges wait for it
	// (after) to resolve its intents there.
	folds, after, err := tx.clearFor(ctx, groups, true)
	defer func() {
		// A carried COMMITTED whose write never went (the attempt
		// ended first) is sent alone at once; after its write, a no-op.
		for _, fs := range folds {
			for _, f := range fs {
				if f.commit {
					f.t.carry(false)
				}
			}
		}
	}()
	if err != nil {
		return false, nil, tx.attemptError(err)
	}
	sendWrite := func(g *txnGroup, ts Timestamp, stage bool) (res txnWriteResult) {
		req := &kvpb.TxnWriteRequest{Header: c.header(true), TxnId: id[:], RecordKey: rk, Reads: g.reads, Mutations: g.muts,
			CommitTimestamp: toProto(ts)}
		var fs []fold
		if ts == c0 && len(g.muts) > 0 {
			// The first write to the range (a refresh carries none):
			// its own folds, those waiting for a COMMITTED it does not
			// carry, and what other transactions of the client left to
			// resolve or commit on the range.
			fs = append(folds[g], tx.afterCommitted(ctx, after[g])...)
			fs = append(fs, c.resolutions.take(g.desc, maxFoldsPerWrite, fs)...)
			fs = append(fs, c.resolutions.takeCommits(g.desc, maxFoldsPerWrite-len(fs))...)
		}
		if len(fs) > 0 {
			req.Resolve = foldsProto(fs)
			folded := false
			defer func() { c.folded(fs, folded) }()
			defer func() { folded = res.err == nil && res.written && res.resolved }()
		}
		if ts == c0 && len(g.muts) > 0 {
			// And the client's finished records of the range.
			if ids := c.recordGC.take(g.desc); len(ids) > 0 {
				for _, id := range ids {
					req.DeleteRecords = append(req.DeleteRecords, id[:])
				}
				defer func() {
					if res.err != nil {
						// Not known to have applied: deleted later.
						for _, id := range ids {
							c.recordGC.add(c, id, g.firstKey(), g.desc)
						}
					}
				}()
			}
		}
		if len(g.reads) > 0 {
			req.ReadTimestamp = toProto(tx.rts)
		}
		if stage {
			req.StageBound, req.StageKeys, req.HeartbeatUnixNanos = toProto(bound), intentKeys, time.Now().UnixNano()
		}
		var resp *kvpb.TxnWriteResponse
		// A Write that meets an intent waits in the key's queue on the
		// leader (node/txn_wait.go): it gets the longer attempt of a
		// waiting call, as a locking read's Lock does (txn_lock.go).
		err := c.routed(withWaitingAttempt(ctx, lockAttempt), op, true, routeKey{key: g.firstKey()}, func(ctx context.Context, e *endpoint, d *kvpb.RangeDescriptor) (err error) {
			if !g.holds(d) {
				return errRegroup
			}
			routeHeader(req.Header, d)
			resp, err = e.txn.Write(ctx, req)
			return err
		})
		if err != nil {
			return txnWriteResult{err: err}
		}
		if _, err := c.sawHeader(op, resp.GetHeader()); err != nil {
			return txnWriteResult{err: err}
		}
		if !resp.GetWritten() {
			return txnWriteResult{reason: resp.GetReadChanged().GetReason()}
		}
		if resp.GetContended() {
			g.contended.Store(true)
		}
		p, err := c.sawVersion(op, "version", resp.GetVersion())
		return txnWriteResult{written: true, p: p, err: err, resolved: resp.GetResolved()}
	}
	send := func(g *txnGroup, ts Timestamp) txnWriteResult { return sendWrite(g, ts, false) }
	write := func(g *txnGroup) txnWriteResult { return sendWrite(g, c0, g == stager) }
	// Ranges only read: validated (and closed at C0) before anything is
	// staged, since recovery judges a staged transaction by its intents
	// alone.
	for _, res := range parallel(readOnly, write) {
		if res.err != nil {
			return false, nil, tx.attemptError(res.err)
		}
		if !res.written {
			return false, &Error{Op: op, kind: ErrTxnAborted, Msg: "read changed: " + res.reason}, nil
		}
	}
	// Intents and the staging record, in parallel, heartbeating.
	hbCtx, stopHB := context.WithCancel(ctx)
	hbDone := make(chan struct{})
	go func() {
		defer close(hbDone)
		tx.heartbeat(hbCtx, id, rk)
	}()
	var stage *kvpb.TxnRecordResponse
	var stageErr error
	var wg sync.WaitGroup
	if stager == nil {
		// The record's range holds no intent of it (a split since the
		// grouping): the stage goes on its own.
		wg.Add(1)
		go func() {
			defer wg.Done()
			stage, stageErr = tx.recordOp(ctx, id, rk, &kvpb.TxnRecordRequest{Op: kvpb.TxnRecordOp_TXN_RECORD_STAGE,
				Timestamp: toProto(bound), HeartbeatUnixNanos: time.Now().UnixNano(), Keys: intentKeys})
		}()
	}
	results := parallel(writing, write)
	wg.Wait()

	// With the stage folded, the stager's write answered written only
	// if the record is STAGING at bound (a refusal is its why below).
	ok := true
	var why string
	var firstErr error
	var ct Timestamp // the highest p
	if stager == nil {
		ok = stageErr == nil && stage.GetStatus() == kvpb.TxnStatus_TXN_STATUS_STAGING
		if ok {
			if ts, err := fromProto(stage.GetTimestamp()); err != nil || ts != bound {
				ok = false
			}
		}
		if stageErr != nil {
			firstErr = stageErr
		} else if !ok {
			why = fmt.Sprintf("its record was %v when it staged (pushed by a reader that took its coordinator for gone)", stage.GetStatus())
		}
	}
	for _, res := range results {
		switch {
		case res.err != nil:
			if firstErr == nil {
				firstErr = res.err
			}
			ok = false
		case !res.written:
			ok = false
			if why == "" {
				why = "read changed: " + res.reason
			}
		default:
			ct = ct.Forward(res.p)
		}
	}
	if ok && bound.Less(ct) {
		if knobs.BeforeRefresh != nil {
			knobs.BeforeRefresh(c0, ct)
		}
		var err error
		if ok, why, err = tx.restage(ctx, id, rk, ct, refresh, intentKeys, send); err != nil {
			firstErr = err
		}
	}
	stopHB()
	<-hbDone
	if ok {
		tx.finish(id, rk, ct, writing, true)
		return true, nil, nil
	}
	// Not committed at C0 as sent: abort the record, unless recovery
	// already found every intent in and committed it.
	rec, err := tx.recordOp(ctx, id, rk, &kvpb.TxnRecordRequest{Op: kvpb.TxnRecordOp_TXN_RECORD_ABORT})
	if err != nil {
		return false, nil, &Error{Op: op, kind: ErrAmbiguous, cause: err,
			Msg: "the commit across ranges failed and its record could not be aborted, so whether it committed is unknown: " + err.Error()}
	}
	if rec.GetStatus() == kvpb.TxnStatus_TXN_STATUS_COMMITTED {
		ct, err := fromProto(rec.GetTimestamp())
		if err != nil {
			return false, nil, malformedAnswer(op, "timestamp", err)
		}
		tx.finish(id, rk, ct, writing, true)
		return true, nil, nil
	}
	tx.finish(id, rk, Timestamp{}, writing, false)
	if firstErr != nil {
		return false, nil, tx.attemptError(firstErr)
	}
	return false, &Error{Op: op, kind: ErrTxnAborted, Msg: why}, nil
}

// attemptError turns the failure of a request of an attempt that is
// known not to have committed into the attempt's outcome: a range that
// changed, or a request refused before it applied, runs the transaction
// again; anything else ends it.
func (tx *Tx) attemptError(err error) *Error {
	if errors.Is(err, errRegroup) {
		return &Error{Op: "Txn", kind: ErrTxnAborted, Msg: "a range split or merged under the transaction"}
	}
	var e *Error
	if asError(err, &e) {
		return e
	}
	return &Error{Op: "Txn", Msg: err.Error(), kind: ErrInternal, cause: err}
}

// recordOp sends one op to the transaction's record.
func (tx *Tx) recordOp(ctx context.Context, id [16]byte, rk []byte, req *kvpb.TxnRecordRequest) (*kvpb.TxnRecordResponse, error) {
	const op = "TxnRecord"
	c := tx.c
	req.Header, req.TxnId, req.RecordKey = c.header(true), id[:], rk
	var resp *kvpb.TxnRecordResponse
	err := c.routed(ctx, op, true, routeKey{key: rk}, func(ctx context.Context, e *endpoint, d *kvpb.RangeDescriptor) (err error) {
		routeHeader(req.Header, d)
		resp, err = e.txn.Record(ctx, req)
		return err
	})
	if err != nil {
		return nil, err
	}
	if _, err := c.sawHeader(op, resp.GetHeader()); err != nil {
		return nil, err
	}
	return resp, nil
}

// heartbeat refreshes the record every TxnHeartbeatInterval until ctx
// ends.
func (tx *Tx) heartbeat(ctx context.Context, id [16]byte, rk []byte) {
	t := time.NewTicker(TxnHeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_, _ = tx.recordOp(ctx, id, rk, &kvpb.TxnRecordRequest{Op: kvpb.TxnRecordOp_TXN_RECORD_HEARTBEAT,
				HeartbeatUnixNanos: time.Now().UnixNano()})
		}
	}
}

// finish resolves a decided transaction off the caller's path. A
// committed one: the record COMMITTED together with the resolution of
// the intents its own range holds (one command: the record is COMMITTED
// before any intent is resolved, since a STAGING record means none is),
// carried by a write to that range within commitCarryDelay or alone;
// the other ranges' intents are left for the client's next writes there
// to carry, and resolved on their own after foldDelay if none did
// (txn_resolve.go), except those of a range whose leader said someone
// waits for them (contended), resolved at once; an aborted one (its
// record already ABORTED): every range's intents dropped at once. The record is then deleted, in a
// batch with others (recordGC). What it leaves undone (the client
// closed, a node down) readers finish from the record.
func (tx *Tx) finish(id [16]byte, rk []byte, ct Timestamp, groups []*txnGroup, committed bool) {
	c := tx.c
	keysOf := func(g *txnGroup) [][]byte {
		ks := make([][]byte, len(g.muts))
		for i, m := range g.muts {
			ks[i] = kvpb.MutationKey(m)
		}
		return ks
	}
	recDescOf := func() *kvpb.RangeDescriptor {
		for _, g := range groups {
			if containsKey(g.desc, rk) {
				return g.desc
			}
		}
		return nil
	}
	if !committed {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), txnResolveTimeout)
			defer cancel()
			for _, r := range parallel(groups, func(g *txnGroup) txnWriteResult {
				return txnWriteResult{err: c.resolveKeys(ctx, id, false, Timestamp{}, keysOf(g))}
			}) {
				if r.err != nil {
					return // the record stays; readers resolve the rest
				}
			}
			c.recordGC.add(c, id, rk, recDescOf())
		}()
		return
	}
	// Tracked before the caller goes on: its next reads and writes of
	// these keys know the transaction committed.
	t := &doneTxn{id: id, rk: rk, ct: ct, recDesc: recDescOf(), committed: make(chan struct{}), carried: make(chan bool, 1),
		foldAnswered: make(chan struct{}, 1)}
	// The record's range is that of the first write: groups[0]
	// (groupByRange groups writes first, in order).
	var own *txnGroup
	rest := groups
	if len(groups) > 0 && containsKey(groups[0].desc, rk) {
		own, rest = groups[0], groups[1:]
		t.own = keysOf(own)
	}
	for _, old := range c.resolutions.track(t, groups) {
		c.recordGC.add(c, old.id, old.rk, old.recDesc)
	}
	if own != nil && !own.contended.Load() {
		// Queued before Txn returns: the client's next transaction on
		// these keys carries it, or sends it at once (clearFor). Not
		// when someone waits for the record range's intents: then it
		// goes at once.
		c.resolutions.queueCommit(t)
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), txnResolveTimeout)
		defer cancel()
		// The COMMITTED with its range's intents, carried by a write
		// (awaitCarried) or alone.
		if own == nil || own.contended.Load() || !c.awaitCarried(t) {
			req := &kvpb.TxnRecordRequest{Op: kvpb.TxnRecordOp_TXN_RECORD_COMMIT, Timestamp: toProto(ct)}
			if own != nil {
				req.Keys = t.own
			}
			rec, err := tx.recordOp(ctx, id, rk, req)
			if err != nil && own != nil {
				// The folded form refused (a split moved a key): commit
				// alone and resolve that range with the others.
				own, rest = nil, groups
				rec, err = tx.recordOp(ctx, id, rk, &kvpb.TxnRecordRequest{Op: kvpb.TxnRecordOp_TXN_RECORD_COMMIT, Timestamp: toProto(ct)})
			}
			if err != nil || rec.GetStatus() != kvpb.TxnStatus_TXN_STATUS_COMMITTED {
				var all [][]byte
				for _, g := range groups {
					all = append(all, keysOf(g)...)
				}
				close(t.committed)
				c.resolutions.resolved(t, all, false) // readers resolve from the record
				return
			}
		}
		t.explicit = true
		close(t.committed)
		if own != nil && c.resolutions.resolved(t, keysOf(own), true) {
			c.recordGC.add(c, id, rk, t.recDesc)
			return
		}
		// The rest rides on the next writes to their ranges, or goes on
		// its own after foldDelay (what a write took, once it answered
		// without resolving it); but a range where someone waits for
		// the intents (a queued write or locking read) is resolved at
		// once: the waiter would wait out foldDelay, holding up the
		// queue behind it.
		resolveRest := func(gs []*txnGroup) {
			parallel(gs, func(g *txnGroup) txnWriteResult {
				var ks [][]byte
				for _, f := range c.resolutions.holding(keysOf(g)) {
					if f.t == t {
						ks = f.ks
					}
				}
				if len(ks) > 0 {
					_ = c.resolveAlone(ctx, t, ks)
				}
				return txnWriteResult{}
			})
		}
		var now, later []*txnGroup
		for _, g := range rest {
			if g.contended.Load() {
				now = append(now, g)
			} else {
				later = append(later, g)
			}
		}
		for _, g := range later {
			c.resolutions.offer(t, g.desc, keysOf(g))
		}
		resolveRest(now)
		if len(later) == 0 {
			return
		}
		time.Sleep(foldDelay)
		descs := make([]*kvpb.RangeDescriptor, len(later))
		for i, g := range later {
			descs[i] = g.desc
		}
		c.resolutions.drop(t, descs)
		c.resolutions.awaitFolds(t)
		resolveRest(later)
	}()
}

// parallel runs f on every group at once and returns the results in
// order.
func parallel(groups []*txnGroup, f func(*txnGroup) txnWriteResult) []txnWriteResult {
	out := make([]txnWriteResult, len(groups))
	var wg sync.WaitGroup
	for i, g := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = f(g)
		}()
	}
	wg.Wait()
	return out
}

// Finished records are deleted in batches: the client's next write to
// the records' range carries the batch (TxnWriteRequest.delete_records),
// or one command of its own deletes it (the TxnDelete op's keys name the
// other records), so deleting costs a transaction a fraction of a
// proposal at most, and none while the client writes to the range. A
// batch that no write takes goes on its own after recordGCDelay, or at
// once when it reaches recordGCBatch. A record whose batch never goes
// (the client closed) is left, as the records recovery decides are
// (docs/transactions.md, "Not built"): finished, its intents resolved,
// it harms nothing.
const (
	recordGCDelay = 200 * time.Millisecond
	recordGCBatch = 128
)

// recordGC holds the finished records waiting to be deleted, by range.
type recordGC struct {
	mu      sync.Mutex
	pending map[uint64]*recordBatch
}

// recordBatch is the records of one range to delete in one command,
// routed by the record key of the first.
type recordBatch struct {
	rk  []byte
	ids [][16]byte
}

// add queues the finished record id (record key rk, in the range of desc
// as the transaction grouped it) for deletion.
func (g *recordGC) add(c *Client, id [16]byte, rk []byte, desc *kvpb.RangeDescriptor) {
	rid := desc.GetRangeId()
	g.mu.Lock()
	if g.pending == nil {
		g.pending = map[uint64]*recordBatch{}
	}
	b := g.pending[rid]
	if b == nil {
		b = &recordBatch{rk: rk}
		g.pending[rid] = b
		time.AfterFunc(recordGCDelay, func() { g.flush(c, rid, b) })
	}
	b.ids = append(b.ids, id)
	full := len(b.ids) >= recordGCBatch
	if full {
		delete(g.pending, rid)
	}
	g.mu.Unlock()
	if full {
		g.send(c, b)
	}
}

// take removes the batch of the range of desc, if any, for a write there
// to carry; the caller gives back what it could not deliver (add).
func (g *recordGC) take(desc *kvpb.RangeDescriptor) [][16]byte {
	rid := desc.GetRangeId()
	g.mu.Lock()
	defer g.mu.Unlock()
	b := g.pending[rid]
	if b == nil {
		return nil
	}
	delete(g.pending, rid)
	return b.ids
}

// flush sends b unless it went already.
func (g *recordGC) flush(c *Client, rid uint64, b *recordBatch) {
	g.mu.Lock()
	if g.pending[rid] != b {
		g.mu.Unlock()
		return
	}
	delete(g.pending, rid)
	g.mu.Unlock()
	g.send(c, b)
}

// send deletes b's records in one command. A failure leaves them.
func (g *recordGC) send(c *Client, b *recordBatch) {
	if c.closed.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), txnResolveTimeout)
	defer cancel()
	more := make([][]byte, len(b.ids)-1)
	for i := range more {
		more[i] = b.ids[i+1][:]
	}
	tx := &Tx{c: c}
	_, _ = tx.recordOp(ctx, b.ids[0], b.rk, &kvpb.TxnRecordRequest{Op: kvpb.TxnRecordOp_TXN_RECORD_DELETE, Keys: more})
}
