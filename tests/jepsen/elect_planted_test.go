package jepsen

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"
)

// TestElectionCheckCatchesPlantedBug: campaigners with long terms and an
// observer run on a cluster of a faults build and the election checker
// passes their history; then keep-alives are acknowledged without
// renewing leases (/debug/faults/lease-early on every node) and they run
// again: a leader's lease ends while it leads and believes it alive, its
// key goes, the next campaigner is elected before the old leader's next
// Proclaim fails, and the checker must name the overlap.
//
// A leader learns that its lease ended at its next Proclaim (the leased
// write fails), and the lease's sweep deletes its key no earlier than
// the 5 s attach window after its last Proclaim (docs/leases.md,
// "Attach"): a leader that proclaims more often than that always learns
// first. So here leaders proclaim every TTL plus a second, and terms last
// two TTLs.
func TestElectionCheckCatchesPlantedBug(t *testing.T) {
	p := startPlanted(t)
	runWorkers := func(d time.Duration) *electWorkload {
		w := &electWorkload{proclaimEvery: leaseTTL + time.Second,
			hold: func(r *rand.Rand) time.Duration { return 2*leaseTTL + time.Duration(r.Int64N(int64(time.Second))) }}
		p.run(d, 3, 13, func(ctx context.Context, i int, s *session, rng *rand.Rand) {
			if i == 2 {
				w.observer(ctx, s)
				return
			}
			w.worker(ctx, i, s, rng)
		})
		return w
	}

	clean := runWorkers(25 * time.Second)
	cc := checkElections(clean.terms, clean.seen)
	if p := cc.problems(); len(p) > 0 {
		t.Fatalf("without the planted bug the checker found: %v", p)
	}
	if cc.terms < 2 || cc.proclaims == 0 || cc.seen < 2 {
		t.Fatalf("%d terms, %d proclaims, %d leaders observed (%d failures): the run checked nothing", cc.terms, cc.proclaims, cc.seen, clean.failures)
	}
	t.Logf("clean run: %d terms, %d proclaims, %d leaders observed; no violation", cc.terms, cc.proclaims, cc.seen)

	p.plant("lease-early", true)
	defer p.plant("lease-early", false)
	// Whether a run shows an overlap depends on when leases end against
	// the leaders' Proclaims: runs have shown 0 to 4. Up to three runs;
	// the checker must name one in one of them.
	var pc electCheck
	for run := 1; run <= 3; run++ {
		planted := runWorkers(25 * time.Second)
		pc = checkElections(planted.terms, planted.seen)
		if len(pc.overlaps) > 0 {
			t.Logf("planted bug caught in run %d: %v", run, pc.problems())
			return
		}
		t.Logf("planted run %d: no overlap (%d terms, %d proclaims)", run, pc.terms, pc.proclaims)
	}
	t.Fatalf("with keep-alives that do not renew, the checker found no overlapping leaders in 3 runs (last: %d terms, %d proclaims)", pc.terms, pc.proclaims)
}
