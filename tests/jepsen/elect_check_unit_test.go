package jepsen

import (
	"testing"
	"time"

	"github.com/shaledb/shale/client"
)

// TestCheckElections: terms one after the other pass; a leader elected
// while an earlier one led with a live lease, an observer that sees a
// leader older than one it saw, and a proclaimed value on a key no
// campaigner was elected with, are named.
func TestCheckElections(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	rev := func(n int64) client.Timestamp { return client.Timestamp{WallTime: n} }
	a := &electTerm{worker: 0, rev: rev(10), key: "jelect/a", elected: at(0), endCall: at(100), aliveUntil: at(5000)}
	b := &electTerm{worker: 1, rev: rev(20), key: "jelect/b", elected: at(150), endCall: at(300), aliveUntil: at(5000)}
	seen := []observed{
		{at: at(1), key: "jelect/a", value: "w0", create: rev(10)},
		{at: at(50), key: "jelect/a", value: "w0/1", create: rev(10)},
		{at: at(160), key: "jelect/b", value: "w1/1", create: rev(20)},
	}
	if c := checkElections([]*electTerm{a, b}, seen); len(c.problems()) != 0 || c.terms != 2 || c.seen != 3 {
		t.Fatalf("terms in order: %+v", c)
	}
	// b elected while a led with a live lease.
	early := &electTerm{worker: 1, rev: rev(20), key: "jelect/b", elected: at(50), endCall: at(300), aliveUntil: at(5000)}
	if c := checkElections([]*electTerm{a, early}, nil); len(c.overlaps) != 1 {
		t.Fatalf("overlap not named: %+v", c)
	}
	// ... but not once a's lease could have ended.
	lapsed := &electTerm{worker: 0, rev: rev(10), key: "jelect/a", elected: at(0), endCall: at(10000), aliveUntil: at(40)}
	if c := checkElections([]*electTerm{lapsed, early}, nil); len(c.overlaps) != 0 {
		t.Fatalf("overlap after the lease could end named: %+v", c)
	}
	// The observer sees a back after b.
	back := append(append([]observed(nil), seen...), observed{at: at(170), key: "jelect/a", value: "w0/1", create: rev(10)})
	if c := checkElections([]*electTerm{a, b}, back); len(c.unordered) != 1 {
		t.Fatalf("leaders out of order not named: %+v", c)
	}
	// A proclaimed value on a key whose create version no term had.
	ghost := []observed{{at: at(1), key: "jelect/a", value: "w0/1", create: rev(15)}}
	if c := checkElections([]*electTerm{a, b}, ghost); len(c.unknown) != 1 {
		t.Fatalf("a leader nobody was elected as not named: %+v", c)
	}
}
