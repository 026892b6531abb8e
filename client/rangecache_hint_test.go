package client

import "testing"

// TestRangeCacheKeepsTheNewerLeader: answers come back out of order; a
// hint of an older term, or one a request brings back after another
// request learnt a newer leader, never replaces it, and a timeout forgets
// only the leader it was routed to.
func TestRangeCacheKeepsTheNewerLeader(t *testing.T) {
	c := newRangeCache()
	c.insert(desc(2, 1, "", ""), 1)
	routedA := c.entry(2) // request A goes to node 1
	routedB := c.entry(2) // so does B

	// B hears from a follower that node 2 leads at term 7.
	c.hint(2, 2, 7, routedB)
	if e := c.entry(2); e.leader != 2 || e.term != 7 {
		t.Fatalf("a hint of the new leader was not taken: leader %d term %d", e.leader, e.term)
	}
	// A's answer, slower, names node 1 at term 6: older, ignored.
	c.hint(2, 1, 6, routedA)
	if e := c.entry(2); e.leader != 2 {
		t.Fatalf("an older term's hint replaced the newer leader: leader %d", e.leader)
	}
	// A hint of unknown term from a request routed before node 2 was
	// learnt is older news too.
	c.hint(2, 3, 0, routedA)
	if e := c.entry(2); e.leader != 2 {
		t.Fatalf("a hint learnt before the current leader replaced it: leader %d", e.leader)
	}
	// A times out on node 1: that must not forget node 2.
	c.forgetLeader(2, routedA)
	if e := c.entry(2); e.leader != 2 {
		t.Fatalf("a timeout on the old leader forgot the new one: leader %d", e.leader)
	}
	// A lookup of the same descriptor with an old leader of unknown term
	// does not replace a leader known by term either.
	c.insert(desc(2, 1, "", ""), 1)
	if e := c.entry(2); e.leader != 2 || e.term != 7 {
		t.Fatalf("a lookup replaced a leader known by term: leader %d term %d", e.leader, e.term)
	}
	// A timeout on node 2 itself forgets it, keeping the term, so that
	// hints of term 7 or older are still recognised as old...
	routedC := c.entry(2)
	c.forgetLeader(2, routedC)
	if e := c.entry(2); e.leader != 0 || e.term != 7 {
		t.Fatalf("a timeout on the leader did not forget it: leader %d term %d", e.leader, e.term)
	}
	c.hint(2, 1, 6, routedA)
	if e := c.entry(2); e.leader != 0 {
		t.Fatalf("an older term's hint was taken after the leader was forgotten: leader %d", e.leader)
	}
	// ...and a newer term's hint is taken.
	c.hint(2, 3, 8, routedA)
	if e := c.entry(2); e.leader != 3 || e.term != 8 {
		t.Fatalf("a newer term's hint was not taken: leader %d term %d", e.leader, e.term)
	}
}
