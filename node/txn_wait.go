package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/raft"
	"github.com/shaledb/shale/rangesm"
)

// Waiting on intents and breaking deadlocks (docs/transactions.md,
// "Waiting and deadlocks").
//
// A write that meets another transaction's intent at apply time (its
// command refused with CodeIntentConflict) waits on the leader, in a
// queue per locked key (lockQueues, oldest first), instead of failing
// at once: the head of the queue proposes again as soon as the key's
// intent is gone (woken by the Resolve this node serves for the range,
// or by its own poll of the lock table), and the next waiter waits for
// the head to leave. While it waits, each waiter pushes the holder (pushTxn: a finished holder's
// intent is resolved, a dead coordinator's transaction recovered), and a
// waiter that is itself a transaction (a TxnWrite, which holds intents on
// other ranges) joins the push graph: at the node serving the holder's
// record range it notes "I wait for the holder" with every transaction it
// knows to wait for itself (WaitFor). The graph thus carries, at each
// transaction's record, the transactions waiting for it, transitively, a
// hop per push round. A waiter that finds the holder among the
// transactions waiting for itself is in a cycle: the younger of the two
// (the later commit candidate; ties by ID) gives up its attempt (its
// Write is answered as a conflict and its coordinator runs the
// transaction again), and the older keeps waiting. Every cycle has an edge
// whose waiter is younger than its holder, so some member breaks it; an
// oldest transaction never gives up to a deadlock, so the system always
// makes progress (no livelock), and a retried transaction keeps losing
// only to transactions older than it, which finish.
//
// A wait is bounded (lockWaitMax) and ends with the conflict answered as
// before (the client retries) when the range's leadership or descriptor
// changes (a lease move, split or merge): nothing waits on a replica
// that no longer decides.

// lockWaitMax bounds one write's wait for one key (and so does three
// quarters of what is left of its request's deadline).
const lockWaitMax = 4 * time.Second

// lockPoll is how often a waiter looks at the lock table itself, in case
// the intent went without a Resolve served here (a snapshot, a merge).
const lockPoll = 20 * time.Millisecond

// lockPushAfter is how long a waiter waits before its first push, and
// lockPushEvery how often it pushes after: most holders resolve within
// milliseconds of their commit, without being pushed.
const (
	lockPushAfter = 30 * time.Millisecond
	lockPushEvery = 150 * time.Millisecond
)

// waitGraphTTL is how long the push graph keeps an edge its pusher did
// not renew (a pusher renews every lockPushEvery).
const waitGraphTTL = 2 * time.Second

// errDeadlock ends the wait of the younger transaction of a cycle.
var errDeadlock = errors.New("deadlock")

// lockWaitSelf is the waiting write's own transaction (nil for a write
// that is none's: it holds nothing, so it cannot be in a cycle).
type lockWaitSelf struct {
	id     command.TxnID
	record []byte
	prio   hlc.Timestamp
}

// waiterOf returns cmd's transaction, if it is a transaction's write.
func waiterOf(cmd *command.Command) *lockWaitSelf {
	if cmd.Kind != command.KindTxnWrite || len(cmd.TxnWrite.Record) == 0 {
		return nil
	}
	return &lockWaitSelf{id: cmd.TxnWrite.ID, record: cmd.TxnWrite.Record, prio: cmd.Timestamp}
}

// readKey reports whether cmd is a transaction's commit that read key.
// Such a write does not wait on key's intent: the intent went in after
// the read (a read at or above it waits for it to go), so if its
// transaction commits, the read changed and the wait was for nothing;
// the conflict is answered at once and the transaction runs again,
// reading after the holder. Writes that did not read the key (blind
// writes, plain writes) wait.
func readKey(cmd *command.Command, key []byte) bool {
	if cmd.Kind != command.KindTxnWrite && cmd.Kind != command.KindTxnCommit {
		return false
	}
	for _, rd := range cmd.Txn.Reads {
		if !rd.Span {
			if bytes.Equal(rd.Key, key) {
				return true
			}
		} else if bytes.Compare(rd.Key, key) <= 0 && (len(rd.End) == 0 || bytes.Compare(key, rd.End) < 0) {
			return true
		}
	}
	return false
}

// waitOnLock waits until t's key is free of other transactions'
// intents and t is first in the key's queue; nil means propose again
// (the caller keeps t, and so its place, until its write applied). An
// error ends the wait (the write is answered with its conflict):
// errDeadlock, the wait's bound, ctx, or the range's leadership or
// descriptor changed.
func (n *Node) waitOnLock(ctx context.Context, r *raft.Replica, t *lockTicket, self *lockWaitSelf) error {
	rid, key := t.rangeID, []byte(t.key)
	gen := r.Descriptor().GetGeneration()
	start := time.Now()
	deadline := waitDeadline(ctx, start)
	nextPush := start.Add(lockPushAfter)
	poll := time.NewTimer(lockPoll)
	defer poll.Stop()
	for {
		if !r.IsLeader() || r.Descriptor().GetGeneration() != gen {
			return fmt.Errorf("range %d changed leadership or shape while waiting on %q", rid, key)
		}
		in, held, err := rangesm.ReadIntent(n.db, rid, key)
		if err != nil {
			return err
		}
		if held && self != nil && in.Txn == self.id {
			held = false // a retried write of its own
		}
		if !held && t.first() {
			return nil
		}
		now := time.Now()
		if now.After(deadline) {
			n.metrics.lockWaitTimeouts.Inc()
			return fmt.Errorf("waited %v on %q", now.Sub(start).Round(time.Millisecond), key)
		}
		if held && !now.Before(nextPush) {
			nextPush = now.Add(lockPushEvery)
			if err := n.pushHolder(ctx, in, self); err != nil {
				return err
			}
			continue
		}
		if !poll.Stop() {
			select {
			case <-poll.C:
			default:
			}
		}
		poll.Reset(lockPoll)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.w.wake:
		case <-poll.C:
		}
	}
}

// pushHolder is one push round of a waiter on holder's intent: the
// holder's record is looked at (and the intent resolved when it is
// finished, or its transaction recovered when its coordinator is gone),
// and a transaction's wait joins the push graph; errDeadlock when this
// waiter is the one to give up a cycle.
func (n *Node) pushHolder(ctx context.Context, holder rangesm.Intent, self *lockWaitSelf) error {
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if ok, err := n.pushTxn(pctx, holder.Txn, []rangesm.Intent{holder}, hlc.MaxTimestamp); err != nil || ok {
		return nil // resolved, or the next round tries again
	}
	if self == nil {
		return nil
	}
	mine, err := n.waitFor(pctx, self.id, self.record, nil, nil)
	if err != nil {
		return nil // the graph is a hint: the bounded wait still ends it
	}
	if hp, cycle := mine[holder.Txn]; cycle && !n.deadlocksIgnored() {
		if older(hp, holder.Txn, self.prio, self.id) {
			n.metrics.deadlocks.Inc()
			n.log.Debug("breaking a deadlock: the younger transaction gives up", "txn", self.id, "waits for", holder.Txn)
			return fmt.Errorf("%w: transaction %s waits for %s, which waits for it; the younger gives up", errDeadlock, self.id, holder.Txn)
		}
	}
	_, _ = n.waitFor(pctx, holder.Txn, holder.Record, &kvpb.TxnWaiter{TxnId: self.id[:], Priority: rangesm.TimestampProto(self.prio)}, mine)
	return nil
}

// older reports whether transaction a (priority pa) beats b in a
// deadlock: the earlier commit candidate, then the lower ID.
func older(pa hlc.Timestamp, a command.TxnID, pb hlc.Timestamp, b command.TxnID) bool {
	if pa != pb {
		return pa.Less(pb)
	}
	return bytes.Compare(a[:], b[:]) < 0
}

// waitFor calls WaitFor at the node serving pushee's record range and
// returns the transactions known to wait for pushee.
func (n *Node) waitFor(ctx context.Context, pushee command.TxnID, rk []byte, pusher *kvpb.TxnWaiter, waiters map[command.TxnID]hlc.Timestamp) (map[command.TxnID]hlc.Timestamp, error) {
	req := &kvpb.TxnWaitForRequest{TxnId: pushee[:], RecordKey: rk, Pusher: pusher, Waiters: waitersProto(waiters)}
	var resp *kvpb.TxnWaitForResponse
	err := n.onRangeOf(ctx, rk, func(ctx context.Context, c kvpb.TxnClient, h *kvpb.RequestHeader) (err error) {
		req.Header = h
		resp, err = c.WaitFor(ctx, req)
		return err
	})
	if err != nil {
		return nil, err
	}
	return waitersFromProto(resp.GetWaiters())
}

func waitersProto(m map[command.TxnID]hlc.Timestamp) []*kvpb.TxnWaiter {
	out := make([]*kvpb.TxnWaiter, 0, len(m))
	for id, p := range m {
		out = append(out, &kvpb.TxnWaiter{TxnId: append([]byte{}, id[:]...), Priority: rangesm.TimestampProto(p)})
	}
	return out
}

func waitersFromProto(ws []*kvpb.TxnWaiter) (map[command.TxnID]hlc.Timestamp, error) {
	out := make(map[command.TxnID]hlc.Timestamp, len(ws))
	for _, w := range ws {
		id, err := txnIDFromProto(w.GetTxnId())
		if err != nil {
			return nil, err
		}
		p, _, err := timestampFromProto("priority", w.GetPriority())
		if err != nil {
			return nil, err
		}
		out[id] = p
	}
	return out, nil
}

// WaitFor serves the push graph for transactions whose record lies in
// the addressed range (see waitGraph).
func (s *txnServer) WaitFor(ctx context.Context, req *kvpb.TxnWaitForRequest) (*kvpb.TxnWaitForResponse, error) {
	n := s.n
	pushee, r, _, err := n.recordRange(req.GetHeader(), req.GetTxnId(), req.GetRecordKey())
	if err != nil {
		return nil, err
	}
	if len(req.GetWaiters()) > n.limits.MaxBatchOps {
		return nil, countExceeded("waiters", "waiters", "max_batch_ops", n.limits.MaxBatchOps, len(req.GetWaiters()))
	}
	if p := req.GetPusher(); p != nil {
		id, err := txnIDFromProto(p.GetTxnId())
		if err != nil {
			return nil, err
		}
		prio, _, err := timestampFromProto("pusher.priority", p.GetPriority())
		if err != nil {
			return nil, err
		}
		deps, err := waitersFromProto(req.GetWaiters())
		if err != nil {
			return nil, err
		}
		n.waitGraph.note(pushee, id, prio, deps, time.Now())
	}
	return &kvpb.TxnWaitForResponse{Header: n.respHeader(r, 0), Waiters: waitersProto(n.waitGraph.waiters(pushee, time.Now()))}, nil
}

// waitGraph is this node's part of the push graph: for each pushee, the
// transactions waiting for it, each with the transactions waiting for
// that one. In memory: a new leader of a record's range learns it again
// within a push round.
type waitGraph struct {
	mu        sync.Mutex
	pushees   map[command.TxnID]map[command.TxnID]*waitEdge
	lastPrune time.Time
}

type waitEdge struct {
	prio hlc.Timestamp
	deps map[command.TxnID]hlc.Timestamp
	seen time.Time
}

// note records that pusher (priority prio, waited for by deps) waits for
// pushee.
func (g *waitGraph) note(pushee, pusher command.TxnID, prio hlc.Timestamp, deps map[command.TxnID]hlc.Timestamp, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pruneLocked(now)
	if g.pushees == nil {
		g.pushees = map[command.TxnID]map[command.TxnID]*waitEdge{}
	}
	es := g.pushees[pushee]
	if es == nil {
		es = map[command.TxnID]*waitEdge{}
		g.pushees[pushee] = es
	}
	es[pusher] = &waitEdge{prio: prio, deps: deps, seen: now}
}

// waiters returns every transaction known to wait for pushee.
func (g *waitGraph) waiters(pushee command.TxnID, now time.Time) map[command.TxnID]hlc.Timestamp {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pruneLocked(now)
	out := map[command.TxnID]hlc.Timestamp{}
	for id, e := range g.pushees[pushee] {
		out[id] = e.prio
		for d, p := range e.deps {
			out[d] = p
		}
	}
	return out
}

func (g *waitGraph) pruneLocked(now time.Time) {
	if now.Sub(g.lastPrune) < waitGraphTTL/4 {
		return
	}
	g.lastPrune = now
	for pushee, es := range g.pushees {
		for id, e := range es {
			if now.Sub(e.seen) > waitGraphTTL {
				delete(es, id)
			}
		}
		if len(es) == 0 {
			delete(g.pushees, pushee)
		}
	}
}

// readWaitMax bounds a read's waits for intents of live transactions
// (all rounds of readPastIntents together): under a client's hedge delay (250ms by
// default), so that a waiting read is not sent to another replica too.
const readWaitMax = 150 * time.Millisecond

// awaitIntents waits until one of the intents met is gone from r's lock
// table (resolved, or replaced by another transaction's), until until
// and at most three quarters of what is left of ctx's deadline; it
// reports whether one went.
func (n *Node) awaitIntents(ctx context.Context, r *raft.Replica, met []rangesm.Intent, until time.Time) bool {
	rid := r.RangeID()
	start := time.Now()
	deadline := until
	if d, ok := ctx.Deadline(); ok {
		if late := start.Add(d.Sub(start) * 3 / 4); late.Before(deadline) {
			deadline = late
		}
	}
	for {
		resolved := n.lockQueues.resolved(rid)
		for _, in := range met {
			cur, found, err := rangesm.ReadIntent(n.db, rid, in.Key)
			if err != nil {
				return false
			}
			if !found || cur.Txn != in.Txn {
				return true
			}
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		t := time.NewTimer(min(left, lockPoll))
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-resolved:
		case <-t.C:
		}
		t.Stop()
	}
}

// lockQueues are the queues (oldest first) of writes waiting on locked
// keys, per range and key, on this node, and the channels readers waiting on an
// intent watch (closed when an intent of the range is resolved here).
type lockQueues struct {
	mu      sync.Mutex
	q       map[lockQueueKey][]*lockWaiter
	readers map[uint64]chan struct{}
	// held are the locks of locking reads (txn_lock.go); nheld counts
	// them, so that writes skip the lookup while there are none.
	held      map[lockQueueKey]*readLock
	nheld     atomic.Int64
	lastPrune time.Time
}

// resolved returns a channel closed at the next resolution of an intent
// of the range served here.
func (l *lockQueues) resolved(rangeID uint64) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.readers == nil {
		l.readers = map[uint64]chan struct{}{}
	}
	ch := l.readers[rangeID]
	if ch == nil {
		ch = make(chan struct{})
		l.readers[rangeID] = ch
	}
	return ch
}

type lockQueueKey struct {
	rangeID uint64
	key     string
}

type lockWaiter struct {
	// wake is signalled (never closed) when the waiter should look
	// again: the one ahead of it left, or an intent of its range was
	// resolved.
	wake chan struct{}
	// prio is the waiter's age, its place in the queue (see join).
	prio hlc.Timestamp
}

func (w *lockWaiter) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// lockTicket is a write's place in the queue of one key.
type lockTicket struct {
	l *lockQueues
	lockQueueKey
	w *lockWaiter
}

// join puts a waiter of age prio in key's queue: behind every waiter as
// old or older, ahead of the younger. The oldest waiter goes first, so
// the oldest transaction makes progress, and one whose wait ended by
// its bound and that asks again (a Lock, with its transaction's age)
// gets its place back rather than the tail's; a newcomer (the youngest)
// joins at the tail, so among waiters that come as they are born the
// queue is FIFO. A zero prio is taken as now.
func (l *lockQueues) join(rangeID uint64, key []byte, prio hlc.Timestamp) *lockTicket {
	if prio.IsZero() {
		prio = hlc.Timestamp{WallTime: time.Now().UnixNano()}
	}
	t := &lockTicket{l: l, lockQueueKey: lockQueueKey{rangeID, string(key)}, w: &lockWaiter{wake: make(chan struct{}, 1), prio: prio}}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.q == nil {
		l.q = map[lockQueueKey][]*lockWaiter{}
	}
	ws := l.q[t.lockQueueKey]
	i := len(ws)
	for i > 0 && prio.Less(ws[i-1].prio) {
		i--
	}
	l.q[t.lockQueueKey] = slices.Insert(ws, i, t.w)
	return t
}

// queued reports whether anyone waits in the queue of one of keys of the
// range (a write on an intent, a locking read on a lock or an intent): a
// transaction's write answered so tells its coordinator to resolve the
// range's intents as soon as it commits (kvpb.TxnWriteResponse.contended).
func (l *lockQueues) queued(rangeID uint64, keys func(yield func([]byte) bool)) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.q) == 0 {
		return false
	}
	for key := range keys {
		if len(l.q[lockQueueKey{rangeID, string(key)}]) > 0 {
			return true
		}
	}
	return false
}

// first reports whether t is at the head of its key's queue.
func (t *lockTicket) first() bool {
	t.l.mu.Lock()
	defer t.l.mu.Unlock()
	ws := t.l.q[t.lockQueueKey]
	return len(ws) > 0 && ws[0] == t.w
}

// leave takes t out of its key's queue and wakes the new head; a nil t
// does nothing.
func (t *lockTicket) leave() {
	if t == nil {
		return
	}
	l, k, w := t.l, t.lockQueueKey, t.w
	l.mu.Lock()
	defer l.mu.Unlock()
	ws := l.q[k]
	for i, x := range ws {
		if x == w {
			ws = append(ws[:i:i], ws[i+1:]...)
			break
		}
	}
	if len(ws) == 0 {
		delete(l.q, k)
		return
	}
	l.q[k] = ws
	ws[0].signal()
}

// wakeRange wakes the head of every queue of the range and the readers
// waiting on it (an intent there was resolved).
func (l *lockQueues) wakeRange(rangeID uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ch := l.readers[rangeID]; ch != nil {
		close(ch)
		delete(l.readers, rangeID)
	}
	for k, ws := range l.q {
		if k.rangeID == rangeID && len(ws) > 0 {
			ws[0].signal()
		}
	}
}

// waitDeadline is when a wait begun at start in a queue on the leader
// gives up: lockWaitMax after start, or earlier, three quarters of the
// way to the caller's deadline. It answers well before the caller gives
// up on the attempt: an attempt that times out is retried elsewhere and
// its node avoided, which is worse than a conflict answered.
func waitDeadline(ctx context.Context, start time.Time) time.Time {
	deadline := start.Add(lockWaitMax)
	if d, ok := ctx.Deadline(); ok {
		if late := start.Add(d.Sub(start) * 3 / 4); late.Before(deadline) {
			deadline = late
		}
	}
	return deadline
}
