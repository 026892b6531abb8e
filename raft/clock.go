package raft

import (
	"context"
	"time"
)

// Clock is the replication layer's only source of time: Raft ticks, the
// leader lease, proposer timestamps, the pacing of background work and the
// waits of the retry loops all read it. The Store takes it from its caller
// (Config.Clock), so that the same code runs on the wall clock in
// production and on a simulated clock, driven by a seed, under a
// deterministic simulator. No replication code calls time.Now, time.After
// or their kin outside this file (tests/clock_test.go enforces it).
//
// A Clock must be safe for concurrent use. Now must be monotonic for the
// lease (time.Now's readings are: they carry a monotonic reading).
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// After returns a channel that receives the time once d has passed.
	After(d time.Duration) <-chan time.Time
	// NewTicker returns a ticker firing every d (d > 0).
	NewTicker(d time.Duration) Ticker
	// AfterFunc calls f in its own goroutine once d has passed, unless the
	// returned timer is stopped first.
	AfterFunc(d time.Duration, f func()) Timer
}

// Ticker is a Clock's periodic timer (time.Ticker's shape).
type Ticker interface {
	// C returns the channel the ticks arrive on.
	C() <-chan time.Time
	// Stop turns the ticker off; no more ticks are sent.
	Stop()
}

// Timer is a Clock's one-shot timer for AfterFunc.
type Timer interface {
	// Stop prevents the timer from firing; it reports whether it did.
	Stop() bool
}

// WallClock is the Clock of the machine: the time package.
type WallClock struct{}

var _ Clock = WallClock{}

// Now implements Clock.
func (WallClock) Now() time.Time { return time.Now() }

// After implements Clock.
func (WallClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// NewTicker implements Clock.
func (WallClock) NewTicker(d time.Duration) Ticker { return wallTicker{time.NewTicker(d)} }

// AfterFunc implements Clock.
func (WallClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

type wallTicker struct{ t *time.Ticker }

func (w wallTicker) C() <-chan time.Time { return w.t.C }
func (w wallTicker) Stop()               { w.t.Stop() }

// since is Clock's time.Since.
func since(c Clock, t time.Time) time.Duration { return c.Now().Sub(t) }

// now is the Store's clock reading.
func (s *Store) now() time.Time { return s.cfg.Clock.Now() }

// after is the Store's clock's After.
func (s *Store) after(d time.Duration) <-chan time.Time { return s.cfg.Clock.After(d) }

// withTimeout is context.WithTimeout on the Store's clock. On the wall
// clock it is exactly context.WithTimeout; on another clock the context is
// canceled (with context.DeadlineExceeded as its cause) when that clock
// says d has passed.
func (s *Store) withTimeout(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, wall := s.cfg.Clock.(WallClock); wall {
		return context.WithTimeout(parent, d)
	}
	ctx, cancel := context.WithCancelCause(parent)
	t := s.cfg.Clock.AfterFunc(d, func() { cancel(context.DeadlineExceeded) })
	return ctx, func() {
		t.Stop()
		cancel(context.Canceled)
	}
}
