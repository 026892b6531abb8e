package raft

import (
	"fmt"
	"testing"
	"time"

	"github.com/shaledb/shale/raft/keys"
)

// waitQuiescent waits until every running replica of rangeID is asleep.
func (c *testCluster) waitQuiescent(rangeID uint64) {
	c.t.Helper()
	waitFor(c.t, 20*time.Second, fmt.Sprintf("range %d at rest on every node", rangeID), func() bool {
		for _, s := range c.running() {
			r, err := s.Replica(rangeID)
			if err != nil || !r.Status().Quiescent {
				return false
			}
		}
		return true
	})
}

// awakeCount returns how many replicas s's ticker ticks.
func (s *Store) awakeCount() int {
	s.awake.Lock()
	defer s.awake.Unlock()
	return len(s.awake.reps)
}

// ticks returns how many times s's ticker has run.
func (s *Store) tickCount() uint64 { return s.ticks.Load() }

// TestRangeQuiescesAndWakesOnWrite: an idle range goes to rest on every
// replica, sends no Raft message while at rest (only node heartbeats,
// which are not Raft messages, one per peer every third of an election
// timeout), and a write wakes it, commits on every replica, and lets it
// rest again.
func TestRangeQuiescesAndWakesOnWrite(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	ctx := ctxT(t, 60*time.Second)
	if _, err := c.put(ctx, keys.FirstUserRangeID, "k", "v1"); err != nil {
		t.Fatal(err)
	}
	c.waitQuiescent(keys.FirstUserRangeID)
	c.waitQuiescent(keys.MetaRangeID)

	// At rest, no Raft message leaves any node for 2 election timeouts'
	// worth of ticks.
	sent := map[uint64]float64{}
	nodeHBs := map[uint64]float64{}
	from := map[uint64]uint64{}
	for id, s := range c.running() {
		sent[id] = counterValue(s.metrics.messagesSent)
		nodeHBs[id] = counterValue(s.metrics.nodeHeartbeatsSent)
		from[id] = s.tickCount()
	}
	waitFor(t, 20*time.Second, "20 ticks on every node", func() bool {
		for id, s := range c.running() {
			if s.tickCount() < from[id]+20 {
				return false
			}
		}
		return true
	})
	for id, s := range c.running() {
		if d := counterValue(s.metrics.messagesSent) - sent[id]; d != 0 {
			t.Errorf("node %d sent %v Raft messages while every range was at rest", id, d)
		}
		// Two peers, one heartbeat each every 3 ticks (10 election
		// ticks); the counter and the tick count are read apart, so a
		// round of slack either way.
		ticks := float64(s.tickCount() - from[id])
		if d := counterValue(s.metrics.nodeHeartbeatsSent) - nodeHBs[id]; d < 2*(ticks/3-1) || d > 2*(ticks/3+1) {
			t.Errorf("node %d sent %v node heartbeats in %v ticks, want 2 every 3 ticks", id, d, ticks)
		}
		if q := gaugeValue(s.metrics.quiescent); q != 2 {
			t.Errorf("node %d: %v replicas at rest, want 2", id, q)
		}
		if n := s.awakeCount(); n != 0 {
			t.Errorf("node %d ticks %d replicas with every range at rest, want 0", id, n)
		}
	}

	wakes := counterValue(c.leader(keys.FirstUserRangeID).store.metrics.wakes)
	idx, err := c.put(ctx, keys.FirstUserRangeID, "k", "v2")
	if err != nil {
		t.Fatal(err)
	}
	c.waitApplied(keys.FirstUserRangeID, idx)
	for _, id := range c.ids() {
		if v, _ := c.get(id, "k"); v != "v2" {
			t.Errorf("node %d holds k=%q after the write that woke the range, want v2", id, v)
		}
	}
	if w := counterValue(c.leader(keys.FirstUserRangeID).store.metrics.wakes); w <= wakes {
		t.Errorf("the leader's wakes stayed at %v: the write did not find the range at rest", w)
	}
	// Resting again takes idle ticks: a woken replica the ticker left out
	// would stay awake.
	c.waitQuiescent(keys.FirstUserRangeID)
}

// TestQuiescentLeaderKilledIsReplaced: with every range at rest, the
// leader's node dies; the followers learn it from node liveness (no range
// heartbeats to miss) and elect a new leader within the bound of an awake
// range's failover (TestLeaderFailover's), and the range takes writes.
func TestQuiescentLeaderKilledIsReplaced(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	ctx := ctxT(t, 60*time.Second)
	if _, err := c.put(ctx, keys.FirstUserRangeID, "before", "v"); err != nil {
		t.Fatal(err)
	}
	c.waitQuiescent(keys.FirstUserRangeID)
	old := c.leader(keys.FirstUserRangeID)
	c.stop(old.id)
	start := time.Now()
	nl := c.leader(keys.FirstUserRangeID)
	took := time.Since(start)
	t.Logf("new leader n%d after %v", nl.id, took)
	if limit := 10 * 10 * testTick; took > limit {
		t.Errorf("electing a new leader of a range at rest took %v, more than %v (5 maximal election timeouts)", took, limit)
	}
	if _, err := c.put(ctx, keys.FirstUserRangeID, "after", "v"); err != nil {
		t.Fatal(err)
	}
}

// TestQuiescenceOff: with DisableQuiescence no range rests.
func TestQuiescenceOff(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.DisableQuiescence = true })
	ctx := ctxT(t, 60*time.Second)
	if _, err := c.put(ctx, keys.FirstUserRangeID, "k", "v"); err != nil {
		t.Fatal(err)
	}
	from := map[uint64]uint64{}
	for id, s := range c.running() {
		from[id] = s.tickCount()
	}
	waitFor(t, 20*time.Second, "20 ticks on every node", func() bool {
		for id, s := range c.running() {
			if s.tickCount() < from[id]+20 {
				return false
			}
		}
		return true
	})
	for id, s := range c.running() {
		if q := gaugeValue(s.metrics.quiescent); q != 0 {
			t.Errorf("node %d: %v replicas at rest with quiescence off", id, q)
		}
	}
}
