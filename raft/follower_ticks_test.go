package raft

import (
	"testing"
	"time"

	"github.com/shaledb/shale/raft/keys"
)

// TestFollowerTicksBatched: on a node that only follows, an idle awake
// range (quiescence off, so its leader heartbeats every tick) costs its
// replicas about one visit per tick, the heartbeat's, instead of one for
// the tick and one for the heartbeat; the followers keep following (no
// election while they count their ticks late).
func TestFollowerTicksBatched(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.DisableQuiescence = true })
	ctx := ctxT(t, 60*time.Second)
	rid := uint64(keys.FirstUserRangeID)
	if _, err := c.put(ctx, rid, "k", "v"); err != nil {
		t.Fatal(err)
	}
	// Both ranges led by one node, so that another only follows.
	l := c.leader(keys.MetaRangeID)
	if ul := c.leader(rid); ul.id != l.id {
		if err := ul.store.TransferLeader(ctx, rid, l.id); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "the user range's leader to move", func() bool { return c.leader(rid).id == l.id })
	}
	var f *Store
	for id, s := range c.running() {
		if id != l.id {
			f = s
			break
		}
	}
	leaders0 := counterValue(l.store.metrics.leaderChanges)
	visits0, ticks0 := counterValue(f.metrics.visits), f.tickCount()
	waitFor(t, 30*time.Second, "60 ticks", func() bool { return f.tickCount() >= ticks0+60 })
	visits, ticks := counterValue(f.metrics.visits)-visits0, float64(f.tickCount()-ticks0)
	perTick := visits / ticks / 2 // two replicas: meta's and the user range's
	t.Logf("%v visits of 2 replicas over %v ticks: %.2f per replica and tick", visits, ticks, perTick)
	if perTick > 1.6 {
		t.Errorf("%.2f visits per follower replica and tick, want at most 1.6 (one per heartbeat and a tick visit every %d ticks)", perTick, followerTickBatch)
	}
	if n := counterValue(l.store.metrics.leaderChanges) - leaders0; n != 0 {
		t.Errorf("%v leadership changes while the followers counted their ticks in batches", n)
	}
	if c.leader(rid).id != l.id || c.leader(keys.MetaRangeID).id != l.id {
		t.Error("leadership moved while the followers counted their ticks in batches")
	}
}
