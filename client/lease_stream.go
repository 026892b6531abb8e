package client

import (
	"context"
	"sync"

	"github.com/shaledb/shale/api/kvpb"
)

// A client carries all its leases' renewals on one KeepAlive stream per
// endpoint, as etcd's client does on one stream per connection: every
// KeepAlive and KeepAliveOnce sends its request on the endpoint's shared
// stream and waits for the answer, which a receiver routes back by lease
// ID (a stream answers in order, so the waiters of one lease are served
// first come, first served). The node renews what a stream has queued in
// one pass (node/lease_server.go). A stream that breaks fails every
// request waiting on it (the caller's retry picks an endpoint and opens
// a new one); an idle stream stays open until the client closes.

// leaseStreams holds the client's shared KeepAlive streams by endpoint.
type leaseStreams struct {
	mu     sync.Mutex
	byAddr map[string]*leaseStream
	closed bool
}

// leaseStream is one endpoint's shared KeepAlive stream.
type leaseStream struct {
	streams *leaseStreams
	addr    string
	stream  kvpb.Lease_KeepAliveClient
	cancel  context.CancelFunc

	mu sync.Mutex // orders Sends with their waiters; guards the fields below
	// waiting holds, per lease, the requests sent and not yet answered,
	// in the order they were sent.
	waiting map[uint64][]chan leaseAnswer
	err     error // why the stream broke; nil while it works
}

type leaseAnswer struct {
	resp *kvpb.LeaseKeepAliveResponse
	err  error
}

// renewShared renews lease id on e's shared stream (opened if there is
// none) and waits for the answer or ctx.
func (c *Client) renewShared(ctx context.Context, e *endpoint, id LeaseID) (*kvpb.LeaseKeepAliveResponse, error) {
	s, err := c.leaseStreams.get(c, e)
	if err != nil {
		return nil, err
	}
	ch := make(chan leaseAnswer, 1)
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return nil, err
	}
	s.waiting[uint64(id)] = append(s.waiting[uint64(id)], ch)
	// A failed Send says only that the stream is gone; the receiver
	// learns why from Recv and answers every waiter, this one included.
	_ = s.stream.Send(&kvpb.LeaseKeepAliveRequest{Id: uint64(id)})
	s.mu.Unlock()
	select {
	case a := <-ch:
		return a.resp, a.err
	case <-ctx.Done():
		// The answer, if it comes, goes to ch's buffer: it keeps the
		// waiters of this lease in order.
		return nil, ctx.Err()
	}
}

// get returns e's shared stream, opening it if there is none.
func (ls *leaseStreams) get(c *Client, e *endpoint) (*leaseStream, error) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.closed {
		return nil, &Error{Op: "KeepAlive", Msg: "the client is closed", kind: ErrClosed}
	}
	if s := ls.byAddr[e.addr]; s != nil {
		return s, nil
	}
	sctx, cancel := context.WithCancel(context.Background())
	stream, err := c.lease(e).KeepAlive(sctx)
	if err != nil {
		cancel()
		return nil, err
	}
	if ls.byAddr == nil {
		ls.byAddr = map[string]*leaseStream{}
	}
	s := &leaseStream{streams: ls, addr: e.addr, stream: stream, cancel: cancel, waiting: map[uint64][]chan leaseAnswer{}}
	ls.byAddr[e.addr] = s
	go s.receive()
	return s, nil
}

// receive routes the stream's answers to their waiters until it breaks,
// then fails every waiter and drops the stream.
func (s *leaseStream) receive() {
	for {
		resp, err := s.stream.Recv()
		if err != nil {
			s.fail(err)
			return
		}
		s.mu.Lock()
		q := s.waiting[resp.GetId()]
		var ch chan leaseAnswer
		if len(q) > 0 {
			ch = q[0]
			if len(q) == 1 {
				delete(s.waiting, resp.GetId())
			} else {
				s.waiting[resp.GetId()] = q[1:]
			}
		}
		s.mu.Unlock()
		if ch != nil {
			ch <- leaseAnswer{resp: resp}
		}
	}
}

func (s *leaseStream) fail(err error) {
	s.streams.mu.Lock()
	if s.streams.byAddr[s.addr] == s {
		delete(s.streams.byAddr, s.addr)
	}
	s.streams.mu.Unlock()
	s.mu.Lock()
	s.err = err
	waiting := s.waiting
	s.waiting = nil
	s.mu.Unlock()
	for _, q := range waiting {
		for _, ch := range q {
			ch <- leaseAnswer{err: err}
		}
	}
	s.cancel()
}

// closeAll ends every shared stream (Client.Close).
func (ls *leaseStreams) closeAll() {
	ls.mu.Lock()
	ls.closed = true
	streams := ls.byAddr
	ls.byAddr = nil
	ls.mu.Unlock()
	for _, s := range streams {
		s.cancel()
	}
}
