package client

import (
	"context"
	"errors"
	"io"
	"runtime"
	"sync"

	"github.com/shaledb/shale/api/kvpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Multiplexing (docs/wire-protocol.md, "Multiplexed calls").
//
// Every goroutine of a Client sends its KV calls to a node over one
// KV.Multiplex stream per connection: a call is a frame (call ID, method,
// encoded request, remaining timeout) and its answer a frame with the same
// call ID. A unary RPC per call costs an HTTP/2 stream, headers, metadata
// and a goroutine on each side; a frame costs a few bytes. One writer
// goroutine per stream sends every frame queued since its last send as one
// message; one reader goroutine hands each answer to its caller.
//
// What a broken stream means for the calls on it:
//   - a call the writer had not taken was not sent: it is sent again, on
//     a new stream or as a unary call;
//   - a call the writer took may have reached the node: a write is
//     ambiguous (an Unavailable status without RetryInfo, which classify
//     reports as ErrAmbiguous, exactly as for a unary write whose
//     connection broke), a read is retried by the caller's loop;
//   - if the node answered the stream itself with Unimplemented (it has no
//     Multiplex, or it is disabled there), no call on it ran: each is sent
//     again as a unary call, and so are the endpoint's calls for a while.

// muxStream is one open Multiplex stream and its calls in flight.
type muxStream struct {
	kv     *muxKV
	cs     kvpb.KV_MultiplexClient
	cancel context.CancelFunc

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]*muxCall // sent or queued, not yet answered
	queue   []*muxCall          // not yet taken by the writer
	err     error               // why the stream broke; nil while it works
	// wake tells the writer that calls are queued (cap 1).
	wake chan struct{}
}

// muxCall is one call on a stream. The fields below frame are set by the
// stream (under its mu) before done is closed, and read after.
type muxCall struct {
	frame *kvpb.MuxCall
	done  chan struct{}

	sent      bool // taken by the writer: may have reached the node
	abandoned bool // the caller gave up before the writer took it

	result *kvpb.MuxResult
	// broken is set instead of result when the stream broke; retry says
	// the call was certainly not run and may be sent again.
	broken error
	retry  bool
}

// openMuxStream opens a stream on kv's connection and starts its writer
// and reader. The stream lives until it breaks or the connection closes,
// not as long as any one call.
func openMuxStream(kv *muxKV) (*muxStream, error) {
	ctx, cancel := context.WithCancel(context.Background())
	cs, err := kv.KVClient.Multiplex(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	s := &muxStream{kv: kv, cs: cs, cancel: cancel, pending: map[uint64]*muxCall{}, wake: make(chan struct{}, 1)}
	go s.write(ctx)
	go s.read()
	return s, nil
}

// start queues c's frame for the writer. It fails, without queueing, when
// the stream is already broken.
func (s *muxStream) start(c *muxCall) error {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return s.err
	}
	s.nextID++
	c.frame.CallId = s.nextID
	s.pending[c.frame.CallId] = c
	s.queue = append(s.queue, c)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return nil
}

// broken reports whether the stream has broken; errOf is why (nil while
// it works).
func (s *muxStream) broken() bool { return s.errOf() != nil }

func (s *muxStream) errOf() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// abandon forgets c, whose caller stopped waiting: the writer skips it if
// it has not taken it yet, and a late answer is dropped.
func (s *muxStream) abandon(c *muxCall) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending != nil {
		delete(s.pending, c.frame.CallId)
	}
	c.abandoned = true
}

// Message sizes. A node reads messages up to about twice its
// max_write_bytes plus 64 KiB (its gRPC cap); a message over the cap would
// break the stream, and with it every call in flight on it. So the writer
// starts a new message past muxMaxBatchBytes, and a call whose request is
// larger than muxMaxCallBytes goes as a unary call (its payload dwarfs a
// unary call's fixed cost anyway): a message stays under 48 KiB, below the
// cap of any node's limits.
const (
	muxMaxBatchBytes = 32 << 10
	muxMaxCallBytes  = 16 << 10
)

// write sends queued calls, every call queued since the last send in one
// message, until the stream breaks.
func (s *muxStream) write(ctx context.Context) {
	var buf []*kvpb.MuxCall
	for {
		select {
		case <-s.wake:
		case <-ctx.Done():
			return
		}
		// Let the callers that are ready to run queue their calls first:
		// the answers of one commit wake many callers at once, and their
		// next calls then share one message (one write on each side)
		// instead of one message each.
		runtime.Gosched()
		s.mu.Lock()
		if s.err != nil {
			s.mu.Unlock()
			return
		}
		batch := s.queue
		s.queue = nil
		calls := buf[:0]
		for _, c := range batch {
			if !c.abandoned {
				// From here the call may reach the node.
				c.sent = true
				calls = append(calls, c.frame)
			}
		}
		s.mu.Unlock()
		buf = calls
		for len(calls) > 0 {
			n, size := 0, 0
			for n < len(calls) && (n == 0 || size < muxMaxBatchBytes) {
				size += len(calls[n].Request) + 24
				n++
			}
			if err := s.cs.Send(&kvpb.MuxRequest{Calls: calls[:n]}); err != nil {
				// io.EOF: the stream ended, and the reader gets its status
				// (which may be Unimplemented: nothing ran) and breaks it.
				if !errors.Is(err, io.EOF) {
					s.fail(status.Error(codes.Unavailable, "multiplexed stream: sending: "+err.Error()))
				}
				return
			}
			calls = calls[n:]
		}
		clear(buf) // let the sent frames go
	}
}

// read hands each result to its call until the stream breaks.
func (s *muxStream) read() {
	for {
		resp, err := s.cs.Recv()
		if err != nil {
			s.fail(err)
			return
		}
		results := resp.GetResults()
		done := make([]*muxCall, 0, len(results))
		s.mu.Lock()
		for _, r := range results {
			if c := s.pending[r.GetCallId()]; c != nil {
				delete(s.pending, r.GetCallId())
				c.result = r
				done = append(done, c)
			}
		}
		s.mu.Unlock()
		for _, c := range done {
			close(c.done)
		}
	}
}

// fail breaks the stream: every call on it is answered (see the rules
// above) and the next call opens a new stream.
func (s *muxStream) fail(err error) {
	st := status.Convert(err)
	unimplemented := st.Code() == codes.Unimplemented
	broken := inFlight("multiplexed stream broke while the request was in flight: " + st.Message())
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return
	}
	s.err = broken
	pending := s.pending
	s.pending, s.queue = nil, nil
	s.mu.Unlock()
	s.kv.forget(s, unimplemented)
	s.cancel()
	for _, c := range pending {
		c.broken = broken
		c.retry = unimplemented || !c.sent
		close(c.done)
	}
}

// close ends the stream; calls in flight break.
func (s *muxStream) close() {
	s.fail(status.Error(codes.Canceled, "the client is closed"))
}
