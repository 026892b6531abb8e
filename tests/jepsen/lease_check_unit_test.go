package jepsen

import (
	"strings"
	"testing"
	"time"
)

// TestCheckLeases: the checker passes a history that keeps the rules and
// names each kind of violation.
func TestCheckLeases(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	good := &leaseSession{id: 1, key: "lease/00/000001", granted: at(0), putOK: true, putTried: true, putRet: at(100 * time.Millisecond),
		acks: []time.Time{at(2 * time.Second)},
		reads: []leaseRead{
			{call: at(time.Second), ret: at(1100 * time.Millisecond), found: true},
			// Absent after the deadline (2s + TTL): allowed.
			{call: at(2*time.Second + leaseTTL), ret: at(2*time.Second + leaseTTL + time.Millisecond), found: false},
		}}
	// Revoked early: absent after the revoke was sent is no violation.
	goodRevoked := &leaseSession{id: 5, key: "lease/00/000005", granted: at(0), putOK: true, putTried: true, putRet: at(100 * time.Millisecond),
		acks: []time.Time{at(time.Second)}, revokeSent: at(2 * time.Second), revoked: true, revokeRet: at(2100 * time.Millisecond),
		reads: []leaseRead{{call: at(2200 * time.Millisecond), ret: at(2300 * time.Millisecond), found: false}}}
	if c := checkLeases([]*leaseSession{good, goodRevoked}, map[string]bool{}, at(time.Minute)); len(c.problems()) != 0 || c.kept != 2 {
		t.Fatalf("a good history: %+v", c)
	}

	early := &leaseSession{id: 2, key: "lease/00/000002", granted: at(0), putOK: true, putTried: true, putRet: at(100 * time.Millisecond),
		acks:  []time.Time{at(3 * time.Second)},
		reads: []leaseRead{{call: at(4 * time.Second), ret: at(4*time.Second + time.Millisecond), found: false}}}
	revoked := &leaseSession{id: 3, key: "lease/00/000003", granted: at(0), putOK: true, putTried: true, putRet: at(time.Second),
		revokeSent: at(1900 * time.Millisecond), revoked: true, revokeRet: at(2 * time.Second),
		reads: []leaseRead{{call: at(2*time.Second + time.Millisecond), ret: at(2*time.Second + 2*time.Millisecond), found: true}}}
	outlived := &leaseSession{id: 4, key: "lease/00/000004", granted: at(0), putTried: true}
	final := map[string]bool{"lease/00/000004": true}
	c := checkLeases([]*leaseSession{early, revoked, outlived}, final, at(leaseTTL+leaseBound+time.Second))
	if len(c.early) != 1 || !strings.Contains(c.early[0], "000002") {
		t.Errorf("early: %v", c.early)
	}
	if len(c.afterRevoke) != 1 || !strings.Contains(c.afterRevoke[0], "000003") {
		t.Errorf("after revoke: %v", c.afterRevoke)
	}
	if len(c.outlived) != 1 || !strings.Contains(c.outlived[0], "000004") {
		t.Errorf("outlived: %v", c.outlived)
	}
	if len(c.problems()) != 3 {
		t.Errorf("problems: %v", c.problems())
	}
	// Present in the final read but within the bound: allowed.
	if c := checkLeases([]*leaseSession{outlived}, final, at(leaseTTL+leaseBound-time.Second)); len(c.outlived) != 0 {
		t.Errorf("within the bound: %v", c.outlived)
	}
}
