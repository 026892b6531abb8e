package sim

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/shaledb/shale/raft"
)

var (
	flagSeeds = flag.Int("seeds", 300, "number of seeds TestSimulation runs (from -seed-base)")
	flagBase  = flag.Uint64("seed-base", 1, "first seed TestSimulation runs")
	flagSeed  = flag.Uint64("seed", 0, "run only this seed, with its trace on stderr")
	flagBug   = flag.String("bug", "", "plant this bug (apply-twice, ack-before-sync, stale-lease) in -seed's run")
)

var bugs = map[string]raft.PlantedBug{
	"apply-twice":     raft.BugApplyTwice,
	"ack-before-sync": raft.BugAckBeforeSync,
	"stale-lease":     raft.BugStaleLease,
}

// TestSimulation runs -seeds seeds (or the one -seed) and fails on any
// violation, naming the seed that replays it.
func TestSimulation(t *testing.T) {
	if *flagSeed != 0 {
		bug, ok := bugs[*flagBug]
		if !ok && *flagBug != "" {
			t.Fatalf("unknown bug %q", *flagBug)
		}
		res := Run(t, Options{Seed: *flagSeed, Bug: bug, Log: os.Stderr})
		report(t, res)
		return
	}
	var total struct {
		Result
		violations int
	}
	for i := 0; i < *flagSeeds; i++ {
		seed := *flagBase + uint64(i)
		var res Result
		t.Run("", func(t *testing.T) { res = Run(t, Options{Seed: seed}) })
		report(t, res)
		total.OpsOK += res.OpsOK
		total.OpsUnknown += res.OpsUnknown
		total.OpsFailed += res.OpsFailed
		total.Admin += res.Admin
		total.AdminTried += res.AdminTried
		total.Crashes += res.Crashes
		total.Quiesces += res.Quiesces
		total.Wakes += res.Wakes
		total.Steps += res.Steps
		total.violations += len(res.Violations)
	}
	// Printed, not logged: make sim shows it without -v.
	fmt.Printf("sim: seeds %d..%d: %d steps, ops %d ok / %d unknown / %d failed, admin %d of %d, %d crashes, %d rests / %d wakes, %d violations\n",
		*flagBase, *flagBase+uint64(*flagSeeds)-1, total.Steps, total.OpsOK, total.OpsUnknown, total.OpsFailed, total.Admin, total.AdminTried, total.Crashes, total.Quiesces, total.Wakes, total.violations)
}

func report(t *testing.T, res Result) {
	t.Helper()
	if len(res.Violations) == 0 {
		return
	}
	for _, v := range res.Violations {
		t.Errorf("seed %d: %s", res.Seed, v)
	}
	t.Errorf("seed %d failed: replay with go test ./sim -run TestSimulation -seed=%d", res.Seed, res.Seed)
}
