package hlc

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// PhysicalClock is the source of wall time a Clock reads. raft.Clock
// satisfies it, so the deterministic simulator's clock drives both.
type PhysicalClock interface {
	// Now returns the current wall time.
	Now() time.Time
}

// SystemClock is the machine's wall clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// DefaultMaxOffset is the maximum clock offset a Clock tolerates unless
// told otherwise (docs/versions.md says why this value).
const DefaultMaxOffset = 500 * time.Millisecond

// ErrClockOffset is wrapped by every *OffsetError.
var ErrClockOffset = errors.New("hlc: remote clock reading beyond the maximum clock offset")

// OffsetError reports a remote reading that Update refused: it was more
// than MaxOffset ahead of the local physical clock.
type OffsetError struct {
	Remote    Timestamp     // the refused reading
	Physical  int64         // the local physical clock when it was refused
	MaxOffset time.Duration // the limit in force
}

// Offset is how far the remote reading was ahead of the local physical
// clock.
func (e *OffsetError) Offset() time.Duration { return time.Duration(e.Remote.WallTime - e.Physical) }

func (e *OffsetError) Error() string {
	return fmt.Sprintf("%v: remote %s is %v ahead of the local physical clock %d (maximum offset %v)",
		ErrClockOffset, e.Remote, e.Offset(), e.Physical, e.MaxOffset)
}

// Unwrap lets errors.Is(err, ErrClockOffset) match.
func (e *OffsetError) Unwrap() error { return ErrClockOffset }

// Clock issues hybrid-logical timestamps: each Now is above every earlier
// Now and every reading accepted by Update, and its wall time never runs
// behind the physical clock. Safe for concurrent use.
type Clock struct {
	physical  PhysicalClock
	maxOffset time.Duration

	mu   sync.Mutex
	last Timestamp // the highest timestamp issued or accepted
}

// NewClock returns a Clock over physical that refuses remote readings more
// than maxOffset ahead of it. maxOffset must be positive.
func NewClock(physical PhysicalClock, maxOffset time.Duration) *Clock {
	if physical == nil {
		panic("hlc.NewClock: nil physical clock")
	}
	if maxOffset <= 0 {
		panic(fmt.Sprintf("hlc.NewClock: maximum offset %v must be positive", maxOffset))
	}
	return &Clock{physical: physical, maxOffset: maxOffset}
}

// MaxOffset returns the maximum clock offset the clock tolerates.
func (c *Clock) MaxOffset() time.Duration { return c.maxOffset }

// PhysicalNow returns the physical clock's reading in Unix nanoseconds
// (never below 0).
func (c *Clock) PhysicalNow() int64 {
	return max(c.physical.Now().UnixNano(), 0)
}

// Now returns a timestamp above every timestamp the clock issued or
// accepted before, with a wall time at least the physical clock's.
func (c *Clock) Now() Timestamp {
	pt := c.PhysicalNow()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nowLocked(pt)
}

// nowLocked is Now at physical time pt. REQUIRES: mu.
func (c *Clock) nowLocked(pt int64) Timestamp {
	if pt > c.last.WallTime {
		c.last = Timestamp{WallTime: pt}
	} else {
		// The physical clock has not moved past the last timestamp (same
		// nanosecond, a backwards step, or a remote reading ahead): count
		// logically. At the logical limit the wall time moves on by one
		// nanosecond, which keeps order and drifts by at most that.
		c.last = c.last.Next()
	}
	return c.last
}

// NowN issues n consecutive timestamps at once (n >= 1): first is what
// Now would return, and the others are first.Next(), its Next(), and so
// on up to last, all above every timestamp issued or accepted before. A
// timestamp oracle answers a batch of requests with one range this way.
func (c *Clock) NowN(n int) (first, last Timestamp) {
	if n < 1 {
		panic(fmt.Sprintf("hlc.Clock.NowN(%d)", n))
	}
	pt := c.PhysicalNow()
	c.mu.Lock()
	defer c.mu.Unlock()
	first = c.nowLocked(pt)
	last = first
	for i := 1; i < n; i++ {
		last = last.Next()
	}
	c.last = last
	return first, last
}

// Last returns the highest timestamp the clock issued or accepted, without
// issuing a new one.
func (c *Clock) Last() Timestamp {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

// Update accepts a timestamp read from another node (a request, a
// response, a Raft command), so that every later Now is above it. A
// reading more than MaxOffset ahead of the local physical clock is refused
// with an *OffsetError and changes nothing: the caller reports it and does
// not serve the request that carried it. A reading that is not a valid
// timestamp, or is MaxTimestamp (no Now could be above it), is refused
// with ErrMalformed.
func (c *Clock) Update(remote Timestamp) error {
	if !remote.Valid() || remote == MaxTimestamp {
		return fmt.Errorf("%w: remote reading %s", ErrMalformed, remote)
	}
	pt := c.PhysicalNow()
	if remote.WallTime > pt && remote.WallTime-pt > int64(c.maxOffset) {
		return &OffsetError{Remote: remote, Physical: pt, MaxOffset: c.maxOffset}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last = c.last.Forward(remote)
	return nil
}
