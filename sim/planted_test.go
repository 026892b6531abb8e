package sim

import (
	"flag"
	"testing"
	"time"

	"github.com/shaledb/shale/raft"
)

var (
	flagBugSeeds = flag.Int("bug-seeds", 1000, "most seeds TestPlantedBugs runs per bug before giving up")
	flagBugAll   = flag.Bool("bug-all", false, "TestPlantedBugs runs every one of -bug-seeds seeds and reports how many caught each bug")
)

// TestPlantedBugs plants each bug of raft.TestingKnobs and runs seeds
// until the simulator reports a violation: each must be caught within
// -bug-seeds seeds (1,000).
func TestPlantedBugs(t *testing.T) {
	for _, bug := range []struct {
		name string
		bug  raft.PlantedBug
	}{
		{"apply-twice", raft.BugApplyTwice},
		{"ack-before-sync", raft.BugAckBeforeSync},
		{"stale-lease", raft.BugStaleLease},
	} {
		t.Run(bug.name, func(t *testing.T) {
			caught := 0
			deadline, hasDeadline := t.Deadline()
			for seed := uint64(1); seed <= uint64(*flagBugSeeds); seed++ {
				if hasDeadline && time.Until(deadline) < 30*time.Second {
					t.Fatalf("not caught in %d seeds (stopped short of the test's deadline)", seed-1)
				}
				var res Result
				t.Run("", func(t *testing.T) { res = Run(t, Options{Seed: seed, Bug: bug.bug}) })
				if len(res.Violations) > 0 {
					caught++
					if !*flagBugAll {
						t.Logf("caught at seed %d: %s", seed, res.Violations[0])
						return
					}
				}
			}
			if *flagBugAll {
				t.Logf("caught in %d of %d seeds", caught, *flagBugSeeds)
			}
			if caught == 0 {
				t.Errorf("not caught in %d seeds", *flagBugSeeds)
			}
		})
	}
}
