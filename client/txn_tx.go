package client

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/shaledb/shale/api/kvpb"
)

// Tx is one run of a transaction's function (Client.Txn): reads at the
// transaction's read timestamp, writes buffered until commit. A read of a
// key the transaction wrote is answered from its own writes. A Tx is for
// the goroutine running the function and only until it returns; every
// method fails with ErrTxnMisuse otherwise.
type Tx struct {
	c       *Client
	rts     Timestamp
	started time.Time
	// rtsAt is when the read timestamp was asked for (commitAcross
	// may commit from it: txn_refresh.go, candidate).
	rtsAt time.Time

	// busy is held by the goroutine inside a method; a second one that
	// finds it held is misusing the Tx. done is set when fn returned.
	busy atomic.Bool
	done atomic.Bool
	// misuse, once set, keeps the transaction from committing.
	misuse atomic.Pointer[Error]

	// The fields below are touched only by the goroutine holding busy
	// (and by Txn once fn returned).

	// tooLarge is set once a write was refused for the limits.
	tooLarge *Error
	// muts are the writes in order; points and dels index them for
	// reads: the last point write of each key, and every range deletion,
	// each with its position (seq) in muts.
	muts   []*kvpb.Mutation
	points map[string]bufWrite
	// indexed is how many of muts points indexes: it is built at the
	// first read of the transaction's own writes, so a transaction that
	// only writes never builds it.
	indexed    int
	dels       []bufDelete
	writeBytes int
	// reads are the keys and spans read from the cluster, for the commit
	// to validate; pointReads avoids listing a key twice, and keeps the
	// version each read found (zero: none), for a locking read's
	// refresh (txn_lock.go).
	reads      []*kvpb.TxnRead
	pointReads map[string]Timestamp

	// Locking reads (txn_lock.go): the attempt's ID once it took a lock
	// (its commit across ranges uses it too), its home key, its age, the
	// keys it locked, and the conflict that makes the attempt run again
	// whatever fn returns (a deadlock it gave up).
	lockID  [16]byte
	home    []byte
	prio    Timestamp
	locked  [][]byte
	restart *Error
}

type bufWrite struct {
	seq     int
	value   []byte
	deleted bool
}

type bufDelete struct {
	start, end []byte // end empty: unbounded
	seq        int
}

func newTx(c *Client) *Tx {
	// The maps are made at first use: a transaction that only writes
	// (the blind write, as cheap as a Batch) needs no pointReads.
	return &Tx{c: c, started: time.Now()}
}

// ReadTimestamp returns the transaction's read timestamp: every read of
// this run of the function sees the versions at or below it. It is taken
// at the first read (the zero Timestamp until then): a timestamp from
// the oracle issued after that read began, so the snapshot holds every
// write acknowledged before the transaction's first read.
func (tx *Tx) ReadTimestamp() Timestamp { return tx.rts }

// snapshot returns the read timestamp, taking it at the first read.
// REQUIRES: the caller holds busy.
func (tx *Tx) snapshot(ctx context.Context) (Timestamp, error) {
	if tx.rts.IsZero() {
		tx.rtsAt = time.Now()
		rts, err := tx.c.sharedBegin(ctx)
		if err != nil {
			return Timestamp{}, err
		}
		tx.rts = rts
	}
	return tx.rts, nil
}

// enter claims the Tx for a method call; the caller must call leave when
// it returns nil.
func (tx *Tx) enter(op string) *Error {
	if tx.done.Load() {
		return tx.misused(op, "the transaction was used after its function returned")
	}
	if !tx.busy.CompareAndSwap(false, true) {
		return tx.misused(op, "the transaction was used from two goroutines at once")
	}
	return nil
}

func (tx *Tx) leave() { tx.busy.Store(false) }

// misused records the misuse (the transaction will not commit) and
// returns the error for the call.
func (tx *Tx) misused(op, msg string) *Error {
	e := &Error{Op: op, Msg: msg + "; it is not committed (a Tx is for its function's goroutine, until the function returns)", kind: ErrTxnMisuse}
	tx.misuse.CompareAndSwap(nil, e)
	return e
}

// end marks the function returned. A call still inside a method now is a
// goroutine the function left running with the Tx.
func (tx *Tx) end() {
	tx.done.Store(true)
	if tx.busy.Load() {
		tx.misused("Txn", "a goroutine was still using the transaction when its function returned")
	}
}

// buffered answers a read of key from the transaction's own writes: ok
// says whether they decide it, and then deleted or value.
func (tx *Tx) buffered(key []byte) (value []byte, deleted, ok bool) {
	tx.index()
	p, hasP := tx.points[string(key)]
	for i := len(tx.dels) - 1; i >= 0; i-- {
		d := tx.dels[i]
		if hasP && d.seq < p.seq {
			break
		}
		if inSpan(key, d.start, d.end) {
			return nil, true, true
		}
	}
	if hasP {
		return p.value, p.deleted, true
	}
	return nil, false, false
}

func inSpan(key, start, end []byte) bool {
	return bytes.Compare(key, start) >= 0 && (len(end) == 0 || bytes.Compare(key, end) < 0)
}

// readPoint notes a read of key from the cluster, which found version
// (zero: nothing).
func (tx *Tx) readPoint(key []byte, version Timestamp) {
	if _, ok := tx.pointReads[string(key)]; ok {
		return
	}
	if tx.pointReads == nil {
		tx.pointReads = map[string]Timestamp{}
	}
	tx.pointReads[string(key)] = version
	tx.reads = append(tx.reads, &kvpb.TxnRead{Key: key})
}

// Get reads key at the transaction's snapshot, or from its own writes.
// A missing key is not an error: found is false.
func (tx *Tx) Get(ctx context.Context, key []byte) (value []byte, found bool, err error) {
	const op = "Tx.Get"
	if e := tx.enter(op); e != nil {
		return nil, false, e
	}
	defer tx.leave()
	if e := tx.c.checkKey(op, "key", key); e != nil {
		return nil, false, e
	}
	if v, deleted, ok := tx.buffered(key); ok {
		return v, !deleted, nil
	}
	rts, err := tx.snapshot(ctx)
	if err != nil {
		return nil, false, err
	}
	r, err := tx.c.getVersioned(ctx, op, key, tx.readOptions(rts, [][]byte{key}))
	if err != nil {
		return nil, false, err
	}
	tx.readPoint(append([]byte{}, key...), foundVersion(r.Found, r.Version))
	return r.Value, r.Found, nil
}

// BatchGet reads keys at the transaction's snapshot (those it wrote from
// its own writes); results[i] answers keys[i]. Versions are set for keys
// read from the cluster only.
func (tx *Tx) BatchGet(ctx context.Context, keys [][]byte) ([]GetResult, error) {
	const op = "Tx.BatchGet"
	if e := tx.enter(op); e != nil {
		return nil, e
	}
	defer tx.leave()
	return tx.batchGet(ctx, op, keys, false)
}

// batchGet is BatchGet, after taking the keys' locks when forUpdate.
// REQUIRES: the caller holds busy.
func (tx *Tx) batchGet(ctx context.Context, op string, keys [][]byte, forUpdate bool) ([]GetResult, error) {
	out := make([]GetResult, len(keys))
	var remote [][]byte
	var at []int
	for i, k := range keys {
		if e := tx.c.checkKey(op, fmt.Sprintf("keys[%d]", i), k); e != nil {
			return nil, e
		}
		if v, deleted, ok := tx.buffered(k); ok {
			if !deleted {
				out[i] = GetResult{Value: v, Found: true}
			}
			continue
		}
		remote = append(remote, k)
		at = append(at, i)
	}
	if len(remote) > 0 {
		if forUpdate {
			taken, err := tx.lock(ctx, op, remote)
			if err != nil {
				return nil, err
			}
			if taken && !tx.rts.IsZero() {
				if err := tx.refresh(ctx); err != nil {
					return nil, err
				}
			}
		}
		rts, err := tx.snapshot(ctx)
		if err != nil {
			return nil, err
		}
		rs, err := tx.c.batchGet(ctx, remote, tx.readOptions(rts, remote))
		if err != nil {
			return nil, err
		}
		for j, r := range rs {
			out[at[j]] = r
		}
		for j, k := range remote {
			tx.readPoint(append([]byte{}, k...), foundVersion(rs[j].Found, rs[j].Version))
		}
	}
	return out, nil
}

// readOptions are the options of a read of ks at rts: the client's
// committed transactions whose intents on ks may be unresolved are named
// (txn_resolve.go), so that the read takes them as committed rather than
// waiting for their resolution.
func (tx *Tx) readOptions(rts Timestamp, ks [][]byte) []ReadOption {
	opts := []ReadOption{AtTimestamp(rts)}
	if cs := tx.c.resolutions.committedFor(ks); len(cs) > 0 {
		opts = append(opts, withCommitted(cs))
	}
	return opts
}

// Scan returns the live keys in [start, end) at the transaction's
// snapshot, merged with its own writes, in key order, at most limit of
// them (0: no limit). An empty start or end is unbounded. The whole span
// read (up to the last key returned, when the limit cut it short) counts
// as read: a key written into it after the snapshot fails the commit.
// Versions are set for entries read from the cluster only.
func (tx *Tx) Scan(ctx context.Context, start, end []byte, limit int) ([]KeyValue, error) {
	const op = "Tx.Scan"
	if e := tx.enter(op); e != nil {
		return nil, e
	}
	defer tx.leave()
	if limit < 0 {
		return nil, &Error{Op: op, Msg: fmt.Sprintf("negative limit %d", limit), kind: ErrInvalidArgument}
	}
	if len(end) > 0 && bytes.Compare(start, end) > 0 {
		return nil, &Error{Op: op, Msg: fmt.Sprintf("start %s is after end %s", quote(start), quote(end)), kind: ErrInvalidArgument}
	}
	// The transaction's own live writes in the span, in key order.
	var own []KeyValue
	tx.index()
	for k := range tx.points {
		kb := []byte(k)
		if !inSpan(kb, start, end) {
			continue
		}
		if v, deleted, _ := tx.buffered(kb); !deleted {
			own = append(own, KeyValue{Key: kb, Value: v})
		}
	}
	slices.SortFunc(own, func(a, b KeyValue) int { return bytes.Compare(a.Key, b.Key) })
	rts, err := tx.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	var out []KeyValue
	full := func() bool { return limit > 0 && len(out) >= limit }
	oi := 0
	for kv, e := range tx.c.Scan(ctx, start, end, nil, AtTimestamp(rts)) {
		if e != nil {
			err = e
			break
		}
		for oi < len(own) && bytes.Compare(own[oi].Key, kv.Key) < 0 && !full() {
			out = append(out, own[oi])
			oi++
		}
		if full() {
			break
		}
		if _, _, mine := tx.buffered(kv.Key); mine {
			// The transaction's own write decides this key (emitted
			// from own above or below, or deleted).
			continue
		}
		out = append(out, kv)
		if full() {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	for oi < len(own) && !full() {
		out = append(out, own[oi])
		oi++
	}
	// What was read: the span, up to just after the last key returned
	// when the limit cut it short.
	readEnd := end
	if full() {
		readEnd = append(append([]byte{}, out[len(out)-1].Key...), 0)
	}
	tx.reads = append(tx.reads, &kvpb.TxnRead{Key: append([]byte{}, start...), Span: true, EndKey: append([]byte{}, readEnd...)})
	return out, nil
}

// Put sets key to value when the transaction commits.
func (tx *Tx) Put(key, value []byte) error {
	const op = "Tx.Put"
	if e := tx.enter(op); e != nil {
		return e
	}
	defer tx.leave()
	if e := tx.c.checkKey(op, "key", key); e != nil {
		return e
	}
	if e := tx.c.checkValue(op, "value", value); e != nil {
		return e
	}
	if len(key) == 0 {
		return &Error{Op: op, Msg: "key is empty", kind: ErrInvalidArgument}
	}
	// One copy holds both: the caller may reuse its slices.
	kv := make([]byte, len(key)+len(value))
	copy(kv, key)
	copy(kv[len(key):], value)
	k, v := kv[:len(key):len(key)], kv[len(key):]
	return tx.buffer(op, PutOp(k, v).m, len(k)+len(v), nil)
}

// Delete removes key when the transaction commits.
func (tx *Tx) Delete(key []byte) error {
	const op = "Tx.Delete"
	if e := tx.enter(op); e != nil {
		return e
	}
	defer tx.leave()
	if e := tx.c.checkKey(op, "key", key); e != nil {
		return e
	}
	if len(key) == 0 {
		return &Error{Op: op, Msg: "key is empty", kind: ErrInvalidArgument}
	}
	k := append([]byte{}, key...)
	return tx.buffer(op, DeleteOp(k).m, len(k), nil)
}

// DeleteRange removes every key in [start, end) when the transaction
// commits (an empty end: to the end of the key space; start and end may
// not both be empty).
func (tx *Tx) DeleteRange(start, end []byte) error {
	const op = "Tx.DeleteRange"
	if e := tx.enter(op); e != nil {
		return e
	}
	defer tx.leave()
	if len(start) == 0 && len(end) == 0 {
		return &Error{Op: op, Msg: "start and end are both empty; refusing to delete the whole key space (use start \"\\x00\" to mean it)", kind: ErrInvalidArgument}
	}
	if len(end) > 0 && bytes.Compare(start, end) > 0 {
		return &Error{Op: op, Msg: fmt.Sprintf("start %s is after end %s", quote(start), quote(end)), kind: ErrInvalidArgument}
	}
	if e := tx.c.checkKey(op, "start", start); e != nil {
		return e
	}
	if e := tx.c.checkKey(op, "end", end); e != nil {
		return e
	}
	s, e := append([]byte{}, start...), append([]byte{}, end...)
	return tx.buffer(op, DeleteRangeOp(s, e).m, len(s)+len(e), func(seq int) { tx.dels = append(tx.dels, bufDelete{start: s, end: e, seq: seq}) })
}

// buffer adds one write, within the limits, and indexes it.
// index brings points up to date with muts (puts and deletes of a key;
// dels index the deletes of spans as they are buffered).
func (tx *Tx) index() {
	for ; tx.indexed < len(tx.muts); tx.indexed++ {
		var w bufWrite
		switch op := tx.muts[tx.indexed].GetOp().(type) {
		case *kvpb.Mutation_Put:
			w = bufWrite{seq: tx.indexed, value: op.Put.GetValue()}
		case *kvpb.Mutation_Delete:
			w = bufWrite{seq: tx.indexed, deleted: true}
		default:
			continue
		}
		if tx.points == nil {
			tx.points = map[string]bufWrite{}
		}
		tx.points[string(kvpb.MutationKey(tx.muts[tx.indexed]))] = w
	}
}

func (tx *Tx) buffer(op string, m *kvpb.Mutation, size int, index func(seq int)) error {
	if tx.tooLarge != nil {
		return tx.tooLarge
	}
	switch {
	case len(tx.muts) >= MaxTxnWrites:
		tx.tooLarge = &Error{Op: op, kind: ErrTxnTooLarge,
			Msg:   fmt.Sprintf("the transaction already holds %d writes, the limit (MaxTxnWrites); it will not commit", MaxTxnWrites),
			Limit: &kvpb.LimitExceeded{Limit: "max_txn_writes", Max: MaxTxnWrites, Actual: uint64(len(tx.muts) + 1)}}
	case tx.writeBytes+size > MaxTxnWriteBytes:
		tx.tooLarge = &Error{Op: op, kind: ErrTxnTooLarge,
			Msg:   fmt.Sprintf("the transaction's writes would hold %d bytes of keys and values, over the limit of %d (MaxTxnWriteBytes); it will not commit", tx.writeBytes+size, MaxTxnWriteBytes),
			Limit: &kvpb.LimitExceeded{Limit: "max_txn_write_bytes", Max: MaxTxnWriteBytes, Actual: uint64(tx.writeBytes + size)}}
	}
	if tx.tooLarge != nil {
		return tx.tooLarge
	}
	tx.muts = append(tx.muts, m)
	tx.writeBytes += size
	if index != nil {
		index(len(tx.muts) - 1)
	}
	return nil
}
