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
			n := min(len(batch), MaxCount)
			c.call(batch[:n])
			batch = batch[n:]
		}
	}
}

// call gets one timestamp for each of ws and hands them out.
func (c *Client) call(ws []*waiter) {
	ctx, cancel := context.WithTimeout(context.Background(), CallTimeout)
	first, last, err := c.t.Timestamps(ctx, len(ws))
	cancel()
	c.calls.Add(1)
	if err == nil {
		want := first
		for i := 1; i < len(ws); i++ {
			want = want.Next()
		}
		if want != last {
			err = fmt.Errorf("tso: the oracle answered [%s, %s] for %d timestamps", first, last, len(ws))
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
// client (or observed for it) needs no call.
func (c *Client) Observe(ctx context.Context, ts hlc.Timestamp) error {
	c.mu.Lock()
	covered := ts.LessEq(c.high)
	c.mu.Unlock()
	if covered {
		return nil
	}
	c.observes.Add(1)
	if err := c.t.Observe(ctx, ts); err != nil {
		return err
	}
	c.mu.Lock()
	c.high = c.high.Forward(ts)
	c.mu.Unlock()
	return nil
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

// Calls returns the number of Timestamps calls the client has made, and
// of Observe calls.
func (c *Client) Calls() (timestamps, observes uint64) {
	return c.calls.Load(), c.observes.Load()
}
