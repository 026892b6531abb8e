package raft

import (
	"context"
	"fmt"

	"golang.org/x/sync/semaphore"
)

// Incoming snapshots are staged in memory before they are applied (up to
// MaxSnapshotBytes each). Config.SnapshotMemoryBytes bounds what all of
// them hold at once: each chunk takes its bytes from a node-wide
// allowance before it is decoded and gives them back when its snapshot
// has been applied or refused. A receiver that finds the allowance taken
// stops reading, so gRPC's flow control holds the sender back until room
// is made. A snapshot larger than the whole allowance takes all of it and
// goes on alone, so no range is kept from catching up for good.

// snapshotMemory is the allowance of incoming snapshots; nil: unbounded.
type snapshotMemory struct {
	sem   *semaphore.Weighted
	limit int64
}

func newSnapshotMemory(limit int64) *snapshotMemory {
	if limit <= 0 {
		return nil
	}
	return &snapshotMemory{sem: semaphore.NewWeighted(limit), limit: limit}
}

// stagedSnapshot is what one incoming snapshot holds of the allowance.
type stagedSnapshot struct {
	m    *snapshotMemory
	held int64
}

// take takes n more bytes of the allowance for the snapshot of rangeID
// (clamped so that the snapshot never holds more than all of it), waiting
// until they are free or ctx ends.
func (st *stagedSnapshot) take(ctx context.Context, rangeID uint64, n int64) error {
	if st.m == nil {
		return nil
	}
	want := min(n, st.m.limit-st.held)
	if want <= 0 {
		return nil
	}
	if err := st.m.sem.Acquire(ctx, want); err != nil {
		return fmt.Errorf("raft: snapshot of range %d: waiting for the memory of incoming snapshots: %w", rangeID, err)
	}
	st.held += want
	return nil
}

// release gives back everything the snapshot took.
func (st *stagedSnapshot) release() {
	if st.m != nil && st.held > 0 {
		st.m.sem.Release(st.held)
		st.held = 0
	}
}
