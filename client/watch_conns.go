package client

import (
	"errors"
	"sync"

	"google.golang.org/grpc"
)

// Watch streams and connections: each watch is a gRPC stream of its own,
// and a node allows a bounded number of streams per connection (256 by
// default, --max-streams-per-conn); a stream past the bound waits for
// room. So the endpoint's own connection carries up to watchesPerConn
// watches, shared with the client's other calls, and further watches to
// the same node go over extra connections of watchesPerConn each, dialled
// as needed and kept until the client closes.
const watchesPerConn = 128

// watchConns are the extra connections of watch streams, by address.
type watchConns struct {
	mu    sync.Mutex
	conns map[string][]*watchConn
	// onMain counts the watches on each endpoint's own connection.
	onMain map[string]int
}

type watchConn struct {
	cc      *grpc.ClientConn
	streams int
}

// watchConn returns the connection a new watch to e goes over and the
// function that gives its slot back when the watch's stream ends.
func (c *Client) watchConn(e *endpoint) (*grpc.ClientConn, func(), error) {
	w := &c.watches
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.onMain == nil {
		w.onMain = map[string]int{}
		w.conns = map[string][]*watchConn{}
	}
	if w.onMain[e.addr] < watchesPerConn {
		w.onMain[e.addr]++
		return e.cc, c.releaser(func() { w.onMain[e.addr]-- }), nil
	}
	for _, wc := range w.conns[e.addr] {
		if wc.streams < watchesPerConn {
			wc.streams++
			return wc.cc, c.releaser(func() { wc.streams-- }), nil
		}
	}
	if c.closed.Load() {
		return nil, nil, &Error{Op: "Watch", Endpoint: e.addr, Msg: "the client is closed", kind: ErrClosed}
	}
	cc, err := grpc.NewClient("passthrough:///"+e.addr, c.dialOpts...)
	if err != nil {
		return nil, nil, &Error{Op: "Watch", Endpoint: e.addr, Msg: err.Error(), kind: ErrUnavailable, cause: err}
	}
	wc := &watchConn{cc: cc, streams: 1}
	w.conns[e.addr] = append(w.conns[e.addr], wc)
	return cc, c.releaser(func() { wc.streams-- }), nil
}

// releaser runs release once, under the watch connections' lock.
func (c *Client) releaser(release func()) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			c.watches.mu.Lock()
			defer c.watches.mu.Unlock()
			release()
		})
	}
}

// closeWatchConns closes the extra watch connections (Client.Close).
func (c *Client) closeWatchConns() error {
	w := &c.watches
	w.mu.Lock()
	defer w.mu.Unlock()
	var errs []error
	for _, cs := range w.conns {
		for _, wc := range cs {
			errs = append(errs, wc.cc.Close())
		}
	}
	w.conns = nil
	return errors.Join(errs...)
}
