package node

import (
	"slices"
	"testing"
	"time"

	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/hlc"
)

// TestLockTableTakesInTurnAndEnds holds the lock table of locking reads
// to its rules (txn_lock.go): a lock is taken by one transaction at a
// time, in the key's queue order (a newcomer does not pass a waiter);
// its holder may take it again; it ends with its holder's release (not
// another's), with a write to the key, and when its hold lapsed, which
// also takes it out of the count writes look at.
func TestLockTableTakesInTurnAndEnds(t *testing.T) {
	var l lockQueues
	const rid = 7
	key := []byte("k")
	mk := func(b byte) *lockWaitSelf {
		return &lockWaitSelf{id: command.TxnID{b}, record: []byte{b}, prio: hlc.Timestamp{WallTime: int64(b)}}
	}
	a, b, c := mk(1), mk(2), mk(3)

	if _, ok := l.tryLock(rid, key, a, nil); !ok {
		t.Fatal("a free key was not locked")
	}
	if _, ok := l.tryLock(rid, key, a, nil); !ok {
		t.Fatal("the holder could not take its own lock again")
	}
	if l.lockCount() != 1 {
		t.Fatalf("%d locks counted, want 1", l.lockCount())
	}
	// b queues behind a's lock; c comes later.
	tb := l.join(rid, key, b.prio)
	if other, ok := l.tryLock(rid, key, b, tb); ok || other == nil || other.owner != a.id {
		t.Fatalf("b took a held lock (ok %v, holder %v)", ok, other)
	}
	tc := l.join(rid, key, c.prio)
	l.unlock(rid, c.id, [][]byte{key}) // not c's: nothing happens
	if l.lockCount() != 1 {
		t.Fatal("a release by another transaction ended the lock")
	}
	l.unlock(rid, a.id, [][]byte{key})
	select {
	case <-tb.w.wake:
	default:
		t.Fatal("the head of the queue was not woken by the release")
	}
	if _, ok := l.tryLock(rid, key, c, tc); ok {
		t.Fatal("c took the lock ahead of b, first in the queue")
	}
	if _, ok := l.tryLock(rid, key, c, nil); ok {
		t.Fatal("a newcomer took the lock ahead of the queue")
	}
	if _, ok := l.tryLock(rid, key, b, tb); !ok {
		t.Fatal("b, first in the queue, could not take the free lock")
	}
	tb.leave()
	// A write to the key ends b's lock, whoever wrote.
	l.wrote(rid, slices.Values([][]byte{[]byte("other"), key}))
	if l.lockCount() != 0 {
		t.Fatalf("%d locks after a write to the key, want 0", l.lockCount())
	}
	if _, ok := l.tryLock(rid, key, c, tc); !ok {
		t.Fatal("c, now first, could not take the lock")
	}
	tc.leave()
	// A lapsed hold: another takes it, and pruning drops it.
	l.mu.Lock()
	l.held[lockQueueKey{rid, string(key)}].until = time.Now().Add(-time.Millisecond)
	l.mu.Unlock()
	if _, ok := l.tryLock(rid, key, a, nil); !ok {
		t.Fatal("a lapsed lock was not taken over")
	}
	if l.lockCount() != 1 {
		t.Fatalf("%d locks counted, want 1", l.lockCount())
	}
	l.mu.Lock()
	l.held[lockQueueKey{rid, string(key)}].until = time.Now().Add(-time.Millisecond)
	l.lastPrune = time.Time{}
	l.mu.Unlock()
	l.wrote(rid, slices.Values([][]byte{[]byte("unrelated")}))
	if l.lockCount() != 0 {
		t.Fatalf("%d locks after their hold lapsed and a prune, want 0", l.lockCount())
	}
}

// TestLockQueuesQueued: queued reports a waiter in the queue of any of
// the keys asked about, in their range only, and none once it left.
func TestLockQueuesQueued(t *testing.T) {
	var l lockQueues
	keys := func(ks ...string) func(yield func([]byte) bool) {
		return func(yield func([]byte) bool) {
			for _, k := range ks {
				if !yield([]byte(k)) {
					return
				}
			}
		}
	}
	if l.queued(7, keys("a", "b")) {
		t.Fatal("queued with no queue")
	}
	tk := l.join(7, []byte("b"), hlc.Timestamp{})
	if !l.queued(7, keys("a", "b")) {
		t.Fatal("a waiter on b not seen")
	}
	if l.queued(7, keys("a")) || l.queued(8, keys("b")) {
		t.Fatal("a waiter seen on another key or range")
	}
	tk.leave()
	if l.queued(7, keys("a", "b")) {
		t.Fatal("a waiter seen after it left")
	}
}

// TestLockQueueOldestFirst: a key's queue is ordered by age, the oldest
// at its head, equal ages in the order they came; so a waiter that asks
// again (its wait ended by its bound) gets its place back, ahead of
// younger waiters that came after it.
func TestLockQueueOldestFirst(t *testing.T) {
	var l lockQueues
	key := []byte("k")
	at := func(w int64) hlc.Timestamp { return hlc.Timestamp{WallTime: w} }
	t5 := l.join(1, key, at(5))
	t9 := l.join(1, key, at(9))
	t5b := l.join(1, key, at(5))
	if !t5.first() {
		t.Fatal("the oldest, first to come, is not at the head")
	}
	t5.leave()
	// It asks again: back ahead of the younger, behind its equal.
	again := l.join(1, key, at(5))
	var order []*lockWaiter
	for _, w := range l.q[lockQueueKey{1, string(key)}] {
		order = append(order, w)
	}
	if want := []*lockWaiter{t5b.w, again.w, t9.w}; !slices.Equal(order, want) {
		t.Fatalf("queue order by age: got %v, want %v", order, want)
	}
	if !t5b.first() {
		t.Fatal("the head did not change to the next oldest")
	}
	// An older newcomer goes to the head.
	t1 := l.join(1, key, at(1))
	if !t1.first() || t5b.first() {
		t.Fatal("an older waiter did not go to the head")
	}
}
