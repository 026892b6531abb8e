package jepsen

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// chaosSeed is $SHALE_CHAOS_SEED, or a fresh seed that the test prints.
func chaosSeed(t *testing.T) uint64 {
	if s := os.Getenv("SHALE_CHAOS_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("SHALE_CHAOS_SEED=%q: %v", s, err)
		}
		return seed
	}
	return uint64(time.Now().UnixNano())
}

// runAll runs each named nemesis in turn, prints the report and fails the
// test for every failed run, naming the seed that replays its schedule.
func runAll(t *testing.T, names []string, duration time.Duration, nodes int) {
	seed := chaosSeed(t)
	t.Logf("chaos seed %d (replay with SHALE_CHAOS_SEED=%d SHALE_CHAOS_NEMESES=%s)", seed, seed, strings.Join(names, ","))
	var results []runResult
	for _, name := range names {
		n := nemesisByName(name)
		if n == nil {
			t.Fatalf("unknown nemesis %q", name)
		}
		cfg := runConfig{nemesis: n, duration: duration, nodes: nodes, seed: seed,
			regWorkers: 6, regKeys: 4, setWorkers: 3, scanReaders: 2, txnWorkers: 2, watch: true}
		var res runResult
		t.Run(name, func(t *testing.T) {
			res = runNemesis(t, cfg)
			switch {
			case res.skipped != "":
				t.Skipf("skipping: %s", res.skipped)
			case len(res.problems) > 0:
				t.Errorf("%s failed (replay with SHALE_CHAOS_SEED=%d SHALE_CHAOS_NEMESES=%s; artifacts in %s):\n  %s",
					name, seed, name, res.artifacts, strings.Join(res.problems, "\n  "))
			}
		})
		if res.name == "" {
			res = runResult{name: name, problems: []string{"the run stopped early (see the log)"}}
		}
		results = append(results, res)
	}
	t.Logf("chaos report (seed %d, %v per nemesis, %d nodes):\n%s", seed, duration, nodes, report(results))
}

// TestChaosShort is the short version that runs in `make test`: leader
// partitions, kills, pauses and the split/merge storm (under which the
// consistent-scan check matters most: ranges move under the scans), half
// a minute each, on three nodes.
func TestChaosShort(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping the chaos runs in -short mode")
	}
	if os.Getenv("SHALE_CHAOS_TIME") != "" {
		t.Skip("skipping: SHALE_CHAOS_TIME is set, TestChaos runs the long version")
	}
	runAll(t, []string{"partition-leader", "kill", "pause", "split-merge-storm"}, 30*time.Second, 3)
}

// TestChaos runs every nemesis (or $SHALE_CHAOS_NEMESES) for
// $SHALE_CHAOS_TIME each on $SHALE_CHAOS_NODES nodes (5); `make chaos`
// sets them.
func TestChaos(t *testing.T) {
	d := os.Getenv("SHALE_CHAOS_TIME")
	if d == "" {
		t.Skip("skipping: set SHALE_CHAOS_TIME (e.g. make chaos CHAOS_TIME=2m)")
	}
	duration, err := time.ParseDuration(d)
	if err != nil {
		t.Fatalf("SHALE_CHAOS_TIME=%q: %v", d, err)
	}
	nodes := 5
	if s := os.Getenv("SHALE_CHAOS_NODES"); s != "" {
		if nodes, err = strconv.Atoi(s); err != nil || nodes < 3 {
			t.Fatalf("SHALE_CHAOS_NODES=%q: want a number >= 3", s)
		}
	}
	var names []string
	if s := os.Getenv("SHALE_CHAOS_NEMESES"); s != "" {
		names = strings.Split(s, ",")
	} else {
		for _, n := range nemeses {
			names = append(names, n.name)
		}
		names = append(names, combined.name)
	}
	runAll(t, names, duration, nodes)
}
