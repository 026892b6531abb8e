package raft

import (
	"errors"
	"testing"
	"time"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/raft/keys"
)

// TestChangeReplicasAtRefusesAStaleDecision: a change decided from an older
// descriptor than the range's does nothing. Placement decided "remove the
// learner on node N" from one view and applied it to a newer one where N's
// replica had become a voter, leaving a range at 2 voters
// (TestNodeRemoveCoordinatesWithPlacement caught it).
func TestChangeReplicasAtRefusesAStaleDecision(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	ctx := ctxT(t, 30*time.Second)
	l := c.leader(keys.FirstUserRangeID)
	old := l.store.mustReplica(keys.FirstUserRangeID).Descriptor()
	var victim uint64
	for _, id := range c.ids() {
		if id != l.id {
			victim = id
			break
		}
	}
	// The range moves on: the victim's replica goes and comes back.
	if _, err := l.store.ChangeReplicas(ctx, keys.FirstUserRangeID, []*kvpb.ReplicaChange{{Kind: kvpb.ReplicaChange_REMOVE, NodeId: victim}}); err != nil {
		t.Fatal(err)
	}
	cur, err := l.store.ChangeReplicas(ctx, keys.FirstUserRangeID, []*kvpb.ReplicaChange{{Kind: kvpb.ReplicaChange_ADD_VOTER, NodeId: victim}})
	if err != nil {
		t.Fatal(err)
	}
	// A removal decided at the old generation is refused, and changes
	// nothing.
	_, err = l.store.ChangeReplicasAt(ctx, keys.FirstUserRangeID, old.GetGeneration(), []*kvpb.ReplicaChange{{Kind: kvpb.ReplicaChange_REMOVE, NodeId: victim}})
	if !errors.Is(err, ErrGenerationChanged) {
		t.Fatalf("a change decided at generation %d applied at %d: err = %v", old.GetGeneration(), cur.GetGeneration(), err)
	}
	if now := l.store.mustReplica(keys.FirstUserRangeID).Descriptor(); now.GetGeneration() != cur.GetGeneration() {
		t.Fatalf("the refused change moved the range from generation %d to %d", cur.GetGeneration(), now.GetGeneration())
	}
	// At the current generation it applies.
	if _, err := l.store.ChangeReplicasAt(ctx, keys.FirstUserRangeID, cur.GetGeneration(), []*kvpb.ReplicaChange{{Kind: kvpb.ReplicaChange_REMOVE, NodeId: victim}}); err != nil {
		t.Fatal(err)
	}
}
