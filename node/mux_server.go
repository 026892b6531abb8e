package node

import (
	"context"
	"errors"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/shaledb/shale/api/kvpb"
)

// KV.Multiplex (docs/wire-protocol.md, "Multiplexed calls").
//
// A client keeps one Multiplex stream per connection and sends its unary
// KV calls on it as frames (call ID, method, encoded request, timeout).
// The node runs each call through the generated unary handler of its
// method with the node's unary interceptor chain (interceptors.go), so a
// multiplexed call is authorized, admitted, limited, timed and counted
// exactly as the same call sent on its own; only the HTTP/2 stream, the
// headers and the goroutine of a unary call are saved.
//
// Per stream: a reader goroutine decodes frames and hands each call to a
// worker; the stream's handler goroutine is its writer, batching the
// results that finished since its last send into one message. At most
// ConnLimits.MaxMuxCallsPerStream calls of a stream are in flight: past
// that the reader stops reading, and HTTP/2 flow control holds the client
// back (backpressure, not a queue that grows).

// muxWorkers is the number of long-lived goroutines that run multiplexed
// calls: enough for the calls of 64 clients waiting on commits, with room
// for reads. A call that finds them all busy runs on a goroutine of its
// own; the per-stream cap bounds those.
const muxWorkers = 128

// muxMaxBatchBytes is the size at which the writer stops adding results to
// one message (a larger single result is sent alone).
const muxMaxBatchBytes = 1 << 20

// muxHub serves the node's Multiplex streams and owns their workers.
type muxHub struct {
	n *Node
	// methods maps a MuxMethod to the unary method it runs.
	methods map[kvpb.MuxMethod]muxMethod
	// work hands a call to an idle worker; quit ends the workers.
	work    chan *muxCall
	quit    chan struct{}
	workers sync.WaitGroup
	// stopc is closed when the node stops: each stream answers the calls
	// it holds and ends.
	stopc    chan struct{}
	stopOnce sync.Once
}

// muxMethod is one unary method a Multiplex call can name: its generated
// handler, which decodes the request and calls the interceptor chain with
// the method's full name.
type muxMethod struct {
	handler grpc.MethodHandler
	// srv is the service the handler is of; nil for the KV service,
	// whose server is the stream's.
	srv any
}

// muxMethodNames maps each MuxMethod to its unary method's name in the KV
// service.
var muxMethodNames = map[kvpb.MuxMethod]string{
	kvpb.MuxMethod_MUX_METHOD_GET:              "Get",
	kvpb.MuxMethod_MUX_METHOD_PUT:              "Put",
	kvpb.MuxMethod_MUX_METHOD_DELETE:           "Delete",
	kvpb.MuxMethod_MUX_METHOD_SCAN:             "Scan",
	kvpb.MuxMethod_MUX_METHOD_BATCH_GET:        "BatchGet",
	kvpb.MuxMethod_MUX_METHOD_BATCH:            "Batch",
	kvpb.MuxMethod_MUX_METHOD_COMPARE_AND_SWAP: "CompareAndSwap",
	kvpb.MuxMethod_MUX_METHOD_DELETE_RANGE:     "DeleteRange",
}

// muxTxnMethodNames maps the Txn service's MuxMethods to its methods.
var muxTxnMethodNames = map[kvpb.MuxMethod]string{
	kvpb.MuxMethod_MUX_METHOD_TXN_BEGIN:   "Begin",
	kvpb.MuxMethod_MUX_METHOD_TXN_COMMIT:  "Commit",
	kvpb.MuxMethod_MUX_METHOD_TXN_WRITE:   "Write",
	kvpb.MuxMethod_MUX_METHOD_TXN_RECORD:  "Record",
	kvpb.MuxMethod_MUX_METHOD_TXN_RESOLVE: "Resolve",
	kvpb.MuxMethod_MUX_METHOD_TXN_PREVENT: "Prevent",
}

func newMuxHub(n *Node) *muxHub {
	h := &muxHub{
		n:       n,
		methods: map[kvpb.MuxMethod]muxMethod{},
		work:    make(chan *muxCall),
		quit:    make(chan struct{}),
		stopc:   make(chan struct{}),
	}
	sd := kvpb.KV_ServiceDesc
	for m, name := range muxMethodNames {
		for _, md := range sd.Methods {
			if md.MethodName == name {
				h.methods[m] = muxMethod{handler: md.Handler}
			}
		}
	}
	txn := &txnServer{n: n}
	for m, name := range muxTxnMethodNames {
		for _, md := range kvpb.Txn_ServiceDesc.Methods {
			if md.MethodName == name {
				h.methods[m] = muxMethod{handler: md.Handler, srv: txn}
			}
		}
	}
	h.workers.Add(muxWorkers)
	for range muxWorkers {
		go func() {
			defer h.workers.Done()
			for {
				select {
				case c := <-h.work:
					c.run()
				case <-h.quit:
					return
				}
			}
		}()
	}
	return h
}

// stop makes every stream answer the calls it holds and end. Callers must
// hold that the node refuses new requests (Node.stopping), so that the
// calls still running finish.
func (h *muxHub) stop() {
	h.stopOnce.Do(func() { close(h.stopc) })
}

// close ends the workers once they are idle. A stream's reader may still
// be handing over a call it decoded as its stream ended: such a call runs
// on a goroutine of its own (and is refused, the node being stopped).
func (h *muxHub) close() {
	h.stop()
	close(h.quit)
	h.workers.Wait()
}

// dispatch runs c on an idle worker, or on a goroutine of its own when
// every worker is busy.
func (h *muxHub) dispatch(c *muxCall) {
	select {
	case h.work <- c:
	default:
		go c.run()
	}
}

// Multiplex serves one Multiplex stream until the client closes it, it
// breaks, or the node stops.
func (s *kvServer) Multiplex(ss kvpb.KV_MultiplexServer) error {
	if s.n.cfg.Conn.DisableMultiplex {
		return status.Error(codes.Unimplemented, "multiplexing is disabled on this node; send unary calls")
	}
	return s.n.mux.serve(s, ss)
}

// muxStream is the state of one Multiplex stream.
type muxStream struct {
	hub *muxHub
	srv *kvServer
	ss  kvpb.KV_MultiplexServer
	ctx context.Context
	// slots holds a token per call in flight (cap MaxMuxCallsPerStream).
	slots chan struct{}
	// inflight counts the calls read and not yet answered; a result is
	// queued before its call stops counting.
	inflight atomic.Int64

	mu  sync.Mutex
	out []*kvpb.MuxResult // results not yet sent
	// wake tells the writer that results are queued (cap 1).
	wake chan struct{}
}

func (h *muxHub) serve(srv *kvServer, ss kvpb.KV_MultiplexServer) error {
	st := &muxStream{
		hub:   h,
		srv:   srv,
		ss:    ss,
		ctx:   ss.Context(),
		slots: make(chan struct{}, h.n.cfg.Conn.MaxMuxCallsPerStream),
		wake:  make(chan struct{}, 1),
	}
	readDone := make(chan error, 1)
	go func() { readDone <- st.read() }()
	for {
		select {
		case <-st.wake:
			// Let the workers that are ready to run queue their results
			// first: one commit finishes many calls at once, and their
			// results then share one message instead of one each.
			runtime.Gosched()
			if err := st.flush(); err != nil {
				return err
			}
		case err := <-readDone:
			if err != nil {
				return err
			}
			// The client closed its side: answer what it sent, then end.
			return st.drain()
		case <-h.stopc:
			// Every call was admitted before the node started stopping
			// (later ones are refused by the admit interceptor and
			// answered): they finish, their results go out, and the
			// stream ends with OK. A frame that arrives after that is
			// never run; its writes are ambiguous to the client.
			return st.drain()
		case <-st.ctx.Done():
			return status.FromContextError(st.ctx.Err()).Err()
		}
	}
}

// read decodes frames and starts their calls until the stream ends. It
// returns nil when the client closed its side.
func (st *muxStream) read() error {
	for {
		req, err := st.ss.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return messageSizeError(err)
		}
		recvd := time.Now()
		for _, call := range req.GetCalls() {
			// Take a slot first: at the cap, stop reading until a call
			// finishes.
			select {
			case st.slots <- struct{}{}:
			case <-st.ctx.Done():
				return status.FromContextError(st.ctx.Err()).Err()
			}
			st.inflight.Add(1)
			c := &muxCall{st: st, id: call.GetCallId(), method: call.GetMethod(), req: call.GetRequest()}
			if t := call.GetTimeoutUs(); t > 0 {
				c.deadline = recvd.Add(time.Duration(t) * time.Microsecond)
			}
			st.hub.dispatch(c)
		}
	}
}

// drain waits until every call of the stream is answered and sent.
func (st *muxStream) drain() error {
	for {
		if err := st.flush(); err != nil {
			return err
		}
		if st.inflight.Load() == 0 {
			// Every result was queued before its call stopped counting.
			return st.flush()
		}
		select {
		case <-st.wake:
		case <-st.ctx.Done():
			return status.FromContextError(st.ctx.Err()).Err()
		}
	}
}

// flush sends the queued results, in messages of up to muxMaxBatchBytes.
// Only the writer (the handler goroutine) calls it.
func (st *muxStream) flush() error {
	st.mu.Lock()
	out := st.out
	st.out = nil
	st.mu.Unlock()
	for len(out) > 0 {
		n, size := 0, 0
		for n < len(out) && (n == 0 || size < muxMaxBatchBytes) {
			size += len(out[n].GetResponse()) + 32
			n++
		}
		if err := st.ss.Send(&kvpb.MuxResponse{Results: out[:n]}); err != nil {
			return err
		}
		out = out[n:]
	}
	return nil
}

// finish queues a call's result for the writer and frees its slot.
func (st *muxStream) finish(res *kvpb.MuxResult) {
	st.mu.Lock()
	st.out = append(st.out, res)
	st.mu.Unlock()
	<-st.slots
	st.inflight.Add(-1)
	select {
	case st.wake <- struct{}{}:
	default:
	}
}

// muxCall is one call read from a stream.
type muxCall struct {
	st       *muxStream
	id       uint64
	method   kvpb.MuxMethod
	req      []byte
	deadline time.Time // zero: none (the deadline interceptor sets one)
}

// run serves the call through its method's unary handler and the node's
// interceptor chain, and queues the result.
func (c *muxCall) run() {
	res := &kvpb.MuxResult{CallId: c.id}
	resp, err := c.serve()
	if err == nil {
		res.Response, err = proto.Marshal(resp.(proto.Message))
		if err != nil {
			err = status.Errorf(codes.Internal, "encoding the response: %v", err)
		}
	}
	if err != nil {
		res.Response = nil
		res.Status = muxStatus(err)
	}
	c.st.finish(res)
}

func (c *muxCall) serve() (any, error) {
	m, ok := c.st.hub.methods[c.method]
	if !ok {
		return nil, status.Errorf(codes.Unimplemented, "multiplexed call: unknown method %d (%s)", c.method, c.method)
	}
	ctx := c.st.ctx
	if !c.deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, c.deadline)
		defer cancel()
	}
	if muxCallHook != nil {
		muxCallHook(ctx, c.method)
	}
	dec := func(v any) error {
		if err := proto.Unmarshal(c.req, v.(proto.Message)); err != nil {
			return status.Errorf(codes.InvalidArgument, "multiplexed call: decoding the request: %v", err)
		}
		return nil
	}
	var srv any = c.st.srv
	if m.srv != nil {
		srv = m.srv
	}
	return m.handler(srv, ctx, dec, c.st.hub.n.unaryChain)
}

// muxCallHook, when set (by tests only), is called with each call's context
// before its handler runs, so a test can hold calls in flight.
var muxCallHook func(ctx context.Context, method kvpb.MuxMethod)

// muxStatus is err as the status a unary call would have ended with.
func muxStatus(err error) *kvpb.MuxStatus {
	st, ok := status.FromError(err)
	if !ok {
		st = status.FromContextError(err)
	}
	p := st.Proto()
	ms := &kvpb.MuxStatus{Code: p.GetCode(), Message: p.GetMessage()}
	for _, d := range p.GetDetails() {
		ms.Details = append(ms.Details, &kvpb.MuxDetail{TypeUrl: d.GetTypeUrl(), Value: d.GetValue()})
	}
	return ms
}
