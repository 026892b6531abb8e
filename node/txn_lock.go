package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/raft"
	"github.com/shaledb/shale/rangesm"
)

// Locking reads (docs/transactions.md, "Locking reads").
//
// A transaction that reads a key to write it (the bank's transfer) can
// take the key's lock first (Txn.Lock, client Tx.GetForUpdate): the
// lock waits in the same queue per key (oldest first) as writes meeting
// intents (lockQueues), behind another transaction's lock or intent on
// the key, and the transaction takes its read timestamp only once its locks are
// held, so it reads what the previous holder committed and, holding the
// lock until its own write, commits without its read changing. Without
// it, such a transaction reads optimistically and, when another commits
// the key first, runs again.
//
// A lock is advisory: the commit still validates every read, so a lock
// can be lost without harm (it lives in the leader's memory, and is gone
// with a leadership change) and nothing but locking reads waits for it
// (plain writes and commits pass it; the holder's read then fails its
// validation as it would have without the lock). It ends
//
//   - when a write to the key applies through this node (an intent, a
//     commit's version, a plain write: whoever wrote, the read the lock
//     protected is either written over by its holder, whose intent now
//     holds the key, or changed);
//   - when its holder releases it (an attempt that ended without writing
//     the key);
//   - lockHold after it was taken (a holder that went away).
//
// A transaction waiting for a lock joins the push graph as a waiting
// write does (txn_wait.go), its waiters kept at the node serving its
// home key (its first locked key, as the record key is for intents), so
// a cycle of locking reads is broken the same way: the younger gives up
// (its Lock is answered deadlock, its attempt aborts and runs again).

// lockHold is how long a lock lasts unless a write or its holder ends it
// first: longer than a transaction under load takes from its locking
// read to its commit, waits for its other locks included (a client's
// Lock call waits up to 2.25 s, client/txn_lock.go), short enough that
// a holder that went away holds nobody up for long.
const lockHold = 4 * time.Second

// readLock is a held lock.
type readLock struct {
	owner command.TxnID
	home  []byte
	prio  hlc.Timestamp
	until time.Time
}

// Lock takes (or releases) a transaction's locks on keys of one range.
func (s *txnServer) Lock(ctx context.Context, req *kvpb.TxnLockRequest) (*kvpb.TxnLockResponse, error) {
	const op = "TxnLock"
	n := s.n
	id, err := txnIDFromProto(req.GetTxnId())
	if err != nil {
		return nil, err
	}
	ks := req.GetKeys()
	if len(ks) == 0 {
		return nil, invalidArgument("keys", "a lock needs at least one key")
	}
	if len(ks) > n.limits.MaxBatchOps {
		return nil, countExceeded("keys", "keys", "max_batch_ops", n.limits.MaxBatchOps, len(ks))
	}
	for i, k := range ks {
		if err := n.limits.checkKey(fmt.Sprintf("keys[%d]", i), k); err != nil {
			return nil, err
		}
	}
	prio, _, err := timestampFromProto("priority", req.GetPriority())
	if err != nil {
		return nil, err
	}
	home := req.GetHomeKey()
	if !req.GetRelease() {
		if err := n.limits.checkKey("home_key", home); err != nil {
			return nil, err
		}
		if len(home) == 0 {
			return nil, invalidArgument("home_key", "a lock needs the transaction's home key")
		}
	}
	if err := n.observeHeader(op, req.GetHeader()); err != nil {
		return nil, err
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
	resp := &kvpb.TxnLockResponse{Header: n.respHeader(r, 0)}
	if req.GetRelease() {
		// Any replica releases what it holds (a lock lives only where
		// it was taken).
		n.lockQueues.unlock(r.RangeID(), id, ks)
		resp.Locked = uint32(len(ks))
		return resp, nil
	}
	if !r.IsLeader() {
		return nil, n.raftError(op, &raft.NotLeaderError{RangeID: r.RangeID(), LeaderNodeID: r.Status().LeaderNodeID, Descriptor: desc})
	}
	sorted := slices.Clone(ks)
	slices.SortFunc(sorted, bytes.Compare)
	sorted = slices.CompactFunc(sorted, bytes.Equal)
	self := &lockWaitSelf{id: id, record: home, prio: prio}
	for _, k := range sorted {
		err := n.lockKey(ctx, r, k, self)
		if err != nil {
			resp.Reason = err.Error()
			resp.Deadlock = errors.Is(err, errDeadlock)
			return resp, nil
		}
		resp.Locked++
	}
	return resp, nil
}

// lockKey takes key's lock for self on r, waiting in the key's queue
// while another transaction's lock or intent holds it (pushing the
// holder as a waiting write does); an error when the wait ended without
// the lock (errDeadlock, the bound, ctx, a change of leadership or
// shape).
func (n *Node) lockKey(ctx context.Context, r *raft.Replica, key []byte, self *lockWaitSelf) error {
	rid := r.RangeID()
	l := &n.lockQueues
	// The fast path: no queue, no lock, no intent.
	if in, held, err := rangesm.ReadIntent(n.db, rid, key); err != nil {
		return err
	} else if !held || in.Txn == self.id {
		if _, ok := l.tryLock(rid, key, self, nil); ok {
			return nil
		}
	}
	n.metrics.lockWaits.Inc()
	t := l.join(rid, key, self.prio)
	defer t.leave()
	gen := r.Descriptor().GetGeneration()
	start := time.Now()
	deadline := waitDeadline(ctx, start)
	nextPush := start.Add(lockPushAfter)
	poll := time.NewTimer(lockPoll)
	defer poll.Stop()
	for {
		if !r.IsLeader() || r.Descriptor().GetGeneration() != gen {
			return fmt.Errorf("range %d changed leadership or shape while waiting to lock %q", rid, key)
		}
		in, held, err := rangesm.ReadIntent(n.db, rid, key)
		if err != nil {
			return err
		}
		if held && in.Txn == self.id {
			held = false
		}
		var other *readLock
		if !held {
			var ok bool
			if other, ok = l.tryLock(rid, key, self, t); ok {
				return nil
			}
		}
		now := time.Now()
		if now.After(deadline) {
			n.metrics.lockWaitTimeouts.Inc()
			return fmt.Errorf("waited %v to lock %q", now.Sub(start).Round(time.Millisecond), key)
		}
		if (held || other != nil) && !now.Before(nextPush) {
			nextPush = now.Add(lockPushEvery)
			if held {
				err = n.pushHolder(ctx, in, self)
			} else {
				err = n.pushLockHolder(ctx, other, self)
			}
			if err != nil {
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

// pushLockHolder is one push round of a transaction waiting for another's
// lock: only the push graph (a lock has no record to look at; a holder
// that went away loses it after lockHold).
func (n *Node) pushLockHolder(ctx context.Context, holder *readLock, self *lockWaitSelf) error {
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	mine, err := n.waitFor(pctx, self.id, self.record, nil, nil)
	if err != nil {
		return nil // the graph is a hint: the bounded wait still ends it
	}
	if hp, cycle := mine[holder.owner]; cycle && older(hp, holder.owner, self.prio, self.id) && !n.deadlocksIgnored() {
		n.metrics.deadlocks.Inc()
		n.log.Debug("breaking a deadlock of locks: the younger transaction gives up", "txn", self.id, "waits for", holder.owner)
		return fmt.Errorf("%w: transaction %s waits for %s's lock, and %s waits for it; the younger gives up", errDeadlock, self.id, holder.owner, holder.owner)
	}
	_, _ = n.waitFor(pctx, holder.owner, holder.home, &kvpb.TxnWaiter{TxnId: self.id[:], Priority: rangesm.TimestampProto(self.prio)}, mine)
	return nil
}

// tryLock takes key's lock for self when nobody else holds it (or its
// holding lapsed) and it is self's turn: t first in the key's queue, or,
// with no ticket (a first try), nobody queued. Otherwise it returns the
// other holder, if any.
func (l *lockQueues) tryLock(rangeID uint64, key []byte, self *lockWaitSelf, t *lockTicket) (*readLock, bool) {
	k := lockQueueKey{rangeID, string(key)}
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if cur := l.held[k]; cur != nil && cur.owner != self.id && now.Before(cur.until) {
		return cur, false
	}
	if ws := l.q[k]; (t == nil && len(ws) > 0) || (t != nil && (len(ws) == 0 || ws[0] != t.w)) {
		return nil, false
	}
	if l.held == nil {
		l.held = map[lockQueueKey]*readLock{}
	}
	l.pruneLocked(now)
	if l.held[k] == nil {
		l.nheld.Add(1)
	}
	l.held[k] = &readLock{owner: self.id, home: self.record, prio: self.prio, until: now.Add(lockHold)}
	return nil, true
}

// unlock ends owner's locks on keys of the range, waking each key's
// queue.
func (l *lockQueues) unlock(rangeID uint64, owner command.TxnID, keys [][]byte) {
	if l.nheld.Load() == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, key := range keys {
		k := lockQueueKey{rangeID, string(key)}
		if cur := l.held[k]; cur != nil && cur.owner == owner {
			l.dropLocked(k)
		}
	}
}

// wrote ends every lock on keys of the range (a write to them applied).
func (l *lockQueues) wrote(rangeID uint64, keys func(yield func([]byte) bool)) {
	if l.nheld.Load() == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pruneLocked(time.Now())
	for key := range keys {
		if k := (lockQueueKey{rangeID, string(key)}); l.held[k] != nil {
			l.dropLocked(k)
		}
	}
}

// pruneLocked drops the locks whose hold lapsed (their holder went
// away, or their range moved: a split gives their keys another range
// ID), at most every quarter of lockHold.
// REQUIRES: l.mu held.
func (l *lockQueues) pruneLocked(now time.Time) {
	if now.Sub(l.lastPrune) < lockHold/4 {
		return
	}
	l.lastPrune = now
	for k, h := range l.held {
		if !now.Before(h.until) {
			l.dropLocked(k)
		}
	}
}

// dropLocked ends k's lock and wakes the head of its queue.
// REQUIRES: l.mu held.
func (l *lockQueues) dropLocked(k lockQueueKey) {
	delete(l.held, k)
	l.nheld.Add(-1)
	if ws := l.q[k]; len(ws) > 0 {
		ws[0].signal()
	}
}

// lockCount is the number of locks held (tests, and the fast path of
// writes, which skip the lookup while it is zero).
func (l *lockQueues) lockCount() int64 { return l.nheld.Load() }

// writtenKeys yields the keys cmd writes (point keys; a range deletion's
// start only: a lock inside a deleted span lapses by its hold).
func writtenKeys(cmd *command.Command) func(yield func([]byte) bool) {
	return func(yield func([]byte) bool) {
		for _, m := range cmd.Mutations {
			if !yield(m.Key) {
				return
			}
		}
		if cmd.Kind == command.KindCAS && !yield(cmd.CAS.Key) {
			return
		}
	}
}
