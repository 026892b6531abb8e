package client

import (
	"context"
	"sync"
	"time"

	"github.com/shaledb/shale/api/kvpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// muxKV is the KV client of one connection: it sends every call over the
// connection's Multiplex stream (mux.go), and as a unary RPC when the node
// does not offer one. It implements kvpb.KVClient, so the routing and
// retry loops above it do not know which way a call went: a multiplexed
// call fails with the same gRPC statuses as a unary one.
type muxKV struct {
	kvpb.KVClient // the unary client

	mu  sync.Mutex
	cur *muxStream // the open stream; nil: open one on the next call
	// opening is the stream being opened, if one is: callers wait for it
	// (or their context) instead of opening one each.
	opening *muxOpening
	// unaryUntil: the node answered Multiplex with Unimplemented; calls
	// are unary until then, when a stream is tried again (the node may
	// have been upgraded or had multiplexing turned on).
	unaryUntil time.Time
	closed     bool
}

// muxOpening is one attempt to open a stream; s and err are set before
// done is closed (s nil and err nil: calls go unary).
type muxOpening struct {
	done chan struct{}
	s    *muxStream
	err  error
}

// unaryRetryAfter is how long an endpoint that refused Multiplex is sent
// unary calls before a stream is tried again.
const unaryRetryAfter = time.Minute

// muxOpenAttempts bounds how often one call is sent again because the
// streams it was queued on broke before it was sent.
const muxOpenAttempts = 3

func newMuxKV(unary kvpb.KVClient) *muxKV { return &muxKV{KVClient: unary} }

// stream returns the open stream, opening one if there is none; nil (and
// no error) when calls go unary. Opening waits for the connection if it is
// not up, so it runs on a goroutine of its own: the caller stops waiting
// when its context ends, and the stream serves the next calls.
func (m *muxKV) stream(ctx context.Context) (*muxStream, error) {
	m.mu.Lock()
	if s := m.cur; s != nil {
		m.mu.Unlock()
		return s, nil
	}
	if m.closed || time.Now().Before(m.unaryUntil) {
		m.mu.Unlock()
		return nil, nil
	}
	op := m.opening
	if op == nil {
		op = &muxOpening{done: make(chan struct{})}
		m.opening = op
		go m.open(op)
	}
	m.mu.Unlock()
	select {
	case <-op.done:
		return op.s, op.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// open opens a stream for op and, unless it broke already or the client
// closed meanwhile, makes it the endpoint's stream.
func (m *muxKV) open(op *muxOpening) {
	s, err := openMuxStream(m)
	var discard *muxStream
	m.mu.Lock()
	m.opening = nil
	switch {
	case err != nil && status.Code(err) == codes.Unimplemented:
		m.unaryUntil = time.Now().Add(unaryRetryAfter)
		err = nil
	case err != nil:
	case m.closed:
		discard, s = s, nil
		err = status.Error(codes.Canceled, "the client is closed")
	case s.broken():
		// Its reader failed before this: forget found nothing to drop.
		s, err = nil, s.errOf()
	default:
		m.cur = s
	}
	op.s, op.err = s, err
	m.mu.Unlock()
	close(op.done)
	if discard != nil {
		discard.close()
	}
}

// forget drops s, which broke, so that the next call opens a new stream;
// unimplemented says the node refused Multiplex.
func (m *muxKV) forget(s *muxStream, unimplemented bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cur == s {
		m.cur = nil
	}
	if unimplemented {
		m.unaryUntil = time.Now().Add(unaryRetryAfter)
	}
}

// close ends the open stream; later calls go unary (and fail, since the
// connection closes with it).
func (m *muxKV) close() {
	m.mu.Lock()
	s := m.cur
	m.cur, m.closed = nil, true
	m.mu.Unlock()
	if s != nil {
		s.close()
	}
}

// invoke runs one call: over the stream, or through unary when the node
// does not multiplex. On success resp holds the answer.
func (m *muxKV) invoke(ctx context.Context, method kvpb.MuxMethod, req, resp proto.Message, unary func() error) error {
	if proto.Size(req) > muxMaxCallBytes {
		return unary()
	}
	body, err := proto.Marshal(req)
	if err != nil {
		return status.Errorf(codes.Internal, "encoding the request: %v", err)
	}
	for attempt := 0; ; attempt++ {
		s, err := m.stream(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return status.FromContextError(ctx.Err()).Err()
			}
			// No stream could be opened: nothing was sent.
			return notSent("opening a multiplexed stream: " + status.Convert(err).Message())
		}
		if s == nil {
			return unary()
		}
		c := &muxCall{frame: &kvpb.MuxCall{Method: method, Request: body}, done: make(chan struct{})}
		if dl, ok := ctx.Deadline(); ok {
			left := time.Until(dl)
			if left <= 0 {
				return status.FromContextError(context.DeadlineExceeded).Err()
			}
			c.frame.TimeoutUs = max(int64(left/time.Microsecond), 1)
		}
		if err := s.start(c); err != nil {
			// Broke before the call was queued.
			if attempt+1 < muxOpenAttempts {
				continue
			}
			return notSent("the multiplexed stream broke before the request was sent")
		}
		select {
		case <-c.done:
		case <-ctx.Done():
			// The call may be running on the node; the caller's context
			// error makes a write ambiguous (classify), as for unary.
			s.abandon(c)
			return status.FromContextError(ctx.Err()).Err()
		}
		if c.broken != nil {
			if c.retry && attempt+1 < muxOpenAttempts {
				continue
			}
			if c.retry {
				return notSent("the multiplexed stream broke before the request was sent")
			}
			return c.broken
		}
		return decodeResult(c.result, resp)
	}
}

func (m *muxKV) Get(ctx context.Context, in *kvpb.GetRequest, opts ...grpc.CallOption) (*kvpb.GetResponse, error) {
	out := new(kvpb.GetResponse)
	err := m.invoke(ctx, kvpb.MuxMethod_MUX_METHOD_GET, in, out, func() (err error) {
		out, err = m.KVClient.Get(ctx, in, opts...)
		return err
	})
	return result(out, err)
}

func (m *muxKV) Put(ctx context.Context, in *kvpb.PutRequest, opts ...grpc.CallOption) (*kvpb.PutResponse, error) {
	out := new(kvpb.PutResponse)
	err := m.invoke(ctx, kvpb.MuxMethod_MUX_METHOD_PUT, in, out, func() (err error) {
		out, err = m.KVClient.Put(ctx, in, opts...)
		return err
	})
	return result(out, err)
}

func (m *muxKV) Delete(ctx context.Context, in *kvpb.DeleteRequest, opts ...grpc.CallOption) (*kvpb.DeleteResponse, error) {
	out := new(kvpb.DeleteResponse)
	err := m.invoke(ctx, kvpb.MuxMethod_MUX_METHOD_DELETE, in, out, func() (err error) {
		out, err = m.KVClient.Delete(ctx, in, opts...)
		return err
	})
	return result(out, err)
}

func (m *muxKV) Scan(ctx context.Context, in *kvpb.ScanRequest, opts ...grpc.CallOption) (*kvpb.ScanResponse, error) {
	out := new(kvpb.ScanResponse)
	err := m.invoke(ctx, kvpb.MuxMethod_MUX_METHOD_SCAN, in, out, func() (err error) {
		out, err = m.KVClient.Scan(ctx, in, opts...)
		return err
	})
	return result(out, err)
}

func (m *muxKV) BatchGet(ctx context.Context, in *kvpb.BatchGetRequest, opts ...grpc.CallOption) (*kvpb.BatchGetResponse, error) {
	out := new(kvpb.BatchGetResponse)
	err := m.invoke(ctx, kvpb.MuxMethod_MUX_METHOD_BATCH_GET, in, out, func() (err error) {
		out, err = m.KVClient.BatchGet(ctx, in, opts...)
		return err
	})
	return result(out, err)
}

func (m *muxKV) Batch(ctx context.Context, in *kvpb.BatchRequest, opts ...grpc.CallOption) (*kvpb.BatchResponse, error) {
	out := new(kvpb.BatchResponse)
	err := m.invoke(ctx, kvpb.MuxMethod_MUX_METHOD_BATCH, in, out, func() (err error) {
		out, err = m.KVClient.Batch(ctx, in, opts...)
		return err
	})
	return result(out, err)
}

func (m *muxKV) CompareAndSwap(ctx context.Context, in *kvpb.CompareAndSwapRequest, opts ...grpc.CallOption) (*kvpb.CompareAndSwapResponse, error) {
	out := new(kvpb.CompareAndSwapResponse)
	err := m.invoke(ctx, kvpb.MuxMethod_MUX_METHOD_COMPARE_AND_SWAP, in, out, func() (err error) {
		out, err = m.KVClient.CompareAndSwap(ctx, in, opts...)
		return err
	})
	return result(out, err)
}

func (m *muxKV) DeleteRange(ctx context.Context, in *kvpb.DeleteRangeRequest, opts ...grpc.CallOption) (*kvpb.DeleteRangeResponse, error) {
	out := new(kvpb.DeleteRangeResponse)
	err := m.invoke(ctx, kvpb.MuxMethod_MUX_METHOD_DELETE_RANGE, in, out, func() (err error) {
		out, err = m.KVClient.DeleteRange(ctx, in, opts...)
		return err
	})
	return result(out, err)
}

// result returns out, or nil with err, as a generated client does.
func result[T any](out *T, err error) (*T, error) {
	if err != nil {
		return nil, err
	}
	return out, nil
}

// muxTxn is the Txn client of one connection: its calls ride the
// connection's Multiplex stream like KV calls (muxKV), unary when the
// node does not multiplex.
type muxTxn struct {
	m     *muxKV
	unary kvpb.TxnClient
}

var _ kvpb.TxnClient = (*muxTxn)(nil)

func (t *muxTxn) Begin(ctx context.Context, in *kvpb.TxnBeginRequest, opts ...grpc.CallOption) (*kvpb.TxnBeginResponse, error) {
	out := new(kvpb.TxnBeginResponse)
	err := t.m.invoke(ctx, kvpb.MuxMethod_MUX_METHOD_TXN_BEGIN, in, out, func() (err error) {
		out, err = t.unary.Begin(ctx, in, opts...)
		return err
	})
	return result(out, err)
}

func (t *muxTxn) Commit(ctx context.Context, in *kvpb.TxnCommitRequest, opts ...grpc.CallOption) (*kvpb.TxnCommitResponse, error) {
	out := new(kvpb.TxnCommitResponse)
	err := t.m.invoke(ctx, kvpb.MuxMethod_MUX_METHOD_TXN_COMMIT, in, out, func() (err error) {
		out, err = t.unary.Commit(ctx, in, opts...)
		return err
	})
	return result(out, err)
}

// The calls of transactions across ranges ride the stream too.

func (t *muxTxn) Write(ctx context.Context, in *kvpb.TxnWriteRequest, opts ...grpc.CallOption) (*kvpb.TxnWriteResponse, error) {
	out := new(kvpb.TxnWriteResponse)
	err := t.m.invoke(ctx, kvpb.MuxMethod_MUX_METHOD_TXN_WRITE, in, out, func() (err error) {
		out, err = t.unary.Write(ctx, in, opts...)
		return err
	})
	return result(out, err)
}

func (t *muxTxn) Record(ctx context.Context, in *kvpb.TxnRecordRequest, opts ...grpc.CallOption) (*kvpb.TxnRecordResponse, error) {
	out := new(kvpb.TxnRecordResponse)
	err := t.m.invoke(ctx, kvpb.MuxMethod_MUX_METHOD_TXN_RECORD, in, out, func() (err error) {
		out, err = t.unary.Record(ctx, in, opts...)
		return err
	})
	return result(out, err)
}

func (t *muxTxn) Resolve(ctx context.Context, in *kvpb.TxnResolveRequest, opts ...grpc.CallOption) (*kvpb.TxnResolveResponse, error) {
	out := new(kvpb.TxnResolveResponse)
	err := t.m.invoke(ctx, kvpb.MuxMethod_MUX_METHOD_TXN_RESOLVE, in, out, func() (err error) {
		out, err = t.unary.Resolve(ctx, in, opts...)
		return err
	})
	return result(out, err)
}

// WaitFor is the nodes' (the push graph): never multiplexed.
func (t *muxTxn) WaitFor(ctx context.Context, in *kvpb.TxnWaitForRequest, opts ...grpc.CallOption) (*kvpb.TxnWaitForResponse, error) {
	return t.unary.WaitFor(ctx, in, opts...)
}

// Lock is not one of the stream's methods (it may wait in the leader's
// queues up to its deadline): it goes unary.
func (t *muxTxn) Lock(ctx context.Context, in *kvpb.TxnLockRequest, opts ...grpc.CallOption) (*kvpb.TxnLockResponse, error) {
	return t.unary.Lock(ctx, in, opts...)
}

func (t *muxTxn) Prevent(ctx context.Context, in *kvpb.TxnPreventRequest, opts ...grpc.CallOption) (*kvpb.TxnPreventResponse, error) {
	out := new(kvpb.TxnPreventResponse)
	err := t.m.invoke(ctx, kvpb.MuxMethod_MUX_METHOD_TXN_PREVENT, in, out, func() (err error) {
		out, err = t.unary.Prevent(ctx, in, opts...)
		return err
	})
	return result(out, err)
}
