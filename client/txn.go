package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shaledb/shale/api/kvpb"
)

// Transactions (docs/transactions.md).
//
// Txn runs a function against a Tx: reads at one snapshot, the read
// timestamp R (a fresh timestamp from the cluster's oracle), and writes
// buffered in the client. When the function returns nil the transaction
// commits: its reads and writes are sent to their range as one command,
// which applies the writes only if nothing the transaction read has a
// version above R (one Raft proposal, no transaction record). If a read
// changed, nothing is written and Txn runs the function again at a new
// R, after a backoff. A committed transaction takes effect at one instant
// between its start and its acknowledgement (strict serializability).
//
// A transaction whose reads and writes lie in one range commits in one
// proposal; one that touches several ranges commits with parallel
// commits (txn_across.go), in one round of consensus as well. A
// transaction across ranges cannot DeleteRange yet (ErrTxnSpansRanges).
// A read-only transaction commits nothing.

// Transaction limits (docs/transactions.md, "Limits and errors").
const (
	// MaxTxnWrites is the most writes (Put, Delete, DeleteRange) one
	// transaction may buffer.
	MaxTxnWrites = 10_000
	// MaxTxnReads is the most keys and spans a transaction that writes
	// may have read (each Get's key, each Scan's span): its commit carries
	// them to be validated, within the nodes' default max_batch_ops. A
	// transaction that only reads has no such limit.
	MaxTxnReads = 10_000
	// MaxTxnWriteBytes bounds the keys and values of one transaction's
	// writes: the nodes' default max_write_bytes, since a one-range
	// transaction commits as one write.
	MaxTxnWriteBytes = 8 << 20
	// MaxTxnDuration bounds one attempt of a transaction, from its read
	// timestamp to its commit: half the default history retention window
	// (10 minutes), so that the versions its reads need are still there.
	MaxTxnDuration = 5 * time.Minute
	// MaxTxnAttempts is how many times Txn runs the function before it
	// gives up on a transaction whose reads keep changing.
	MaxTxnAttempts = 100
)

// Txn runs fn in a transaction and commits it when fn returns nil. An
// error from fn aborts the transaction: nothing is applied, and Txn
// returns that error as it is.
//
// Txn may run fn more than once: when what it read changed before it
// could commit, it runs fn again (at a new snapshot, after a backoff), up
// to MaxTxnAttempts times, then fails with ErrTxnAborted. fn must
// therefore be safe to run again: do nothing outside the Tx that a
// second run would repeat wrongly, and reset what it records at each run.
//
// The Tx is for fn's goroutine and for the duration of fn: using it after
// fn returned, or from two goroutines at once, fails with ErrTxnMisuse and
// the transaction is not committed. A transaction that neither read nor
// wrote is refused (ErrInvalidArgument); one that only read commits
// nothing and returns nil. ctx bounds every request of every attempt
// (each gets Options.RequestTimeout when ctx has no deadline).
//
// Errors: those of fn; ErrTxnTooLarge, ErrTxnAborted, ErrTxnSpansRanges,
// ErrTxnMisuse (nothing applied); and the request errors of the commit
// (ErrAmbiguous when the commit's outcome is unknown, as for a Batch).
func (c *Client) Txn(ctx context.Context, fn func(tx *Tx) error) error {
	if fn == nil {
		return &Error{Op: "Txn", Msg: "no function to run", kind: ErrInvalidArgument}
	}
	var last *Error
	// The transaction's age, kept over its attempts: the older wins a
	// deadlock of locking reads (txn_lock.go), so a transaction that
	// keeps losing one grows old enough to win.
	prio := Timestamp{WallTime: time.Now().UnixNano()}
	for attempt := 0; attempt < MaxTxnAttempts; attempt++ {
		if attempt > 0 && !sleep(ctx, c.backoff(attempt-1)) {
			return &Error{Op: "Txn", kind: ErrTxnAborted, cause: ctx.Err(),
				Msg: fmt.Sprintf("the context ended while waiting to retry (attempt %d): %s", attempt+1, last.Msg)}
		}
		committed, changed, err := c.txnAttempt(ctx, fn, prio)
		if err != nil || committed {
			return err
		}
		last = changed
	}
	return &Error{Op: "Txn", kind: ErrTxnAborted,
		Msg: fmt.Sprintf("what the transaction read changed before it could commit on each of %d attempts; last: %s", MaxTxnAttempts, last.Msg)}
}

// txnAttempt runs fn once and commits. It returns committed true, or a
// retriable conflict in changed, or an error that ends the transaction.
func (c *Client) txnAttempt(ctx context.Context, fn func(tx *Tx) error, prio Timestamp) (committed bool, changed *Error, err error) {
	// The read timestamp is taken at the first read (Tx.snapshot): a
	// transaction that only writes needs none, and commits in one call.
	tx := newTx(c)
	tx.prio = prio
	defer func() { tx.unlock(ctx, committed) }()
	ferr := fn(tx)
	tx.end()
	if e := tx.misuse.Load(); e != nil {
		return false, nil, e
	}
	if tx.restart != nil {
		// A locking read gave up a deadlock: whatever fn made of its
		// error, the attempt runs again.
		return false, tx.restart, nil
	}
	if ferr != nil {
		return false, nil, ferr
	}
	if tx.tooLarge != nil {
		// fn went on after a write was refused: the transaction is
		// missing that write, so it must not commit.
		return false, nil, tx.tooLarge
	}
	if d := time.Since(tx.started); d > MaxTxnDuration {
		return false, nil, &Error{Op: "Txn", kind: ErrTxnAborted,
			Msg: fmt.Sprintf("too old: the transaction ran %v, over the limit of %v (MaxTxnDuration)", d.Round(time.Millisecond), MaxTxnDuration)}
	}
	return tx.commit(ctx)
}

// txnBegin returns a fresh read timestamp from the oracle: every write
// acknowledged before the call has a lower version.
func (c *Client) txnBegin(ctx context.Context) (Timestamp, error) {
	const op = "TxnBegin"
	var resp *kvpb.TxnBeginResponse
	err := c.do(ctx, op, false, func(ctx context.Context, e *endpoint) (err error) {
		resp, err = e.txn.Begin(ctx, &kvpb.TxnBeginRequest{Header: c.header(false)})
		return err
	})
	if err != nil {
		return Timestamp{}, err
	}
	if _, err := c.sawHeader(op, resp.GetHeader()); err != nil {
		return Timestamp{}, err
	}
	rts, err := c.sawVersion(op, "read_timestamp", resp.GetReadTimestamp())
	if err != nil {
		return Timestamp{}, err
	}
	if rts.IsZero() {
		return Timestamp{}, &Error{Op: op, Msg: "the node answered no read timestamp", kind: ErrInternal}
	}
	return rts, nil
}

// commit sends the transaction's writes, with its reads to validate, to
// the one range that holds them all.
func (tx *Tx) commit(ctx context.Context) (committed bool, changed *Error, err error) {
	const op = "Txn"
	c := tx.c
	if len(tx.muts) == 0 {
		if len(tx.reads) == 0 {
			return false, nil, &Error{Op: op, Msg: "the transaction neither read nor wrote anything", kind: ErrInvalidArgument}
		}
		// Read-only: its reads at R are all it did; nothing to commit.
		return true, nil, nil
	}
	if len(tx.reads) > MaxTxnReads {
		return false, nil, &Error{Op: op, kind: ErrTxnTooLarge,
			Msg:   fmt.Sprintf("the transaction read %d keys and spans, over the %d a commit can validate (MaxTxnReads); it did not commit", len(tx.reads), MaxTxnReads),
			Limit: &kvpb.LimitExceeded{Limit: "max_txn_reads", Max: MaxTxnReads, Actual: uint64(len(tx.reads))}}
	}
	groups, err := tx.groupByRange(ctx, op)
	if err != nil {
		return false, nil, err
	}
	if len(groups) > 1 {
		return tx.commitAcross(ctx, groups)
	}
	// A one-range commit carries no resolution: the intents of the
	// client's committed transactions in its way are resolved first.
	if _, _, err := tx.clearFor(ctx, groups, false); err != nil {
		return false, nil, tx.attemptError(err)
	}
	req := &kvpb.TxnCommitRequest{Header: c.header(true), Reads: tx.reads, Mutations: tx.muts}
	if len(tx.reads) > 0 {
		req.ReadTimestamp = toProto(tx.rts)
	}
	var resp *kvpb.TxnCommitResponse
	err = c.routed(ctx, op, true, routeKey{key: kvpb.MutationKey(tx.muts[0])}, func(ctx context.Context, e *endpoint, d *kvpb.RangeDescriptor) (err error) {
		if !groups[0].holds(d) {
			// The range split since the keys were grouped: commit
			// across ranges.
			return errRegroup
		}
		routeHeader(req.Header, d)
		resp, err = e.txn.Commit(ctx, req)
		return err
	})
	if errors.Is(err, errRegroup) {
		return false, &Error{Op: op, kind: ErrTxnAborted, Msg: "a range split or merged under the transaction"}, nil
	}
	if err != nil {
		return false, nil, err
	}
	if !resp.GetCommitted() {
		if _, err := c.sawHeader(op, resp.GetHeader()); err != nil {
			return false, nil, err
		}
		rc := resp.GetReadChanged()
		return false, &Error{Op: op, kind: ErrTxnAborted, Msg: "read changed: " + rc.GetReason()}, nil
	}
	if _, err := c.written(op, resp.GetHeader(), resp.GetVersion()); err != nil {
		return false, nil, err
	}
	return true, nil, nil
}
