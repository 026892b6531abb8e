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
// The COMMITTED itself rides on a write too: once acknowledged, the
// transaction's COMMITTED (with the resolution of its record range's
// intents) waits up to commitCarryDelay for any write of the client to
// the record's range to carry it (a fold with the record key: one
// command for the record, its range's intents and the write), and is
// proposed alone only when none comes (docs/transactions.md, "The
// COMMITTED carried by writes").
//
// The record is deleted (recordGC) once every intent is known resolved.

// commitCarryDelay is how long an acknowledged transaction's COMMITTED
// waits for a write to its record's range to carry it before it is
// proposed alone; commitCarryWait bounds the wait for the carrier's
// answer, after which it is proposed alone anyway (it is idempotent).
// The delay is time the transaction's intents stay unresolved for
// readers of other clients (this client's own reads and writes take the
// COMMITTED into their way or send it at once: clearFor, kickCommits).
var (
	commitCarryDelay = 20 * time.Millisecond
	commitCarryWait  = time.Second
)

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
	// commits are the COMMITTEDs waiting for a write to carry them, by
	// the range ID of their record (as the transaction grouped it).
	commits map[uint64][]*doneTxn
}

// queueCommit queues t's COMMITTED for a write to its record's range to
// carry (takeCommits).
func (r *txnResolutions) queueCommit(t *doneTxn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.commits == nil {
		r.commits = map[uint64][]*doneTxn{}
	}
	id := t.recDesc.GetRangeId()
	r.commits[id] = append(r.commits[id], t)
}

// untakeCommit removes t's COMMITTED from the queue and reports whether
// it was there (no write took it): the caller then owns sending it.
func (r *txnResolutions) untakeCommit(t *doneTxn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	id := t.recDesc.GetRangeId()
	q := r.commits[id]
	for i, o := range q {
		if o == t {
			q = append(q[:i:i], q[i+1:]...)
			if len(q) == 0 {
				delete(r.commits, id)
			} else {
				r.commits[id] = q
			}
			return true
		}
	}
	return false
}

// takeCommits returns, as folds, up to max queued COMMITTEDs of the range
// of desc whose record and record-range intents lie in desc, leaving the
// others.
func (r *txnResolutions) takeCommits(desc *kvpb.RangeDescriptor, max int) []fold {
	if max <= 0 {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	id := desc.GetRangeId()
	q := r.commits[id]
	if len(q) == 0 {
		return nil
	}
	var out []fold
	var left []*doneTxn
	for _, t := range q {
		if len(out) < max && t.carriableIn(desc) {
			out = append(out, fold{t: t, ks: t.own, commit: true})
		} else {
			left = append(left, t)
		}
	}
	if len(left) == 0 {
		delete(r.commits, id)
	} else {
		r.commits[id] = left
	}
	return out
}

// carriableIn reports whether t's COMMITTED can ride on a write to the
// range of desc: its record and its record range's intents lie there.
func (t *doneTxn) carriableIn(desc *kvpb.RangeDescriptor) bool {
	if !containsKey(desc, t.rk) {
		return false
	}
	for _, k := range t.own {
		if !containsKey(desc, k) {
			return false
		}
	}
	return true
}

// kickCommit sends t's COMMITTED at once if it still waits for a carrier
// (the finish goroutine proposes it alone).
func (r *txnResolutions) kickCommit(t *doneTxn) {
	if r.untakeCommit(t) {
		t.carry(false)
	}
}

// kickCommits kicks the COMMITTEDs of the transactions holding intents
// on ks: a caller about to wait for them (a one-range commit, a read's
// validation, a locking read) does not wait for a carrier too.
func (c *Client) kickCommits(ks [][]byte) {
	for _, f := range c.resolutions.holding(ks) {
		c.resolutions.kickCommit(f.t)
	}
}

// carry reports the outcome of t's COMMITTED carried by a write (ok: the
// record is COMMITTED and its range's intents resolved), or that it was
// kicked (false): the finish goroutine takes it from there.
func (t *doneTxn) carry(ok bool) {
	select {
	case t.carried <- ok:
	default:
	}
}

// awaitCarried waits for t's queued COMMITTED to be carried by a write
// and reports whether it applied; false when no write took it within
// commitCarryDelay, or its carrier failed or did not answer within
// commitCarryWait: the caller then proposes it alone.
func (c *Client) awaitCarried(t *doneTxn) bool {
	wait := time.NewTimer(commitCarryDelay)
	defer wait.Stop()
	select {
	case ok := <-t.carried:
		return ok
	case <-wait.C:
	}
	if c.resolutions.untakeCommit(t) {
		return false
	}
	wait.Reset(commitCarryWait)
	select {
	case ok := <-t.carried:
		return ok
	case <-wait.C:
		return false
	}
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
				out = append(out, fold{t: f.t, ks: ks, taken: true})
				f.t.outstanding++
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
	// own are its intents' keys on the record's range, resolved with
	// the COMMITTED; carried hears the outcome of a COMMITTED carried by
	// a write (awaitCarried).
	own     [][]byte
	carried chan bool
	// committed is closed once the record's COMMITTED was answered;
	// explicit says it applied (the record range's intents resolved).
	committed chan struct{}
	explicit  bool
	// left counts its keys not yet known resolved; failed: a resolution
	// failed, so the record stays for readers; outstanding counts its
	// folds taken by writes not yet answered (guarded by mu), and
	// foldAnswered hears of each answer (awaitFolds).
	left         int
	failed       bool
	outstanding  int
	foldAnswered chan struct{}
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

// answered notes that a write answered a fold of t it took.
func (r *txnResolutions) answered(t *doneTxn) {
	r.mu.Lock()
	t.outstanding--
	r.mu.Unlock()
	select {
	case t.foldAnswered <- struct{}{}:
	default:
	}
}

// awaitFolds waits, at most foldCarryWait, until every fold of t that a
// write took was answered: a resolution on its way is not sent again
// alone (under load a write's round outlasts foldDelay).
func (r *txnResolutions) awaitFolds(t *doneTxn) {
	bound := time.NewTimer(foldCarryWait)
	defer bound.Stop()
	for {
		r.mu.Lock()
		n := t.outstanding
		r.mu.Unlock()
		if n <= 0 {
			return
		}
		select {
		case <-t.foldAnswered:
		case <-bound.C:
			return
		}
	}
}

// foldCarryWait bounds awaitFolds.
const foldCarryWait = time.Second

// fold is one transaction's resolution carried by a write.
type fold struct {
	t  *doneTxn
	ks [][]byte
	// commit: the fold carries t's COMMITTED (ks: its record range's
	// intents).
	commit bool
	// taken: a write took it from the pending resolutions (take), and
	// answers it (folded).
	taken bool
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
func (tx *Tx) awaitCommitted(ctx context.Context, ks [][]byte, carried map[*doneTxn]*txnGroup) ([]fold, error) {
	// Bounded: a COMMITTED that does not come (a node cut off) leaves
	// the intent to readers, and this commit may meet it, as before.
	var bound <-chan time.Time
	for _, f := range tx.c.resolutions.holding(ks) {
		if carried[f.t] != nil {
			continue // this transaction's write carries it
		}
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
		if f.commit {
			out[i].RecordKey = f.t.rk
		}
	}
	return out
}

// folded records the outcome of the folds a write carried: resolved, the
// keys are done; otherwise nothing is known and foldDelay's resolution
// still covers them. A carried COMMITTED's outcome goes to its finish
// goroutine (carry), which proposes it alone when it did not apply.
func (c *Client) folded(fs []fold, resolved bool) {
	for _, f := range fs {
		if f.taken {
			c.resolutions.answered(f.t)
		}
		if f.commit {
			f.t.carry(resolved) // the finish goroutine takes it from there
			continue
		}
		if !resolved {
			continue
		}
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
// groups out of the way of this transaction's commit. A transaction
// whose COMMITTED still waits for a carrier (and whose intents here lie
// in ranges this one writes, its record's among them) has it carried by
// this transaction's write to its record's range (folds, a commit
// fold), and its other intents here resolved by this transaction's
// writes to their ranges once that COMMITTED applied (after: the write
// waits for it). For the others it waits for their COMMITTED
// (awaitCommitted, sending at once those still waiting for a carrier),
// and returns, per group, the folds its write carries (keys of the
// group's range, for a group that writes); the rest (keys of a range
// this transaction only reads, or of a one-range commit, which carries
// no folds: foldable false) it resolves on their own first.
func (tx *Tx) clearFor(ctx context.Context, groups []*txnGroup, foldable bool) (folds, after map[*txnGroup][]fold, err error) {
	var ks [][]byte
	for _, g := range groups {
		ks = append(ks, g.txnKeys()...)
	}
	writingGroupOf := func(k []byte) *txnGroup {
		for _, g := range groups {
			if len(g.muts) > 0 && containsKey(g.desc, k) {
				return g
			}
		}
		return nil
	}
	held := tx.c.resolutions.holding(ks)
	var carried map[*doneTxn]*txnGroup
	for _, f := range held {
		if foldable && len(f.t.own) > 0 {
			g0 := writingGroupOf(f.t.rk)
			ok := g0 != nil && f.t.carriableIn(g0.desc)
			for _, k := range f.ks {
				ok = ok && writingGroupOf(k) != nil
			}
			if ok && tx.c.resolutions.untakeCommit(f.t) {
				if carried == nil {
					carried = map[*doneTxn]*txnGroup{}
				}
				carried[f.t] = g0
				continue
			}
		}
		tx.c.resolutions.kickCommit(f.t)
	}
	for t, g0 := range carried {
		if folds == nil {
			folds, after = map[*txnGroup][]fold{}, map[*txnGroup][]fold{}
		}
		folds[g0] = append(folds[g0], fold{t: t, ks: t.own, commit: true})
		byGroup := map[*txnGroup][][]byte{}
		for _, f := range held {
			if f.t != t {
				continue
			}
			for _, k := range f.ks {
				if g := writingGroupOf(k); g != g0 {
					byGroup[g] = append(byGroup[g], k)
				}
			}
		}
		for g, gks := range byGroup {
			after[g] = append(after[g], fold{t: t, ks: gks})
		}
	}
	fs, err := tx.awaitCommitted(ctx, ks, carried)
	if err != nil || len(fs) == 0 {
		return folds, after, err
	}
	if folds == nil {
		folds = map[*txnGroup][]fold{}
	}
	var alone []fold
	for _, f := range fs {
		var to *txnGroup
		if foldable {
			to = writingGroupOf(f.ks[0])
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
		folds[to] = append(folds[to], fold{t: f.t, ks: in})
		if len(rest) > 0 {
			alone = append(alone, fold{t: f.t, ks: rest})
		}
	}
	for _, f := range alone {
		// Best effort: one still in the way fails the commit as it
		// would have without this.
		_ = tx.c.resolveAlone(ctx, f.t, f.ks)
	}
	return folds, after, nil
}

// afterCommitted waits for the COMMITTED of the transactions of folds
// (carried by another write of this transaction) and returns those of
// them that applied, with the keys still holding their intents: a
// write to another range may resolve them only once the record is
// COMMITTED.
func (tx *Tx) afterCommitted(ctx context.Context, folds []fold) []fold {
	if len(folds) == 0 {
		return nil
	}
	bound := time.NewTimer(tx.c.opts.RequestTimeout)
	defer bound.Stop()
	var out []fold
	for _, f := range folds {
		select {
		case <-f.t.committed:
		case <-bound.C:
			return out
		case <-ctx.Done():
			return out
		}
		if !f.t.explicit {
			continue
		}
		for _, h := range tx.c.resolutions.holding(f.ks) {
			if h.t == f.t {
				out = append(out, h)
			}
		}
	}
	return out
}
