package raft

import (
	"context"
	"testing"
	"time"

	"github.com/shaledb/shale/raft/keys"
)

// TestCampaignTogetherForASilentLeadersRanges: node 1 leads meta and the
// user range and stops; when a node's replica of one of them starts an
// election, node 1 not being live, its replica of the other campaigns
// too, at once rather than on its own random draw (campaign_together.go).
// The election timeout is 5 s (randomized up to 10 s), so that the
// second replica's own draw is unlikely to fall within the test's second
// of the first's.
func TestCampaignTogetherForASilentLeadersRanges(t *testing.T) {
	const electionTicks = 250 // x testTick: 5 s
	c := newTestCluster(t, 3, func(cfg *Config) {
		cfg.ElectionTicks = electionTicks
		cfg.DisableQuiescence = true
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ranges := []uint64{keys.MetaRangeID, keys.FirstUserRangeID}
	for _, id := range ranges {
		if l := c.leader(id); l.id != 1 {
			if err := l.store.TransferLeader(ctx, id, 1); err != nil {
				t.Fatalf("moving range %d's leadership to node 1: %v", id, err)
			}
		}
	}
	waitFor(t, 10*time.Second, "nodes 2 and 3 following node 1 in both ranges", func() bool {
		for _, n := range []uint64{2, 3} {
			for _, id := range ranges {
				r, err := c.storeOf(n).Replica(id)
				if err != nil || r.LeaderNodeID() != 1 || r.Status().State != "follower" {
					return false
				}
			}
		}
		return true
	})
	c.stop(1)
	// A range has moved once a replica of it on node 2 or 3 no longer
	// follows node 1: it campaigns, or it heard of a campaign.
	moved := func(id uint64) bool {
		for _, n := range []uint64{2, 3} {
			r, err := c.storeOf(n).Replica(id)
			if err == nil && (r.Status().State != "follower" || r.LeaderNodeID() != 1) {
				return true
			}
		}
		return false
	}
	// The first range's election starts on its own draw, 5-10 s after
	// node 1 went silent; the other's follows at once rather than on
	// its own draws.
	waitFor(t, 2*electionTicks*testTick+5*time.Second, "an election for either range", func() bool {
		return moved(ranges[0]) || moved(ranges[1])
	})
	first := time.Now()
	waitFor(t, time.Second, "the other range's election starting with the first", func() bool {
		return moved(ranges[0]) && moved(ranges[1])
	})
	t.Logf("the two ranges' elections started %v apart", time.Since(first).Round(time.Millisecond))
}
