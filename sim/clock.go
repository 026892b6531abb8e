package sim

import (
	"container/heap"
	"sync"
	"time"

	"github.com/shaledb/shale/raft"
)

// Clock is the simulated clock every node's Store reads (raft.Clock). Time
// stands still until the simulator advances it: Advance moves it forward
// without firing anything, FireNext fires the earliest timer and moves the
// clock to its time. Timers that fall due at the same time fire in the
// order they were set.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	seq    uint64
	timers timerHeap
}

var _ raft.Clock = (*Clock)(nil)

// epoch is the simulated time at which every run starts.
var epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// NewClock returns a clock at the simulation epoch.
func NewClock() *Clock { return &Clock{now: epoch} }

type simTimer struct {
	c      *Clock
	when   time.Time
	seq    uint64
	ch     chan time.Time // After and tickers
	f      func()         // AfterFunc
	period time.Duration  // tickers
	index  int            // in the heap; -1 once removed
}

type timerHeap []*simTimer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if !h[i].when.Equal(h[j].when) {
		return h[i].when.Before(h[j].when)
	}
	return h[i].seq < h[j].seq
}
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *timerHeap) Push(x any) {
	t := x.(*simTimer)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	*h = old[:len(old)-1]
	t.index = -1
	return t
}

// Now implements raft.Clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *Clock) add(t *simTimer, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t.c, t.seq, t.when = c, c.seq, c.now.Add(max(d, 0))
	heap.Push(&c.timers, t)
}

func (c *Clock) remove(t *simTimer) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.index < 0 {
		return false
	}
	heap.Remove(&c.timers, t.index)
	return true
}

// After implements raft.Clock.
func (c *Clock) After(d time.Duration) <-chan time.Time {
	t := &simTimer{ch: make(chan time.Time, 1)}
	c.add(t, d)
	return t.ch
}

// NewTicker implements raft.Clock.
func (c *Clock) NewTicker(d time.Duration) raft.Ticker {
	t := &simTimer{ch: make(chan time.Time, 1), period: d}
	c.add(t, d)
	return simTicker{t}
}

// AfterFunc implements raft.Clock.
func (c *Clock) AfterFunc(d time.Duration, f func()) raft.Timer {
	t := &simTimer{f: f}
	c.add(t, d)
	return simAfterFunc{t}
}

type simTicker struct{ t *simTimer }

func (s simTicker) C() <-chan time.Time { return s.t.ch }
func (s simTicker) Stop()               { s.t.c.remove(s.t) }

type simAfterFunc struct{ t *simTimer }

func (s simAfterFunc) Stop() bool { return s.t.c.remove(s.t) }

// NextTimer returns when the earliest timer falls due.
func (c *Clock) NextTimer() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.timers) == 0 {
		return time.Time{}, false
	}
	return c.timers[0].when, true
}

// Advance moves the clock forward to t (never back).
func (c *Clock) Advance(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.now) {
		c.now = t
	}
}

// FireNext fires the earliest timer, moving the clock to its time: a
// channel timer receives the time (a ticker drops a tick its reader has
// not taken, as time.Ticker does), an AfterFunc's function starts in its
// own goroutine. The caller then lets the woken goroutines run.
func (c *Clock) FireNext() {
	c.mu.Lock()
	if len(c.timers) == 0 {
		c.mu.Unlock()
		return
	}
	t := heap.Pop(&c.timers).(*simTimer)
	if t.when.After(c.now) {
		c.now = t.when
	}
	now := c.now
	if t.period > 0 {
		c.seq++
		t.seq, t.when = c.seq, t.when.Add(t.period)
		heap.Push(&c.timers, t)
	}
	c.mu.Unlock()
	if t.f != nil {
		go t.f()
		return
	}
	select {
	case t.ch <- now:
	default:
	}
}
