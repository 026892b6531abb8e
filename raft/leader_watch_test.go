package raft

import (
	"testing"
	"time"

	"github.com/shaledb/shale/raft/keys"
)

// TestLeaderWatchFiresOnMove: a follower's leader-watch context is
// cancelled when leadership moves, and the next one names the new leader.
func TestLeaderWatchFiresOnMove(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	ctx := ctxT(t, 30*time.Second)
	rangeID := keys.FirstUserRangeID
	l := c.leader(rangeID)
	follower := l.id%3 + 1
	r, err := c.storeOf(follower).Replica(rangeID)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the follower knowing the leader", func() bool {
		return r.LeaderNodeID() == l.id
	})
	known, moved := r.LeaderWatch()
	if known != l.id {
		t.Fatalf("LeaderWatch names node %d, want the leader %d", known, l.id)
	}
	if moved.Err() != nil {
		t.Fatal("the watch of a leader that has not moved is already cancelled")
	}
	if err := l.store.TransferLeader(ctx, rangeID, follower); err != nil {
		t.Fatalf("TransferLeader to node %d: %v", follower, err)
	}
	select {
	case <-moved.Done():
	case <-ctx.Done():
		t.Fatal("the watch was not cancelled when leadership moved")
	}
	waitFor(t, 10*time.Second, "the follower leading", func() bool {
		return r.LeaderNodeID() == follower
	})
	if now, _ := r.LeaderWatch(); now != follower {
		t.Fatalf("LeaderWatch names node %d after the move, want %d", now, follower)
	}
}
