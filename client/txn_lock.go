package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"slices"
	"time"

	"github.com/shaledb/shale/api/kvpb"
)

// Locking reads (docs/transactions.md, "Locking reads").
//
// A read-modify-write transaction under contention (a transfer between
// hot accounts) reads optimistically: when another transaction commits a
// key it read first, its commit fails validation and the function runs
// again. GetForUpdate and BatchGetForUpdate read the keys after taking
// their locks on the ranges' leaders (Txn.Lock), where a locked key is
// waited for in its queue; and a transaction that takes its locks before
// its first read takes its read timestamp after them, so it reads what
// the previous holder committed and holds the keys until its own commit
// writes them. Contending transfers then go one after the other instead
// of running again.
//
// Locks are advisory: the commit validates every read as always, so a
// lock lost (a leadership change, its hold of a few seconds lapsed) or
// passed by a plain write costs at most the run again it would have
// cost without locking. Two transactions that lock the same keys in
// different orders may deadlock: the younger gives up (Txn runs it
// again), the older goes on.

// GetForUpdate reads key as Get does, after taking its lock: the read of
// a key the transaction means to write. Best taken before any other read
// of the transaction, and at once for several keys (BatchGetForUpdate,
// which takes them in key order and cannot deadlock with another that
// does the same): the read timestamp is taken at the first read, after
// the locks. A lock taken after the first read moves the read timestamp
// forward (refresh) when what was read is unchanged at a fresh one (one
// more timestamp and a read of those keys again); after a scan, or when
// a key read changed, it stays, and the commit fails as it would have
// without the lock.
func (tx *Tx) GetForUpdate(ctx context.Context, key []byte) (value []byte, found bool, err error) {
	const op = "Tx.GetForUpdate"
	if e := tx.enter(op); e != nil {
		return nil, false, e
	}
	defer tx.leave()
	if e := tx.c.checkKey(op, "key", key); e != nil {
		return nil, false, e
	}
	rs, err := tx.batchGet(ctx, op, [][]byte{key}, true)
	if err != nil {
		return nil, false, err
	}
	return rs[0].Value, rs[0].Found, nil
}

// BatchGetForUpdate is BatchGet after taking the keys' locks, in key
// order (see GetForUpdate).
func (tx *Tx) BatchGetForUpdate(ctx context.Context, keys [][]byte) ([]GetResult, error) {
	const op = "Tx.BatchGetForUpdate"
	if e := tx.enter(op); e != nil {
		return nil, e
	}
	defer tx.leave()
	return tx.batchGet(ctx, op, keys, true)
}

// lockRounds bounds the Lock calls for one range's keys: a wait that
// ended by its bound (three quarters of the call's attempt timeout) is
// asked again, in its place in the queue (by the transaction's age), up
// to this many times; then the read goes on without the lock (it is
// advisory).
const lockRounds = 3

// lockAttempt is the attempt timeout of a Lock call (at least; the
// client's AttemptTimeout if longer), so that it waits up to 2.25 s in a
// queue before its wait ends by its bound: 64 transfers queued on 10 hot
// accounts wait more than the 750 ms a 1 s attempt allows. The
// leader's lockHold (4 s) is longer, so a transaction's first lock does
// not lapse while it waits for its second. The cost: a Lock sent to a
// node that stopped answering is noticed after lockAttempt, not after
// AttemptTimeout.
const lockAttempt = 3 * time.Second

// lock takes the locks of keys not yet held, range by range in key
// order; taken says whether it took any. A deadlock given up is
// returned (and set as tx.restart, so the attempt runs again whatever fn
// does with it).
// REQUIRES: the caller holds busy.
func (tx *Tx) lock(ctx context.Context, op string, keys [][]byte) (taken bool, err error) {
	c := tx.c
	var want [][]byte
	for _, k := range keys {
		if !slices.ContainsFunc(tx.locked, func(h []byte) bool { return bytes.Equal(h, k) }) {
			want = append(want, k)
		}
	}
	slices.SortFunc(want, bytes.Compare)
	want = slices.CompactFunc(want, bytes.Equal)
	if len(want) == 0 {
		return false, nil
	}
	// The lock waits for the intents of the client's own committed
	// transactions on these keys: their COMMITTED goes at once rather
	// than waiting for a write to carry it (txn_resolve.go).
	c.kickCommits(want)
	if tx.lockID == ([16]byte{}) {
		if _, err := rand.Read(tx.lockID[:]); err != nil {
			return false, &Error{Op: op, Msg: "no random transaction ID: " + err.Error(), kind: ErrInternal, cause: err}
		}
		tx.home = append([]byte{}, want[0]...)
	}
	prio := tx.prio
	if prio.IsZero() {
		prio = Timestamp{WallTime: tx.started.UnixNano()}
	}
	for round := 0; len(want) > 0; {
		var resp *kvpb.TxnLockResponse
		var n int
		err := c.routed(withWaitingAttempt(ctx, lockAttempt), op, true, routeKey{key: want[0]}, func(ctx context.Context, e *endpoint, d *kvpb.RangeDescriptor) (err error) {
			for n = 0; n < len(want) && containsKey(d, want[n]); n++ {
			}
			if n == 0 {
				return errRegroup
			}
			resp, err = e.txn.Lock(ctx, &kvpb.TxnLockRequest{Header: routeHeader(c.header(false), d),
				TxnId: tx.lockID[:], HomeKey: tx.home, Priority: toProto(prio), Keys: want[:n]})
			return err
		})
		if err != nil {
			return taken, err
		}
		got := min(int(resp.GetLocked()), n)
		tx.locked = append(tx.locked, want[:got]...)
		taken = taken || got > 0
		if resp.GetDeadlock() {
			tx.restart = &Error{Op: op, kind: ErrTxnAborted, Msg: "deadlock: " + resp.GetReason()}
			return taken, tx.restart
		}
		want = want[got:]
		if got < n {
			if round++; round < lockRounds {
				continue // the wait ended by its bound: queue again
			}
			want = want[n-got:] // read on without those locks
		}
		round = 0
	}
	return taken, nil
}

// foundVersion is what a point read found, for refresh to compare: the
// version, zero when nothing.
func foundVersion(found bool, version Timestamp) Timestamp {
	if !found {
		return Timestamp{}
	}
	return version
}

// refresh moves forward the read timestamp of a transaction that took a
// lock after its first read: the lock may have been waited for while
// its previous holder committed, after the read timestamp, so a read at
// it would see the key as it was and the commit would fail. The
// transaction takes a fresh timestamp R' and reads again every key it
// read: each found as it was at R (the same version, or none both
// times), its reads all hold at R' and R' becomes its read timestamp.
// Otherwise (a key changed, or the transaction scanned a span, which
// cannot be checked this way) R stays, and the commit fails or not as
// it would have. Only point reads of the cluster are checked; the
// transaction's own writes are not reads.
// REQUIRES: the caller holds busy.
func (tx *Tx) refresh(ctx context.Context) error {
	keys := make([][]byte, 0, len(tx.reads))
	for _, r := range tx.reads {
		if r.GetSpan() {
			return nil
		}
		keys = append(keys, r.GetKey())
	}
	rts, err := tx.c.txnBegin(ctx)
	if err != nil {
		return err
	}
	if len(keys) > 0 {
		rs, err := tx.c.batchGet(ctx, keys, []ReadOption{AtTimestamp(rts)})
		if err != nil {
			return err
		}
		for i, r := range rs {
			if foundVersion(r.Found, r.Version) != tx.pointReads[string(keys[i])] {
				return nil
			}
		}
	}
	tx.rts = rts
	return nil
}

// unlock releases, once the attempt ended, the locks its commit did not
// end by writing their keys (all of them when it did not commit), so
// the next waiter need not wait out their hold.
func (tx *Tx) unlock(ctx context.Context, committed bool) {
	if len(tx.locked) == 0 {
		return
	}
	var left [][]byte
	for _, k := range tx.locked {
		if committed {
			if _, _, mine := tx.buffered(k); mine {
				continue // written: the write ended the lock
			}
		}
		left = append(left, k)
	}
	if len(left) == 0 {
		return
	}
	slices.SortFunc(left, bytes.Compare)
	// Best effort, bounded: a lock not released lapses by its hold.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	c := tx.c
	for len(left) > 0 {
		n := 1
		_ = c.routed(rctx, "Tx.unlock", true, routeKey{key: left[0]}, func(ctx context.Context, e *endpoint, d *kvpb.RangeDescriptor) error {
			for n = 0; n < len(left) && containsKey(d, left[n]); n++ {
			}
			if n == 0 {
				n = 1
				return nil
			}
			_, err := e.txn.Lock(ctx, &kvpb.TxnLockRequest{Header: routeHeader(c.header(false), d),
				TxnId: tx.lockID[:], Keys: left[:n], Release: true})
			return err
		})
		left = left[n:]
	}
}
