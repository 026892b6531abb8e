package jepsen

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestLockCheckCatchesPlantedBug: lock workers with long turns run on a
// cluster of a faults build and the lock checker passes their history;
// then keep-alives are acknowledged without renewing leases
// (/debug/faults/lease-early on every node) and the workers run again: a
// holder's lease ends while it holds and believes it alive, the next
// worker takes the lock, and the checker must name the overlap.
func TestLockCheckCatchesPlantedBug(t *testing.T) {
	p := startPlanted(t)
	runWorkers := func(d time.Duration) *lockWorkload {
		w := &lockWorkload{hold: func(r *rand.Rand) time.Duration { return 2*leaseTTL + time.Duration(r.Int64N(int64(time.Second))) }}
		p.run(d, 2, 11, w.worker)
		return w
	}

	clean := runWorkers(25 * time.Second)
	cc := checkLocks(clean.holds)
	if p := cc.problems(); len(p) > 0 {
		t.Fatalf("without the planted bug the checker found: %v", p)
	}
	if cc.holds < 2 || cc.writes == 0 {
		t.Fatalf("%d turns and %d fenced writes (%d failures): the run checked nothing", cc.holds, cc.writes, clean.failures)
	}
	t.Logf("clean run: %d turns, %d fenced writes, %d fenced out; no violation", cc.holds, cc.writes, cc.fenced)

	p.plant("lease-early", true)
	defer p.plant("lease-early", false)
	planted := runWorkers(25 * time.Second)
	pc := checkLocks(planted.holds)
	if len(pc.overlaps) == 0 {
		t.Fatalf("with keep-alives that do not renew, the checker found no overlapping holders (%d turns, %d writes, %d fenced out)", pc.holds, pc.writes, pc.fenced)
	}
	t.Logf("planted bug caught: %v", pc.problems())
}
