package raft

import (
	"testing"
	"time"
)

// TestAwakeSinceRestartsAfterAPause: ticks a tick apart keep the awake
// count; a gap of more than awakeGapTicks ticks (the node was paused)
// restarts it at the tick after the gap.
func TestAwakeSinceRestartsAfterAPause(t *testing.T) {
	s := &Store{cfg: Config{TickInterval: 100 * time.Millisecond}}
	if !s.AwakeSince().IsZero() {
		t.Fatal("awake before the first tick")
	}
	t0 := time.Unix(1000, 0)
	at := t0
	for i := 0; i < 10; i++ {
		s.noteTickTimeLocked(at)
		at = at.Add(s.cfg.TickInterval)
	}
	// A late tick within the gap is no pause.
	at = at.Add(awakeGapTicks*s.cfg.TickInterval - s.cfg.TickInterval)
	s.noteTickTimeLocked(at)
	if got := s.AwakeSince(); !got.Equal(t0) {
		t.Fatalf("awake since %v after ticks without a pause, want %v", got, t0)
	}
	at = at.Add(awakeGapTicks*s.cfg.TickInterval + time.Millisecond)
	s.noteTickTimeLocked(at)
	if got := s.AwakeSince(); !got.Equal(at) {
		t.Fatalf("awake since %v after a pause, want %v", got, at)
	}
}
