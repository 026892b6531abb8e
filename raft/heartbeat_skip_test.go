package raft

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/shaledb/shale/raft/keys"
)

// TestBusyRangeSkipsHeartbeats: while a range is written, its leader
// sends no heartbeat to a follower it sent an append since the previous
// tick; once the writes stop, heartbeats resume (a leader that kept
// skipping them would let its followers campaign) and carry every
// follower to the leader's commit index. Quiescence is off, so that only
// heartbeats keep the idle range's leadership.
func TestBusyRangeSkipsHeartbeats(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.DisableQuiescence = true })
	ctx := ctxT(t, 60*time.Second)
	rid := uint64(keys.FirstUserRangeID)
	if _, err := c.put(ctx, rid, "k", "v"); err != nil {
		t.Fatal(err)
	}
	l := c.leader(rid)
	skipped0 := counterValue(l.store.metrics.heartbeatsSkipped)

	// Write with 8 writers until the leader skipped heartbeats for 10
	// ticks' worth of both followers (bounded in writes and time).
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20000 && wctx.Err() == nil; i++ {
				_, _ = c.put(wctx, rid, fmt.Sprintf("k%d-%d", w, i), "v")
			}
		}()
	}
	waitFor(t, 30*time.Second, "the leader skipping 20 heartbeats of a busy range", func() bool {
		return counterValue(l.store.metrics.heartbeatsSkipped)-skipped0 >= 20
	})
	stop()
	wg.Wait()

	// Idle now: heartbeats go out again, tick after tick.
	t0 := l.store.tickCount()
	waitFor(t, 10*time.Second, "two ticks after the writes", func() bool { return l.store.tickCount() >= t0+2 })
	sent0 := counterValue(l.store.metrics.heartbeatsSent)
	skipped1 := counterValue(l.store.metrics.heartbeatsSkipped)
	// Two followers, one heartbeat each per tick: 30 heartbeats are 15
	// ticks' worth (the wait is on heartbeats, not ticks, as a loaded
	// machine may run the rounds behind the ticker).
	waitFor(t, 20*time.Second, "30 heartbeats of an idle range", func() bool {
		return counterValue(l.store.metrics.heartbeatsSent)-sent0 >= 30
	})
	// A last append (the one telling the followers the last commit
	// index) may still skip the heartbeats of the tick after it, when
	// the rounds run behind the ticker: two ticks' worth, no more.
	if d := counterValue(l.store.metrics.heartbeatsSkipped) - skipped1; d > 4 {
		t.Errorf("the leader skipped %v heartbeats of an idle range", d)
	}
	lr, err := l.store.Replica(rid)
	if err != nil {
		t.Fatal(err)
	}
	commit := lr.Status().Commit
	waitFor(t, 10*time.Second, fmt.Sprintf("every follower at commit index %d", commit), func() bool {
		for _, s := range c.running() {
			r, err := s.Replica(rid)
			if err != nil || r.Status().Commit < commit {
				return false
			}
		}
		return true
	})
}
