package node

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/shaledb/shale/hlc"
)

// TestClockGuardNoticesSteps: the guard's check reads the machine's clock
// once for both its monotonic and its wall part; a step of the physical
// clock beyond the tolerated offset, either way, still keeps the clock
// from serving, and a step within it does not.
func TestClockGuardNoticesSteps(t *testing.T) {
	for _, tc := range []struct {
		name   string
		step   time.Duration
		refuse bool
	}{
		{"ahead", time.Second, true},
		{"behind", -time.Second, true},
		{"within the tolerance", 10 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &Node{log: slog.New(slog.DiscardHandler)}
			n.initClock()
			if err := n.clockGuard.check(); err != nil {
				t.Fatalf("first check: %v", err)
			}
			n.physClock.offset.Store(int64(tc.step))
			err := n.clockGuard.check()
			if got := err != nil; got != tc.refuse {
				t.Fatalf("check after a step of %v: %v; want refused %v", tc.step, err, tc.refuse)
			}
			if err != nil && !errors.Is(err, hlc.ErrClockOffset) {
				t.Fatalf("check after a step of %v: %v, not a clock offset error", tc.step, err)
			}
		})
	}
}

// BenchmarkClockGuardCheck: the check every request that needs a
// timestamp makes.
func BenchmarkClockGuardCheck(b *testing.B) {
	n := &Node{log: slog.New(slog.DiscardHandler)}
	n.initClock()
	for b.Loop() {
		if err := n.clockGuard.check(); err != nil {
			b.Fatal(err)
		}
	}
}
