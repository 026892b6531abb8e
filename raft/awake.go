package raft

import "time"

// Since when the node has run without a pause, for callers that judge
// their peers by their silence (the node's no-quorum check): a node that
// was itself paused (SIGSTOP, a stalled VM) has stale contact times
// through no fault of its peers. The ticker notices a gap of more than
// awakeGapTicks ticks between two of its ticks and restarts the count,
// so that nobody needs a timer of its own to watch for pauses.

// awakeGapTicks is the longest gap between two ticks, in ticks, that is
// not taken for a pause.
const awakeGapTicks = 5

// noteTickTimeLocked restarts the awake count if the last tick was more
// than awakeGapTicks ticks before now, or there was none.
// REQUIRES: s.tick.mu.
func (s *Store) noteTickTimeLocked(now time.Time) {
	last := s.tick.lastAt
	s.tick.lastAt = now
	if last.IsZero() || now.Sub(last) > awakeGapTicks*s.cfg.TickInterval {
		s.awakeSince.Store(now.UnixNano())
	}
}

// AwakeSince returns since when the store's ticker has run without a
// pause of more than awakeGapTicks ticks; zero before its first tick.
func (s *Store) AwakeSince() time.Time {
	if ns := s.awakeSince.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}
