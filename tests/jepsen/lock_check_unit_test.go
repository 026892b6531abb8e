package jepsen

import (
	"testing"
	"time"

	"github.com/shaledb/shale/client"
)

// TestCheckLocks: turns one after the other pass; a holder that got the
// lock while an earlier one held it with a live lease, and fenced writes
// out of token order, are named.
func TestCheckLocks(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	tok := func(n int64) client.Timestamp { return client.Timestamp{WallTime: n} }
	a := &lockHold{worker: 0, token: tok(10), lockRet: at(0), endCall: at(100), aliveUntil: at(5000),
		writes: []fencedWrite{{version: tok(11), token: tok(10)}}}
	b := &lockHold{worker: 1, token: tok(20), lockRet: at(150), endCall: at(300), aliveUntil: at(5000),
		writes: []fencedWrite{{version: tok(21), token: tok(20)}}}
	if c := checkLocks([]*lockHold{a, b}); len(c.problems()) != 0 || c.writes != 2 {
		t.Fatalf("turns in order: %+v", c)
	}
	// b got the lock while a held it with a live lease.
	early := &lockHold{worker: 1, token: tok(20), lockRet: at(50), endCall: at(300), aliveUntil: at(5000)}
	if c := checkLocks([]*lockHold{a, early}); len(c.overlaps) != 1 {
		t.Fatalf("overlap not named: %+v", c)
	}
	// ... but not once a's lease could have ended.
	lapsed := &lockHold{worker: 0, token: tok(10), lockRet: at(0), endCall: at(10000), aliveUntil: at(40)}
	if c := checkLocks([]*lockHold{lapsed, early}); len(c.overlaps) != 0 {
		t.Fatalf("overlap after the lease could end named: %+v", c)
	}
	// A write with a lower token after a higher one.
	stale := &lockHold{worker: 0, token: tok(10), lockRet: at(0), endCall: at(100), aliveUntil: at(40),
		writes: []fencedWrite{{version: tok(30), token: tok(10)}}}
	if c := checkLocks([]*lockHold{stale, b}); len(c.unordered) != 1 {
		t.Fatalf("unordered writes not named: %+v", c)
	}
}
