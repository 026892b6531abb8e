package jepsen

import (
	"testing"
	"time"
)

// TestLeaseCheckCatchesPlantedBug: lease workers run on a cluster of a
// faults build and the lease checker (lease_check_test.go) passes their
// history. Then the planted bug is set on every node (a faults build's
// /debug/faults/lease-early: keep-alives are acknowledged without
// renewing the lease) and the workers run again: the checker must report
// keys that went before their TTL since the last acknowledged keep-alive.
func TestLeaseCheckCatchesPlantedBug(t *testing.T) {
	p := startPlanted(t)
	runWorkers := func(d time.Duration) *leaseWorkload {
		w := &leaseWorkload{}
		p.run(d, 3, 7, w.worker)
		return w
	}

	clean := runWorkers(20 * time.Second)
	cc := checkLeases(clean.sessions, nil, time.Time{})
	if p := cc.problems(); len(p) > 0 {
		t.Fatalf("without the planted bug the checker found: %v", p)
	}
	if cc.kept == 0 {
		t.Fatalf("no session had an acknowledged keep-alive (%d sessions, %d failures): the run checked nothing", cc.sessions, clean.failures)
	}
	t.Logf("clean run: %d sessions, %d kept alive, %d revoked; no violation", cc.sessions, cc.kept, cc.revoked)

	p.plant("lease-early", true)
	defer p.plant("lease-early", false)
	planted := runWorkers(20 * time.Second)
	pc := checkLeases(planted.sessions, nil, time.Time{})
	if len(pc.early) == 0 {
		t.Fatalf("with keep-alives that do not renew, the checker found no key gone early (%d sessions, %d kept alive)", pc.sessions, pc.kept)
	}
	t.Logf("planted bug caught: %v", pc.problems())
}
