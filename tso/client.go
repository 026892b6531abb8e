package tso

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shaledb/shale/hlc"
)

// Transport reaches the oracle wherever it runs, following meta's
// leadership when it moves (retrying until ctx ends on "not the oracle").
type Transport interface {
	// Timestamps asks the oracle for n consecutive timestamps.
	Timestamps(ctx context.Context, n int) (first, last hlc.Timestamp, err error)
	// Observe moves the oracle past ts.
	Observe(ctx context.Context, ts hlc.Timestamp) error
}

// CallTimeout bounds one call of a Client to the oracle, retries
// included; every request sharing it fails with its error.
const CallTimeout = 5 * time.Second

// Client is a node's batching client of the oracle. Safe for concurrent
// use.
type Client struct {
	t Transport
	// clock is the node's clock: moved past every timestamp the oracle
	// hands out, so that nothing the node does later is below one.
	clock   *hlc.Clock
	refused func(*hlc.OffsetError)

	calls    atomic.Uint64 // Timestamps calls made
	observes atomic.Uint64 // Observe calls made

	mu       sync.Mutex
	waiting  []*waiter
	inFlight bool
	// observing waits for the next Observe call; observeInFlight says
	// one is out.
	observing       []*waiter
	observeInFlight bool
	// high is the highest timestamp the oracle is known to be past: one
	// it issued to this client, or one it observed for it.
	high hlc.Timestamp
}

type waiter struct {
	ts   hlc.Timestamp
	err  error
	done chan struct{}
}

// NewClient returns a client over t that moves clock forward with each
// answer; refused (may be nil) is told of each answer clock refuses.
func NewClient(t Transport, clock *hlc.Clock, refused func(*hlc.OffsetError)) *Client {
	if t == nil || clock == nil {
		panic("tso.NewClient: Transport and Clock are required")
	}
	return &Client{t: t, clock: clock, refused: refused}
}

// Now returns a timestamp the oracle issued after Now was called. It
// waits for the call in flight, if any, to end, and shares the next call
// with every other request waiting then.
func (c *Client) Now(ctx context.Context) (hlc.Timestamp, error) {
	w := &waiter{done: make(chan struct{})}
	c.mu.Lock()
	c.waiting = append(c.waiting, w)
	if !c.inFlight {
		c.inFlight = true
		go c.run()
	}
	c.mu.Unlock()
	select {
	case <-w.done:
		return w.ts, w.err
	case <-ctx.Done():
		// The call it was part of goes on; its timestamp is wasted.
		return hlc.Timestamp{}, fmt.Errorf("tso: waiting for a timestamp: %w", ctx.Err())
	}
}

// run makes calls until nobody waits: each call takes everyone waiting
// when it starts.
func (c *Client) run() {
	for {
		c.mu.Lock()
		batch := c.waiting
		c.waiting = nil
		if len(batch) == 0 {
			c.inFlight = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		for len(batch) > 0 {
			n := min(len(batch), MaxCount/2)
			c.call(batch[:n])
			batch = batch[n:]
		}
	}
}

// call gets one timestamp for each of ws and hands them out.
//
// It asks for twice as many and hands out the lower half: the upper half
// is issued to this client and used by nobody, so the oracle is past it
// (high) without an Observe. A write applies at max(its timestamp, the
// range's frontier + 1 logical tick), so writes that apply out of their
// timestamps' order land up to a tick per write above the batch's last
// handed-out timestamp; with the spare half those versions need no
// Observe call before they are acknowledged (a call for about a tenth of
// the puts at 64 clients without it). Logical ticks cost nothing.
func (c *Client) call(ws []*waiter) {
	ctx, cancel := context.WithTimeout(context.Background(), CallTimeout)
	first, last, err := c.t.Timestamps(ctx, 2*len(ws))
	cancel()
	c.calls.Add(1)
	if err == nil {
		want := first
		for i := 1; i < 2*len(ws); i++ {
			want = want.Next()
		}
		if want != last {
			err = fmt.Errorf("tso: the oracle answered [%s, %s] for %d timestamps", first, last, 2*len(ws))
		}
	}
	if err == nil {
		err = c.clock.Update(last)
		c.report(err)
	}
	if err == nil {
		c.mu.Lock()
		c.high = c.high.Forward(last)
		c.mu.Unlock()
	}
	ts := first
	for _, w := range ws {
		w.ts, w.err = ts, err
		if err != nil {
			w.ts = hlc.Timestamp{}
		}
		ts = ts.Next()
		close(w.done)
	}
}

// Observe makes sure every timestamp the oracle issues after it returns
// is above ts. A ts at or below one the oracle already issued to this
// client (or observed for it) needs no call. Like Now, concurrent
// Observes share calls: one is in flight at a time, and the next
// observes the highest timestamp of every request waiting when it
// starts, which answers each of them.
func (c *Client) Observe(ctx context.Context, ts hlc.Timestamp) error {
	c.mu.Lock()
	if ts.LessEq(c.high) {
		c.mu.Unlock()
		return nil
	}
	w := &waiter{ts: ts, done: make(chan struct{})}
	c.observing = append(c.observing, w)
	if !c.observeInFlight {
		c.observeInFlight = true
		go c.runObserves()
	}
	c.mu.Unlock()
	select {
	case <-w.done:
		return w.err
	case <-ctx.Done():
		// The call it was part of goes on.
		return fmt.Errorf("tso: waiting to observe %s: %w", ts, ctx.Err())
	}
}

// runObserves makes Observe calls until nobody waits: each call takes
// everyone waiting when it starts; those the oracle is already known to
// be past by then need none.
func (c *Client) runObserves() {
	for {
		c.mu.Lock()
		batch := c.observing
		c.observing = nil
		if len(batch) == 0 {
			c.observeInFlight = false
			c.mu.Unlock()
			return
		}
		var top hlc.Timestamp
		for _, w := range batch {
			top = top.Forward(w.ts)
		}
		covered := top.LessEq(c.high)
		c.mu.Unlock()
		var err error
		if !covered {
			ctx, cancel := context.WithTimeout(context.Background(), CallTimeout)
			c.observes.Add(1)
			err = c.t.Observe(ctx, top)
			cancel()
			if err == nil {
				c.mu.Lock()
				c.high = c.high.Forward(top)
				c.mu.Unlock()
			}
		}
		for _, w := range batch {
			w.err = err
			close(w.done)
		}
	}
}

func (c *Client) report(err error) {
	if oe, ok := err.(*hlc.OffsetError); ok && c.refused != nil {
		c.refused(oe)
	}
}

// Waiting returns the number of requests queued for the next call (not
// those the call in flight serves).
func (c *Client) Waiting() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiting)
}

// ObservesWaiting returns the number of Observes queued for the next
// call (not those the call in flight serves).
func (c *Client) ObservesWaiting() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.observing)
}

// Calls returns the number of Timestamps calls the client has made, and
// of Observe calls.
func (c *Client) Calls() (timestamps, observes uint64) {
	return c.calls.Load(), c.observes.Load()
}
