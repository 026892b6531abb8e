package raft

import (
	"fmt"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/shaledb/shale/raft/keys"
)

// TestTruncateByBytes: a log of few but large entries is truncated once
// the entries that can go hold LogTruncateMinBytes, long before there are
// LogTruncateMinEntries of them, so that they are deleted while still in
// the memtable; a log of as many small entries is not.
func TestTruncateByBytes(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) {
		cfg.LogTruncateMinEntries = 1000
		cfg.LogTruncateMinBytes = 256 << 10
	})
	ctx := ctxT(t, 60*time.Second)
	// 40 small entries: a few KiB of log, nothing to truncate.
	var last uint64
	for i := 0; i < 40; i++ {
		idx, err := c.put(ctx, keys.FirstUserRangeID, fmt.Sprintf("small%02d", i), "v")
		if err != nil {
			t.Fatal(err)
		}
		last = idx
	}
	c.waitApplied(keys.FirstUserRangeID, last)
	before := mustStatus(t, c.leader(keys.FirstUserRangeID), keys.FirstUserRangeID).Truncated
	// 40 entries of 32 KiB: 1.25 MiB of log, several truncations' worth.
	big := strings.Repeat("x", 32<<10)
	for i := 0; i < 40; i++ {
		idx, err := c.put(ctx, keys.FirstUserRangeID, fmt.Sprintf("big%02d", i), big)
		if err != nil {
			t.Fatal(err)
		}
		last = idx
	}
	c.waitApplied(keys.FirstUserRangeID, last)
	// Every replica truncates its own log: each one's is now short.
	waitFor(t, 10*time.Second, "every replica's log truncated by bytes", func() bool {
		for _, s := range c.running() {
			r, err := s.Replica(keys.FirstUserRangeID)
			if err != nil {
				return false
			}
			st := r.Status()
			if st.Truncated <= before || st.LastIndex-st.Truncated > 20 {
				return false
			}
		}
		return true
	})
	if before > 10 {
		// The small entries alone (under LogTruncateMinBytes) must not
		// have been truncated; the bootstrap entries may be.
		t.Fatalf("small entries truncated to %d", before)
	}
	for _, id := range c.ids() {
		if v, ok := c.get(id, "big39"); !ok || v != big {
			t.Fatalf("node %d lost big39", id)
		}
	}
}

// TestTruncateForTheLogBudget: logs each far under LogTruncateMinBytes and
// LogTruncateMinEntries are truncated once together they pass
// LogBudgetBytes, so that the memtable they share does not fill with log;
// with a budget they stay under, the same writes truncate nothing.
func TestTruncateForTheLogBudget(t *testing.T) {
	for _, tc := range []struct {
		name     string
		budget   int64
		truncate bool
	}{
		{"over the budget", 512 << 10, true},
		{"under the budget", 64 << 20, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestCluster(t, 3, func(cfg *Config) {
				cfg.LogTruncateMinEntries = 1000
				cfg.LogTruncateMinBytes = 64 << 20
				cfg.LogBudgetBytes = tc.budget
				cfg.LogTruncateFloorBytes = 64 << 10
			})
			ctx := ctxT(t, 60*time.Second)
			// Four ranges: [start, b) [b, c) [c, d) [d, end).
			l := c.leader(keys.FirstUserRangeID)
			ranges := []uint64{keys.FirstUserRangeID}
			for _, at := range []string{"d", "c", "b"} {
				_, right, err := l.store.Split(ctx, keys.FirstUserRangeID, []byte(at))
				if err != nil {
					t.Fatal(err)
				}
				ranges = append(ranges, right.GetRangeId())
			}
			// Every replica in place and caught up first: a node that
			// learns of a range before its split applies there catches up
			// by snapshot, which truncates its log too.
			for _, rid := range ranges {
				c.waitApplied(rid, mustStatus(t, c.leader(rid), rid).Applied)
			}
			before := map[uint64]map[uint64]uint64{} // node, range: truncated index
			for id, s := range c.running() {
				before[id] = map[uint64]uint64{}
				for _, rid := range ranges {
					r, err := s.Replica(rid)
					if err != nil {
						t.Fatal(err)
					}
					before[id][rid] = r.Status().Truncated
				}
			}
			// 12 entries of 32 KiB on each range, in turn: 384 KiB of log
			// per range, 1.5 MiB in all.
			big := strings.Repeat("x", 32<<10)
			last := map[uint64]uint64{}
			prefixes := []string{"a", "d", "c", "b"} // ranges[i] holds prefixes[i]
			for i := 0; i < 12; i++ {
				for j, rid := range ranges {
					idx, err := c.put(ctx, rid, fmt.Sprintf("%s%02d", prefixes[j], i), big)
					if err != nil {
						t.Fatal(err)
					}
					last[rid] = idx
				}
			}
			for _, rid := range ranges {
				c.waitApplied(rid, last[rid])
			}
			truncated := func(id uint64, s *Store, rid uint64) bool {
				r, err := s.Replica(rid)
				return err == nil && r.Status().Truncated > before[id][rid]
			}
			if tc.truncate {
				// Every replica of every range truncates its own log, and
				// the logs together end near the budget, not at 1.5 MiB.
				waitFor(t, 10*time.Second, "every log truncated for the budget", func() bool {
					for id, s := range c.running() {
						for _, rid := range ranges {
							if !truncated(id, s, rid) {
								return false
							}
						}
						if s.logBytes.Load() > 1<<20 {
							return false
						}
					}
					return true
				})
			} else {
				// Every replica considers truncating in each round that
				// handles it; one at rest has had its rounds after the
				// last apply (quiesce.go).
				for _, rid := range ranges {
					c.waitQuiescent(rid)
				}
				for id, s := range c.running() {
					for _, rid := range ranges {
						if truncated(id, s, rid) {
							t.Fatalf("node %d truncated range %d's log, %d KiB of log in all under a budget of %d MiB",
								id, rid, s.logBytes.Load()>>10, tc.budget>>20)
						}
					}
					if b := s.logBytes.Load(); b < 1<<20 {
						t.Fatalf("node %d counts %d KiB of log; it holds over 1.5 MiB", id, b>>10)
					}
				}
			}
			for _, id := range c.ids() {
				if v, ok := c.get(id, "b11"); !ok || v != big {
					t.Fatalf("node %d lost b11", id)
				}
			}
		})
	}
}

// TestTruncateKeepsWhatAPausedFollowerNeeds: a follower that stops
// answering for a while (here: its node is down for a few election
// timeouts) catches up from the leader's log, not from a snapshot, while
// the log is under LogMaxBytes and LogMaxEntries, even though the entries
// it needs are many times LogTruncateMinBytes.
func TestTruncateKeepsWhatAPausedFollowerNeeds(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) {
		cfg.LogTruncateMinBytes = 64 << 10
	})
	ctx := ctxT(t, 60*time.Second)
	l := c.leader(keys.FirstUserRangeID)
	down := uint64(1)
	for down == l.id {
		down++
	}
	c.stop(down)
	// 40 entries of 32 KiB: 1.25 MiB, twenty truncations' worth, written
	// over more than an election timeout.
	big := strings.Repeat("y", 32<<10)
	var last uint64
	for i := 0; i < 40; i++ {
		idx, err := c.put(ctx, keys.FirstUserRangeID, fmt.Sprintf("p%02d", i), big)
		if err != nil {
			t.Fatal(err)
		}
		last = idx
		time.Sleep(50 * time.Millisecond)
	}
	c.start(down)
	c.waitApplied(keys.FirstUserRangeID, last)
	for id, s := range c.running() {
		if n := counterValue(s.metrics.snapshotsSent); n != 0 {
			t.Fatalf("node %d sent %.0f snapshots to a follower the log could catch up", id, n)
		}
	}
	if v, ok := c.get(down, "p00"); !ok || v != big {
		t.Fatalf("node %d lacks p00", down)
	}
	// Once it has caught up, the leader truncates again.
	waitFor(t, 10*time.Second, "the leader's log truncated", func() bool {
		st := mustStatus(t, c.leader(keys.FirstUserRangeID), keys.FirstUserRangeID)
		return st.LastIndex-st.Truncated < 20
	})
}

// roundsOf returns how many processing rounds s has run.
func roundsOf(t *testing.T, s *Store) float64 {
	t.Helper()
	var m dto.Metric
	if err := s.metrics.rounds.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
