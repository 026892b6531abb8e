package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/rangesm"
	"github.com/shaledb/shale/storage"
)

// The lessor: leases as the meta range's leader keeps them
// (docs/leases.md). Records live in meta (rangesm/lease.go); deadlines
// live only in the leader's memory, on its monotonic clock, as in etcd.
//
// The rule: a lease never expires before its TTL has passed since its
// holder sent the last keep-alive the cluster acknowledged (or the
// grant). How this lessor keeps it:
//   - It serves (grants, keep-alives, expiries) only while its node holds
//     meta's leader lease (oracleMeta.Lease): leader, lease valid, an
//     entry of its term applied. So every keep-alive it acknowledged was
//     checked after the request was sent, and before any later leader was
//     elected.
//   - Taking over in a term, it gives every live lease a full TTL from
//     then (its deadlines from an earlier term are dropped): a later
//     leader's takeover is after every acknowledgement an earlier leader
//     made, so no lease ends early. A lease may live up to one TTL longer
//     across a leader change; never shorter.
//   - An expiry is a revoke it proposes, naming the term whose deadlines
//     decided it; meta refuses it if a leader of another term appended it
//     (rangesm/lease.go). One appended in its term but committed by a
//     later leader applies before that leader's own first entry, so before
//     it acknowledged anything.
//   - Deadlines are on the monotonic clock: stepping the wall clock (the
//     clock-skew nemesis) moves no deadline. What the rule needs is that
//     clocks run at nearly the same rate (the bound Raft's leader lease
//     already needs), not a bound on their offset.

// Lease TTL bounds (docs/leases.md).
const (
	MinLeaseTTL = 500 * time.Millisecond
	MaxLeaseTTL = 24 * time.Hour
)

// leaseAttachWindow bounds how long after its attach a leased put may
// apply (rangesm: refused above its deadline). An ended lease's sweep
// waits until the oracle's time is past the last attach plus this, so no
// put attached before the end can apply after the sweep passed its range.
const leaseAttachWindow = 5 * time.Second

// lessorTick is how often the leader looks for expired leases: an
// expired lease ends within a tick of its deadline.
const lessorTick = 100 * time.Millisecond

// lessorIdleTick is how often the loop looks while it has nothing to
// keep: this node does not lead meta, or keeps no lease. A grant or a
// takeover (kick) or a change of meta's leader wakes it at once; the slow
// look catches what neither announces (a grant proposed by an earlier
// leader that applies after this node took over), and such a lease only
// ends later than its deadline, never earlier.
const lessorIdleTick = time.Second

// lessorReconcile is how often the leader re-reads the lease records it
// may have missed (a grant applied by a proposal that timed out).
const lessorReconcile = 5 * time.Second

// leaseSweepBatch is the most keys one LeaseDelete command carries.
const leaseSweepBatch = 256

type lessor struct {
	n *Node
	m leaseMetrics

	mu sync.Mutex
	// term is the meta term the deadlines were set up in; 0: none.
	term uint64
	// deadlines of the live leases, on the monotonic clock.
	deadlines map[uint64]time.Time
	ttls      map[uint64]time.Duration
	// ending holds the leases being revoked or swept by this node, and
	// ends each one's end in progress (startEndingLocked, finish).
	ending map[uint64]bool
	ends   map[uint64]*leaseEnd
	// reconciled is when the records were last re-read.
	reconciled time.Time
	// kick wakes the loop from its idle wait (kickLocked).
	kick chan struct{}
	// passes counts the loop's passes (tests).
	passes atomic.Uint64
}

// leaseEnd is an end of a lease in progress on this node: a client's
// revoke, an expiry, or the sweep of an ended record. done closes when
// it is over, with its answer in n and err.
type leaseEnd struct {
	done chan struct{}
	// revoked: the lease ends by a client's revoke (not an expiry).
	revoked bool
	n       uint64
	err     error
}

type leaseMetrics struct {
	held     prometheus.GaugeFunc
	expiries prometheus.Counter
	revokes  prometheus.Counter
	deleted  prometheus.Counter
}

func newLessor(n *Node) *lessor {
	l := &lessor{n: n, deadlines: map[uint64]time.Time{}, ttls: map[uint64]time.Duration{}, ending: map[uint64]bool{}, ends: map[uint64]*leaseEnd{},
		kick: make(chan struct{}, 1)}
	l.m = leaseMetrics{
		held: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "shale_leases_held",
			Help: "Live leases this node keeps as the meta range's leader (0 on other nodes).",
		}, func() float64 {
			l.mu.Lock()
			defer l.mu.Unlock()
			return float64(len(l.deadlines))
		}),
		expiries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shale_lease_expiries_total",
			Help: "Leases this node ended by expiry as the meta range's leader.",
		}),
		revokes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shale_lease_revokes_total",
			Help: "Leases this node ended for a client's revoke as the meta range's leader.",
		}),
		deleted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shale_lease_keys_deleted_total",
			Help: "Keys deleted because their lease ended, by sweeps this node ran.",
		}),
	}
	return l
}

func (l *lessor) collectors() []prometheus.Collector {
	return []prometheus.Collector{l.m.held, l.m.expiries, l.m.revokes, l.m.deleted}
}

// errLeaseNotFound is returned for a lease that does not exist or ended.
var errLeaseNotFound = errors.New("lease not found")

// ready returns meta's term if this node may serve leases now, setting
// the deadlines up for the term on the first call in it.
func (l *lessor) ready(ctx context.Context) (uint64, error) {
	term, err := oracleMeta{n: l.n}.Lease(ctx)
	if err != nil {
		return 0, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.term != term {
		if err := l.takeOverLocked(term); err != nil {
			return 0, err
		}
	}
	return term, nil
}

// takeOverLocked gives every live lease a full TTL from now, and queues
// the sweep of every ended one.
// REQUIRES: l.mu.
func (l *lessor) takeOverLocked(term uint64) error {
	recs, err := rangesm.ReadLeases(l.n.db)
	if err != nil {
		return fmt.Errorf("reading the lease records: %w", err)
	}
	now := time.Now()
	l.deadlines = make(map[uint64]time.Time, len(recs))
	l.ttls = make(map[uint64]time.Duration, len(recs))
	for _, r := range recs {
		if r.Ended {
			continue
		}
		ttl := time.Duration(r.TTLMillis) * time.Millisecond
		l.deadlines[r.ID], l.ttls[r.ID] = now.Add(ttl), ttl
	}
	l.term, l.reconciled = term, now
	l.kickLocked()
	if len(recs) > 0 {
		l.n.log.Info("leases taken over", "term", term, "leases", len(recs))
	}
	return nil
}

// loop expires leases and sweeps ended ones while this node leads meta:
// every lessorTick while it keeps leases, and otherwise every
// lessorIdleTick or when woken (a kick, a change of meta's leader), so
// that an idle node's lessor costs no timer every lessorTick.
func (l *lessor) loop(ctx context.Context) {
	t := time.NewTimer(lessorTick)
	defer t.Stop()
	for {
		var moved <-chan struct{}
		if r, err := l.n.store.Replica(keys.MetaRangeID); err == nil {
			// Before the tick: a change after it still wakes the wait.
			if _, mctx := r.LeaderWatch(); mctx != nil {
				moved = mctx.Done()
			}
		}
		wait := lessorTick
		if !l.tick(ctx) {
			wait = lessorIdleTick
		} else {
			moved = nil
		}
		t.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-moved:
		case <-l.kick:
		}
	}
}

// kickLocked wakes the loop from an idle wait: there are leases to keep.
// REQUIRES: l.mu.
func (l *lessor) kickLocked() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// tick does one pass of the loop and reports whether this node keeps
// leases (so that the next pass is due in lessorTick).
func (l *lessor) tick(ctx context.Context) bool {
	l.passes.Add(1)
	r, err := l.n.store.Replica(keys.MetaRangeID)
	if err != nil || !r.IsLeader() {
		l.mu.Lock()
		if l.term != 0 {
			// Not the leader: the next leader keeps the leases.
			l.term, l.deadlines, l.ttls = 0, map[uint64]time.Time{}, map[uint64]time.Duration{}
		}
		l.mu.Unlock()
		return false
	}
	if l.idle() {
		// No lease to keep: leave meta's leader lease alone, so that an
		// idle cluster's meta range may quiesce (grants set things up).
		return false
	}
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	term, err := l.ready(rctx)
	cancel()
	if err != nil {
		return true // not ready yet: look again soon
	}
	now := time.Now()
	var expired []uint64
	var sweep []uint64
	l.mu.Lock()
	if l.term != term {
		l.mu.Unlock()
		return true // the term moved on: the next tick sets it up
	}
	if now.Sub(l.reconciled) >= lessorReconcile {
		l.reconciled = now
		sweep = l.reconcileLocked(now)
	}
	for id, dl := range l.deadlines {
		if !now.Before(dl) && !l.ending[id] {
			l.startEndingLocked(id, false)
			expired = append(expired, id)
		}
	}
	l.mu.Unlock()
	for _, id := range expired {
		go l.end(ctx, term, id, true)
	}
	for _, id := range sweep {
		go l.sweepAndForget(ctx, id)
	}
	return true
}

// idle reports whether there is nothing for the loop to do: no deadline
// kept, nothing ending, and no lease record in this node's copy of meta.
func (l *lessor) idle() bool {
	l.mu.Lock()
	busy := len(l.deadlines) > 0 || len(l.ending) > 0
	l.mu.Unlock()
	if busy {
		return false
	}
	span := keys.LeaseSpan()
	it, err := l.n.db.NewIter(&storage.IterOptions{LowerBound: span.Start, UpperBound: span.End})
	if err != nil {
		return false
	}
	defer it.Close()
	return !it.First()
}

// reconcileLocked adds the live leases the deadlines miss (a full TTL
// from now: later than any acknowledgement), drops the ones that are
// gone, and returns the ended leases to sweep.
// REQUIRES: l.mu.
func (l *lessor) reconcileLocked(now time.Time) []uint64 {
	recs, err := rangesm.ReadLeases(l.n.db)
	if err != nil {
		l.n.log.Warn("reading the lease records", "err", err)
		return nil
	}
	seen := make(map[uint64]bool, len(recs))
	var sweep []uint64
	for _, r := range recs {
		seen[r.ID] = true
		if r.Ended {
			delete(l.deadlines, r.ID)
			if !l.ending[r.ID] {
				l.startEndingLocked(r.ID, !r.Expired)
				sweep = append(sweep, r.ID)
			}
			continue
		}
		if _, ok := l.deadlines[r.ID]; !ok && !l.ending[r.ID] {
			ttl := time.Duration(r.TTLMillis) * time.Millisecond
			l.deadlines[r.ID], l.ttls[r.ID] = now.Add(ttl), ttl
		}
	}
	for id := range l.deadlines {
		if !seen[id] {
			delete(l.deadlines, id)
			delete(l.ttls, id)
		}
	}
	return sweep
}

// end revokes lease id (an expiry, or a client's revoke) and sweeps its
// keys; it returns the keys deleted.
// REQUIRES: startEndingLocked(id) was called; end finishes it.
func (l *lessor) end(ctx context.Context, term uint64, id uint64, expired bool) (n uint64, err error) {
	defer func() { l.finish(id, n, err) }()
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	c := command.Lease{ID: id, Expired: expired}
	if expired {
		// Decided from this term's deadlines: refused if a leader of
		// another term appends it.
		c.Term = term
	}
	res, _, err := l.n.store.Propose(pctx, keys.MetaRangeID, &command.Command{Kind: command.KindLeaseRevoke, Lease: c})
	cancel()
	if err != nil {
		return 0, err
	}
	switch res.Code {
	case command.CodeOK:
		if expired {
			l.m.expiries.Inc()
			l.n.log.Info("lease expired", "lease", id, "term", term)
		} else {
			l.m.revokes.Inc()
		}
	case command.CodeLeaseNotFound:
		if !expired {
			// Revoked by a client already, but its keys may not all be
			// gone (a revoke whose sweep was cut short, retried here):
			// sweep what is left, so that the retry returns once they
			// are, as the first would have.
			rec, found, err := rangesm.ReadLease(l.n.db, id)
			if err != nil {
				return 0, err
			}
			if !found || !rec.Ended || rec.Expired {
				return 0, fmt.Errorf("%w: lease %d: %s", errLeaseNotFound, id, res.Message)
			}
			return l.sweep(ctx, id)
		}
		// Ended already (another leader's expiry): sweep what is left.
	default:
		return 0, res.Err()
	}
	l.mu.Lock()
	delete(l.deadlines, id)
	delete(l.ttls, id)
	l.mu.Unlock()
	return l.sweep(ctx, id)
}

// startEndingLocked marks lease id as ending on this node (revoked: by
// a client's revoke) and returns the record of that end.
// REQUIRES: l.mu, and id not ending.
func (l *lessor) startEndingLocked(id uint64, revoked bool) *leaseEnd {
	e := &leaseEnd{done: make(chan struct{}), revoked: revoked}
	l.ending[id], l.ends[id] = true, e
	return e
}

// finish ends what startEndingLocked started, with its answer.
func (l *lessor) finish(id uint64, n uint64, err error) {
	l.mu.Lock()
	e := l.ends[id]
	delete(l.ending, id)
	delete(l.ends, id)
	l.mu.Unlock()
	if e != nil {
		e.n, e.err = n, err
		close(e.done)
	}
}

func (l *lessor) sweepAndForget(ctx context.Context, id uint64) {
	n, err := l.sweep(ctx, id)
	l.finish(id, n, err)
	if err != nil {
		l.n.log.Info("lease sweep stopped; retried later", "lease", id, "err", err)
	}
}

// sweep deletes the keys of ended lease id that still carry it, then the
// record. It first waits until the oracle's time is past the lease's last
// attach window, so that every leased put is either applied before the
// sweep's delete on its range (and deleted) or refused.
func (l *lessor) sweep(ctx context.Context, id uint64) (uint64, error) {
	rec, found, err := rangesm.ReadLease(l.n.db, id)
	if err != nil || !found {
		return 0, err
	}
	if !rec.Ended {
		return 0, fmt.Errorf("lease %d is live", id)
	}
	until := rec.LastAttach.Add(leaseAttachWindow)
	for {
		now, err := l.n.timestamps.Now(ctx)
		if err != nil {
			return 0, err
		}
		if until.Less(now) {
			break
		}
		wait := time.Duration(until.WallTime-now.WallTime) + time.Millisecond
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(min(wait, time.Second)):
		}
	}
	var deleted uint64
	atts, err := rangesm.LeaseAttachments(l.n.db, id, 0)
	if err != nil {
		return 0, err
	}
	for len(atts) > 0 {
		n := min(len(atts), leaseSweepBatch)
		d, err := l.n.deleteAttached(ctx, id, atts[:n])
		deleted += d
		l.m.deleted.Add(float64(d))
		if err != nil {
			return deleted, err
		}
		atts = atts[n:]
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	res, _, err := l.n.store.Propose(pctx, keys.MetaRangeID, &command.Command{Kind: command.KindLeaseSwept, Lease: command.Lease{ID: id}})
	cancel()
	if err != nil {
		return deleted, err
	}
	if res.Code != command.CodeOK && res.Code != command.CodeLeaseNotFound {
		return deleted, res.Err()
	}
	return deleted, nil
}

// grant creates a lease and starts its TTL.
func (l *lessor) grant(ctx context.Context, id uint64, ttl time.Duration) (uint64, error) {
	term, err := l.ready(ctx)
	if err != nil {
		return 0, err
	}
	res, _, err := l.n.store.Propose(ctx, keys.MetaRangeID, &command.Command{Kind: command.KindLeaseGrant,
		Lease: command.Lease{ID: id, TTLMillis: uint64(ttl.Milliseconds())}})
	if err != nil {
		return 0, err
	}
	switch res.Code {
	case command.CodeOK:
	case command.CodeLeaseExists:
		return 0, status.Errorf(codes.AlreadyExists, "Grant: %s", res.Message)
	default:
		return 0, res.Err()
	}
	l.mu.Lock()
	if l.term == term {
		l.deadlines[res.NodeID], l.ttls[res.NodeID] = time.Now().Add(ttl), ttl
		l.kickLocked()
	}
	l.mu.Unlock()
	return res.NodeID, nil
}

// keepAlive renews lease id: it expires no earlier than its TTL from now.
func (l *lessor) keepAlive(ctx context.Context, id uint64) (time.Duration, error) {
	ttls, errs, err := l.keepAliveMany(ctx, []uint64{id})
	if err != nil {
		return 0, err
	}
	return ttls[0], errs[0]
}

// keepAliveMany renews leases ids with one readiness check and one pass
// under the lock: ttls[i] and errs[i] answer ids[i] (errLeaseNotFound for
// a lease that does not exist); err is a failure of the whole call (not
// meta's leader, not ready).
func (l *lessor) keepAliveMany(ctx context.Context, ids []uint64) (ttls []time.Duration, errs []error, err error) {
	if _, err := l.ready(ctx); err != nil {
		return nil, nil, err
	}
	ttls, errs = make([]time.Duration, len(ids)), make([]error, len(ids))
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, id := range ids {
		ttls[i], errs[i] = l.keepAliveLocked(id, now)
	}
	return ttls, errs, nil
}

// keepAliveLocked renews lease id from now.
// REQUIRES: l.mu, and ready() since the node last lost meta's lead.
func (l *lessor) keepAliveLocked(id uint64, now time.Time) (time.Duration, error) {
	if l.ending[id] {
		return 0, fmt.Errorf("%w: lease %d has expired or is being revoked", errLeaseNotFound, id)
	}
	ttl, ok := l.ttls[id]
	if !ok {
		// Granted since the last look at the records?
		rec, found, err := rangesm.ReadLease(l.n.db, id)
		if err != nil {
			return 0, err
		}
		if !found || rec.Ended {
			return 0, fmt.Errorf("%w: lease %d does not exist (never granted, expired or revoked)", errLeaseNotFound, id)
		}
		ttl = time.Duration(rec.TTLMillis) * time.Millisecond
		l.ttls[id] = ttl
	}
	if l.n.leaseKeepAliveIgnored() {
		return ttl, nil // the planted bug of a faults build (faults_on.go)
	}
	l.deadlines[id] = now.Add(ttl)
	return ttl, nil
}

// revoke ends lease id for a client and deletes its keys.
//
// A revoke is retried when its caller did not hear back (a timeout): the
// first may still be running, or have been cut short after its Raft
// write (the caller's context ended while it swept, and the sweep of the
// ended record goes on in the background). A revoke of a lease whose end
// by a client's revoke is in progress here waits for it and returns its
// answer; one that finds the lease revoked but not yet swept sweeps it
// (end). Only once a revoked lease is swept is it NotFound, like a lease
// never granted.
func (l *lessor) revoke(ctx context.Context, id uint64) (uint64, error) {
	term, err := l.ready(ctx)
	if err != nil {
		return 0, err
	}
	for {
		l.mu.Lock()
		e := l.ends[id]
		if e == nil {
			l.startEndingLocked(id, true)
			l.mu.Unlock()
			return l.end(ctx, term, id, false)
		}
		l.mu.Unlock()
		select {
		case <-e.done:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		if e.revoked && e.err == nil {
			return e.n, nil
		}
		// An expiry, or an end that failed: look again.
	}
}

// remaining returns the time lease id has left (-1: ended) and its record.
func (l *lessor) remaining(ctx context.Context, id uint64) (rangesm.LeaseRecord, time.Duration, error) {
	if _, err := l.ready(ctx); err != nil {
		return rangesm.LeaseRecord{}, 0, err
	}
	rec, found, err := rangesm.ReadLease(l.n.db, id)
	if err != nil {
		return rec, 0, err
	}
	if !found {
		return rec, 0, fmt.Errorf("%w: lease %d does not exist (never granted, expired or revoked)", errLeaseNotFound, id)
	}
	if rec.Ended {
		return rec, -1, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ending[id] {
		return rec, -1, nil
	}
	dl, ok := l.deadlines[id]
	if !ok {
		return rec, time.Duration(rec.TTLMillis) * time.Millisecond, nil
	}
	return rec, max(time.Until(dl), 0), nil
}

// list returns every lease record with the time it has left.
func (l *lessor) list(ctx context.Context) ([]rangesm.LeaseRecord, []time.Duration, error) {
	if _, err := l.ready(ctx); err != nil {
		return nil, nil, err
	}
	recs, err := rangesm.ReadLeases(l.n.db)
	if err != nil {
		return nil, nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	left := make([]time.Duration, len(recs))
	for i, r := range recs {
		switch dl, ok := l.deadlines[r.ID]; {
		case r.Ended || l.ending[r.ID]:
			left[i] = -1
		case ok:
			left[i] = max(time.Until(dl), 0)
		default:
			left[i] = time.Duration(r.TTLMillis) * time.Millisecond
		}
	}
	return recs, left, nil
}

// attach records at meta that key attaches to lease id, and returns the
// deadline the put must apply at or below.
func (l *lessor) attach(ctx context.Context, id uint64, key []byte) (hlc.Timestamp, error) {
	if _, err := l.ready(ctx); err != nil {
		return hlc.Timestamp{}, err
	}
	l.mu.Lock()
	ending := l.ending[id]
	l.mu.Unlock()
	if ending {
		return hlc.Timestamp{}, fmt.Errorf("%w: lease %d has expired or is being revoked", errLeaseNotFound, id)
	}
	t, err := l.n.timestamps.Now(ctx)
	if err != nil {
		return hlc.Timestamp{}, err
	}
	res, _, err := l.n.store.Propose(ctx, keys.MetaRangeID, &command.Command{Header: command.Header{Timestamp: t},
		Kind: command.KindLeaseAttach, Lease: command.Lease{ID: id, Key: key}})
	if err != nil {
		return hlc.Timestamp{}, err
	}
	switch res.Code {
	case command.CodeOK:
	case command.CodeLeaseNotFound:
		return hlc.Timestamp{}, fmt.Errorf("%w: %s", errLeaseNotFound, res.Message)
	default:
		return hlc.Timestamp{}, res.Err()
	}
	return t.Add(leaseAttachWindow), nil
}
