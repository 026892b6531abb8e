package client

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/shaledb/shale/api/kvpb"
)

// Resolution folded into writes (docs/transactions.md, "Resolution
// folded into writes").
//
// Once a transaction across ranges is committed, its coordinator marks
// its record COMMITTED together with the resolution of the record
// range's intents (one command), and the other ranges' intents are left
// to be resolved. Two things keep that resolution off the way of the
// client's next transactions, which under load are often on the same
// keys (a client moving money between its own accounts again):
//
//   - the client's reads name its committed, unresolved transactions
//     (withCommitted): the node reads their intents as versions at their
//     commit timestamps instead of waiting for them;
//   - the client's next Write to a range carries the resolution of the
//     intents it meets there (kvpb.TxnWriteRequest.resolve: applied first
//     in the same command), so it does not wait for them either, and the
//     resolution costs no command of its own. What no write carries
//     within foldDelay of the COMMITTED is resolved on its own, as before;
//     what someone waits for on its range's leader (the Write was
//     answered contended) is resolved at once, not left to wait
//     foldDelay.
//
// The record is deleted (recordGC) once every intent is known resolved.

// foldDelay is how long a committed transaction's intents away from its
// record's range wait for a write to carry their resolution before they
// are resolved on their own.
const foldDelay = 20 * time.Millisecond

// txnResolutions are the client's committed transactions whose intents
// may not be resolved yet, by intent key.
type txnResolutions struct {
	mu   sync.Mutex
	keys map[string]*doneTxn
	// pending are the resolutions waiting for a write to carry them, by
	// range ID (as the transaction grouped its keys).
	pending map[uint64][]fold
}

// maxFoldsPerWrite bounds the pending resolutions one write carries.
const maxFoldsPerWrite = 32

// offer queues t's resolution of ks, in the range of desc, for the next
// write to that range (take).
func (r *txnResolutions) offer(t *doneTxn, desc *kvpb.RangeDescriptor, ks [][]byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending == nil {
		r.pending = map[uint64][]fold{}
	}
	id := desc.GetRangeId()
	r.pending[id] = append(r.pending[id], fold{t: t, ks: ks})
}

// drop removes t's queued resolutions from the ranges of descs.
func (r *txnResolutions) drop(t *doneTxn, descs []*kvpb.RangeDescriptor) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range descs {
		id := d.GetRangeId()
		q := r.pending[id][:0]
		for _, f := range r.pending[id] {
			if f.t != t {
				q = append(q, f)
			}
		}
		if len(q) == 0 {
			delete(r.pending, id)
		} else {
			r.pending[id] = q
		}
	}
}

// take returns up to max queued resolutions of the range of desc whose
// keys still hold their transaction's intents and all lie in desc,
// leaving the others; except those of transactions in skip (the write
// carries them already).
func (r *txnResolutions) take(desc *kvpb.RangeDescriptor, max int, skip []fold) []fold {
	r.mu.Lock()
	defer r.mu.Unlock()
	id := desc.GetRangeId()
	q := r.pending[id]
	if len(q) == 0 {
		return nil
	}
	var out, left []fold
	for _, f := range q {
		var ks [][]byte
		in := true
		for _, k := range f.ks {
			if r.keys[string(k)] == f.t {
				ks = append(ks, k)
				if !containsKey(desc, k) {
					in = false
				}
			}
		}
		switch {
		case len(ks) == 0:
			// Resolved meanwhile: dropped.
		case !in || len(out) >= max:
			left = append(left, fold{t: f.t, ks: ks})
		default:
			carried := false
			for _, s := range skip {
				carried = carried || s.t == f.t
			}
			if carried {
				left = append(left, fold{t: f.t, ks: ks})
			} else {
				out = append(out, fold{t: f.t, ks: ks})
			}
		}
	}
	if len(left) == 0 {
		delete(r.pending, id)
	} else {
		r.pending[id] = left
	}
	return out
}

// doneTxn is a committed transaction across ranges being resolved.
type doneTxn struct {
	id [16]byte
	rk []byte
	ct Timestamp
	// recDesc is the record's range as the transaction grouped it.
	recDesc *kvpb.RangeDescriptor
	// committed is closed once the record's COMMITTED was answered;
	// explicit says it applied (the record range's intents resolved).
	committed chan struct{}
	explicit  bool
	// left counts its keys not yet known resolved; failed: a resolution
	// failed, so the record stays for readers (guarded by mu).
	left   int
	failed bool
}

// track registers a committed transaction's intent keys. A key's newer
// transaction replaces an older one: the newer's intent went in after the
// older's was resolved.
// It returns the older transactions this leaves with every intent known
// resolved, whose records may go.
func (r *txnResolutions) track(t *doneTxn, groups []*txnGroup) (finished []*doneTxn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.keys == nil {
		r.keys = map[string]*doneTxn{}
	}
	for _, g := range groups {
		for _, m := range g.muts {
			k := string(kvpb.MutationKey(m))
			old := r.keys[k]
			if old == t {
				continue
			}
			if old != nil {
				if old.left--; old.left == 0 && !old.failed {
					finished = append(finished, old)
				}
			}
			t.left++
			r.keys[k] = t
		}
	}
	return finished
}

// resolved notes that t's intents on ks are resolved (ok), or that their
// resolution failed; it reports whether t is now finished with every
// intent resolved (its record may go).
func (r *txnResolutions) resolved(t *doneTxn, ks [][]byte, ok bool) (gc bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !ok {
		t.failed = true
	}
	if t.left == 0 {
		return false // finished already
	}
	for _, k := range ks {
		if r.keys[string(k)] == t {
			delete(r.keys, string(k))
			t.left--
		}
	}
	return t.left == 0 && !t.failed
}

// committedFor returns the committed transactions holding intents on ks,
// for a read to name (withCommitted); nil when none.
func (r *txnResolutions) committedFor(ks [][]byte) []*kvpb.CommittedTxn {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.keys) == 0 {
		return nil
	}
	var out []*kvpb.CommittedTxn
	var seen map[*doneTxn]bool
	for _, k := range ks {
		t := r.keys[string(k)]
		if t == nil || seen[t] {
			continue
		}
		if seen == nil {
			seen = map[*doneTxn]bool{}
		}
		seen[t] = true
		out = append(out, &kvpb.CommittedTxn{TxnId: append([]byte{}, t.id[:]...), CommitTimestamp: toProto(t.ct)})
	}
	return out
}

// fold is one transaction's resolution carried by a write.
type fold struct {
	t  *doneTxn
	ks [][]byte
}

// holding returns, by transaction, the keys of ks held by committed
// transactions' intents.
func (r *txnResolutions) holding(ks [][]byte) []fold {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.keys) == 0 {
		return nil
	}
	var out []fold
	at := map[*doneTxn]int{}
	for _, k := range ks {
		t := r.keys[string(k)]
		if t == nil {
			continue
		}
		i, ok := at[t]
		if !ok {
			i = len(out)
			at[t] = i
			out = append(out, fold{t: t})
		}
		out[i].ks = append(out[i].ks, k)
	}
	return out
}

// txnKeys returns every key a group's part of the transaction reads or
// writes (point keys).
func (g *txnGroup) txnKeys() [][]byte {
	ks := make([][]byte, 0, len(g.muts)+len(g.reads))
	for _, m := range g.muts {
		ks = append(ks, kvpb.MutationKey(m))
	}
	for _, r := range g.reads {
		if !r.GetSpan() {
			ks = append(ks, r.GetKey())
		}
	}
	return ks
}

// awaitCommitted waits until the COMMITTED of every transaction holding
// an intent on ks was answered: a commit meeting the intent of such a
// transaction on the record's range would be refused (it is resolved by
// that COMMITTED), and a resolution folded into a write needs the record
// COMMITTED first. It returns the folds the write to a range holding ks
// can carry: those of transactions whose COMMITTED applied.
func (tx *Tx) awaitCommitted(ctx context.Context, ks [][]byte) ([]fold, error) {
	// Bounded: a COMMITTED that does not come (a node cut off) leaves
	// the intent to readers, and this commit may meet it, as before.
	var bound <-chan time.Time
	for _, f := range tx.c.resolutions.holding(ks) {
		if bound == nil {
			t := time.NewTimer(tx.c.opts.RequestTimeout)
			defer t.Stop()
			bound = t.C
		}
		select {
		case <-f.t.committed:
			continue
		case <-bound:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		break
	}
	// Again: each COMMITTED resolved its record range's intents.
	var out []fold
	for _, f := range tx.c.resolutions.holding(ks) {
		select {
		case <-f.t.committed:
			if f.t.explicit {
				out = append(out, f)
			}
		default:
			// A newer transaction of the key, committed meanwhile, is
			// not this one's business: the key was not its to read.
		}
	}
	return out, nil
}

// foldsProto is the TxnWriteRequest's resolve field for folds.
func foldsProto(fs []fold) []*kvpb.TxnFoldedResolve {
	out := make([]*kvpb.TxnFoldedResolve, len(fs))
	for i, f := range fs {
		out[i] = &kvpb.TxnFoldedResolve{TxnId: f.t.id[:], CommitTimestamp: toProto(f.t.ct), Keys: f.ks}
	}
	return out
}

// folded records the outcome of the folds a write carried: resolved, the
// keys are done; otherwise nothing is known and foldDelay's resolution
// still covers them.
func (c *Client) folded(fs []fold, resolved bool) {

	if !resolved {
		return
	}
	for _, f := range fs {
		if c.resolutions.resolved(f.t, f.ks, true) {
			c.recordGC.add(c, f.t.id, f.t.rk, f.t.recDesc)
		}
	}
}

// resolveAlone resolves committed transaction t's intents on ks with
// Resolve calls of their own (a split since: one call per key) and
// records the outcome.
func (c *Client) resolveAlone(ctx context.Context, t *doneTxn, ks [][]byte) error {
	err := c.resolveKeys(ctx, t.id, true, t.ct, ks)
	if c.resolutions.resolved(t, ks, err == nil) {
		c.recordGC.add(c, t.id, t.rk, t.recDesc)
	}
	return err
}

// resolveKeys resolves transaction id's intents on ks (committed at ct,
// or aborted), in one call when one range holds them all.
func (c *Client) resolveKeys(ctx context.Context, id [16]byte, committed bool, ct Timestamp, ks [][]byte) error {
	req := &kvpb.TxnResolveRequest{Header: c.header(true), TxnId: id[:], Committed: committed, Keys: ks}
	if committed {
		req.CommitTimestamp = toProto(ct)
	}
	err := c.routed(ctx, "TxnResolve", true, routeKey{key: ks[0]}, func(ctx context.Context, e *endpoint, d *kvpb.RangeDescriptor) error {
		for _, k := range ks {
			if !containsKey(d, k) {
				return errRegroup
			}
		}
		routeHeader(req.Header, d)
		_, err := e.txn.Resolve(ctx, req)
		return err
	})
	if errors.Is(err, errRegroup) && len(ks) > 1 {
		for _, k := range ks {
			if err := c.resolveKeys(ctx, id, committed, ct, [][]byte{k}); err != nil {
				return err
			}
		}
		return nil
	}
	return err
}

// clearFor gets the committed transactions' intents on the keys of
// groups out of the way of this transaction's commit: it waits for their
// COMMITTED (awaitCommitted), and returns, per group, the folds its write
// carries (keys of the group's range, for a group that writes); the rest
// (keys of a range this transaction only reads, or of a one-range
// commit, which carries no folds: foldable false) it resolves on their
// own first.
func (tx *Tx) clearFor(ctx context.Context, groups []*txnGroup, foldable bool) (map[*txnGroup][]fold, error) {
	var ks [][]byte
	for _, g := range groups {
		ks = append(ks, g.txnKeys()...)
	}
	fs, err := tx.awaitCommitted(ctx, ks)
	if err != nil || len(fs) == 0 {
		return nil, err
	}
	out := map[*txnGroup][]fold{}
	var alone []fold
	for _, f := range fs {
		var to *txnGroup
		if foldable {
			for _, g := range groups {
				if len(g.muts) > 0 && containsKey(g.desc, f.ks[0]) {
					to = g
					break
				}
			}
		}
		if to == nil {
			alone = append(alone, f)
			continue
		}
		var in, rest [][]byte
		for _, k := range f.ks {
			if containsKey(to.desc, k) {
				in = append(in, k)
			} else {
				rest = append(rest, k)
			}
		}
		out[to] = append(out[to], fold{t: f.t, ks: in})
		if len(rest) > 0 {
			alone = append(alone, fold{t: f.t, ks: rest})
		}
	}
	for _, f := range alone {
		// Best effort: one still in the way fails the commit as it
		// would have without this.
		_ = tx.c.resolveAlone(ctx, f.t, f.ks)
	}
	return out, nil
}
