package client

import (
	"context"
	"sync"
)

// Read timestamps shared by transactions that start together.
//
// A transaction's read timestamp R must be an oracle timestamp issued
// after its first read began (docs/transactions.md, "What a transaction
// sees"): any Begin sent after that moment gives one. So the client's
// transactions share their Begin calls: at most one is in flight, and
// the transactions that ask meanwhile wait for the next one, sent when
// it returns, all of them answered by it. Alone, a transaction sends its
// own at once; under load, one call answers every transaction that
// started during the previous one (at 64 clients, several per call),
// instead of one call each.

// beginShare is the client's shared Begin calls.
type beginShare struct {
	mu       sync.Mutex
	inflight bool
	next     *beginCall // the call the next askers wait for, not sent yet
}

// beginCall is one Begin call and its answer, shared.
type beginCall struct {
	done chan struct{}
	ts   Timestamp
	err  error
}

// sharedBegin returns a read timestamp from a Begin call sent after it
// was asked for.
func (c *Client) sharedBegin(ctx context.Context) (Timestamp, error) {
	s := &c.begins
	s.mu.Lock()
	b := s.next
	if b == nil {
		b = &beginCall{done: make(chan struct{})}
		s.next = b
	}
	if !s.inflight {
		s.inflight, s.next = true, nil
		go c.sendBegin(b)
	}
	s.mu.Unlock()
	select {
	case <-b.done:
		return b.ts, b.err
	case <-ctx.Done():
		return Timestamp{}, contextEnded("TxnBegin", "", ctx.Err())
	}
}

// sendBegin sends b, then the call that waited behind it, if any.
func (c *Client) sendBegin(b *beginCall) {
	for b != nil {
		ctx, cancel := context.WithTimeout(context.Background(), c.opts.RequestTimeout)
		b.ts, b.err = c.txnBegin(ctx)
		cancel()
		close(b.done)
		s := &c.begins
		s.mu.Lock()
		b, s.next = s.next, nil
		if b == nil {
			s.inflight = false
		}
		s.mu.Unlock()
	}
}
