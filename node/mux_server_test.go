package node

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/shaledb/shale/api/kvpb"
)

// muxClient drives a raw Multiplex stream: frames in, results by call ID.
type muxClient struct {
	t      *testing.T
	stream kvpb.KV_MultiplexClient
	nextID uint64
}

func openMux(t *testing.T, kv kvpb.KVClient) *muxClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s, err := kv.Multiplex(ctx)
	if err != nil {
		t.Fatalf("Multiplex: %v", err)
	}
	return &muxClient{t: t, stream: s}
}

// call builds a frame for req; send sends frames as one message.
func (m *muxClient) call(method kvpb.MuxMethod, req proto.Message, timeout time.Duration) *kvpb.MuxCall {
	m.t.Helper()
	b, err := proto.Marshal(req)
	if err != nil {
		m.t.Fatal(err)
	}
	m.nextID++
	return &kvpb.MuxCall{CallId: m.nextID, Method: method, Request: b, TimeoutUs: timeout.Microseconds()}
}

func (m *muxClient) send(calls ...*kvpb.MuxCall) {
	m.t.Helper()
	if err := m.stream.Send(&kvpb.MuxRequest{Calls: calls}); err != nil {
		m.t.Fatalf("Send: %v", err)
	}
}

// recv reads results until it has n of them.
func (m *muxClient) recv(n int) map[uint64]*kvpb.MuxResult {
	m.t.Helper()
	out := map[uint64]*kvpb.MuxResult{}
	for len(out) < n {
		resp, err := m.stream.Recv()
		if err != nil {
			m.t.Fatalf("Recv after %d of %d results: %v", len(out), n, err)
		}
		for _, r := range resp.GetResults() {
			if out[r.GetCallId()] != nil {
				m.t.Fatalf("call %d answered twice", r.GetCallId())
			}
			out[r.GetCallId()] = r
		}
	}
	return out
}

func muxPut(k, v string) *kvpb.PutRequest { return &kvpb.PutRequest{Key: []byte(k), Value: []byte(v)} }
func muxGet(k string) *kvpb.GetRequest    { return &kvpb.GetRequest{Key: []byte(k)} }

// TestMuxServesCalls: calls of several methods in one message are each
// answered under their call ID, as the unary methods answer them; typed
// error details survive; an unknown method fails alone.
func TestMuxServesCalls(t *testing.T) {
	tn := startNode(t, "", Config{})
	m := openMux(t, tn.kv)
	put := m.call(kvpb.MuxMethod_MUX_METHOD_PUT, muxPut("a", "1"), time.Minute)
	m.send(put)
	if r := m.recv(1)[put.CallId]; r.GetStatus() != nil {
		t.Fatalf("Put: %v", r.GetStatus())
	}
	get := m.call(kvpb.MuxMethod_MUX_METHOD_GET, muxGet("a"), time.Minute)
	cas := m.call(kvpb.MuxMethod_MUX_METHOD_COMPARE_AND_SWAP, &kvpb.CompareAndSwapRequest{
		Key: []byte("a"), ExpectedValue: []byte("1"), NewValue: []byte("2")}, 0)
	big := m.call(kvpb.MuxMethod_MUX_METHOD_PUT, &kvpb.PutRequest{Key: make([]byte, 64<<10), Value: []byte("v")}, time.Minute)
	unknown := m.call(kvpb.MuxMethod(99), muxGet("a"), time.Minute)
	m.send(get, cas, big, unknown)
	res := m.recv(4)

	// The Get and the CompareAndSwap of one message run concurrently, on
	// two workers: the Get may see the value before or after the swap.
	var gr kvpb.GetResponse
	if err := proto.Unmarshal(res[get.CallId].GetResponse(), &gr); err != nil || !gr.Found || (string(gr.Value) != "1" && string(gr.Value) != "2") {
		t.Errorf("Get = %v (%v), want found 1 or 2", &gr, err)
	}
	if gr.GetHeader().GetNodeId() != tn.n.NodeID() {
		t.Errorf("Get header = %v", gr.GetHeader())
	}
	var cr kvpb.CompareAndSwapResponse
	if err := proto.Unmarshal(res[cas.CallId].GetResponse(), &cr); err != nil || !cr.Succeeded {
		t.Errorf("CompareAndSwap = %v (%v), want succeeded", &cr, err)
	}
	st := res[big.CallId].GetStatus()
	if codes.Code(st.GetCode()) != codes.InvalidArgument || len(st.GetDetails()) != 1 {
		t.Fatalf("oversized Put: status %v, want InvalidArgument with a LimitExceeded detail", st)
	}
	var le kvpb.LimitExceeded
	if err := proto.Unmarshal(st.GetDetails()[0].GetValue(), &le); err != nil || le.GetLimit() != "max_key_size" {
		t.Errorf("oversized Put detail %s = %v (%v)", st.GetDetails()[0].GetTypeUrl(), &le, err)
	}
	if c := codes.Code(res[unknown.CallId].GetStatus().GetCode()); c != codes.Unimplemented {
		t.Errorf("unknown method: code %v, want Unimplemented", c)
	}
	// The stream still works after a failed call.
	get2 := m.call(kvpb.MuxMethod_MUX_METHOD_GET, muxGet("a"), time.Minute)
	m.send(get2)
	if err := proto.Unmarshal(m.recv(1)[get2.CallId].GetResponse(), &gr); err != nil || string(gr.Value) != "2" {
		t.Errorf("Get after the swap = %v (%v), want 2", &gr, err)
	}
}

// TestMuxRunsTheInterceptors: a multiplexed call is authorized as its own
// method (a reader's Put is refused, its Get served) and counted in the
// per-method metrics, as a unary call is.
func TestMuxRunsTheInterceptors(t *testing.T) {
	p := newTestPKI(t)
	tn := startSecureNode(t, p, "")
	m := openMux(t, kvpb.NewKVClient(dialTLS(t, tn, p.client(t, "reader"))))
	put := m.call(kvpb.MuxMethod_MUX_METHOD_PUT, muxPut("k", "v"), time.Minute)
	get := m.call(kvpb.MuxMethod_MUX_METHOD_GET, muxGet("k"), time.Minute)
	m.send(put, get)
	res := m.recv(2)
	if c := codes.Code(res[put.CallId].GetStatus().GetCode()); c != codes.PermissionDenied {
		t.Errorf("reader's Put: code %v, want PermissionDenied", c)
	}
	if st := res[get.CallId].GetStatus(); st != nil {
		t.Errorf("reader's Get: %v", st)
	}
	handled := func(method, code string) float64 {
		for _, mt := range scrape(t, tn)["grpc_server_handled_total"].GetMetric() {
			labels := map[string]string{}
			for _, l := range mt.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["grpc_method"] == method && labels["grpc_code"] == code {
				return mt.GetCounter().GetValue()
			}
		}
		return 0
	}
	if n := handled("Put", "PermissionDenied"); n != 1 {
		t.Errorf("grpc_server_handled_total{Put,PermissionDenied} = %v, want 1", n)
	}
	if n := handled("Get", "OK"); n != 1 {
		t.Errorf("grpc_server_handled_total{Get,OK} = %v, want 1", n)
	}
}

// holdCalls makes every multiplexed call wait in muxCallHook until
// released, counting the calls held at once.
type holdCalls struct {
	mu       sync.Mutex
	cond     *sync.Cond
	held     int
	maxHeld  int
	releases int
}

func newHoldCalls(t *testing.T) *holdCalls {
	h := &holdCalls{}
	h.cond = sync.NewCond(&h.mu)
	muxCallHook = func(ctx context.Context, _ kvpb.MuxMethod) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.held++
		h.maxHeld = max(h.maxHeld, h.held)
		h.cond.Broadcast()
		for h.releases == 0 {
			h.cond.Wait()
		}
		h.releases--
		h.held--
	}
	t.Cleanup(func() { muxCallHook = nil })
	return h
}

// waitHeld waits until n calls are held.
func (h *holdCalls) waitHeld(n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for h.held < n {
		h.cond.Wait()
	}
}

func (h *holdCalls) release(n int) {
	h.mu.Lock()
	h.releases += n
	h.cond.Broadcast()
	h.mu.Unlock()
}

// TestMuxCapsCallsInFlight: a stream never has more calls running than
// its cap; the rest wait (unread) and all are answered in the end.
func TestMuxCapsCallsInFlight(t *testing.T) {
	const limit, calls = 3, 10
	tn := startNode(t, "", Config{Conn: ConnLimits{MaxMuxCallsPerStream: limit}})
	h := newHoldCalls(t)
	m := openMux(t, tn.kv)
	var frames []*kvpb.MuxCall
	for i := range calls {
		frames = append(frames, m.call(kvpb.MuxMethod_MUX_METHOD_PUT, muxPut("k", string(rune('a'+i))), time.Minute))
	}
	m.send(frames...)
	done := make(chan map[uint64]*kvpb.MuxResult)
	go func() { done <- m.recv(calls) }()
	// Let the calls through one at a time, each once the cap is full:
	// a stream past its cap would show more than limit held at once.
	for left := calls; left > 0; left-- {
		h.waitHeld(min(limit, left))
		h.release(1)
	}
	res := <-done
	for _, f := range frames {
		if st := res[f.CallId].GetStatus(); st != nil {
			t.Errorf("call %d: %v", f.CallId, st)
		}
	}
	if h.maxHeld != limit {
		t.Errorf("at most %d calls were in flight at once; want the cap, %d", h.maxHeld, limit)
	}
}

// TestMuxHonoursTheDeadline: a call runs under the deadline its frame
// gives: its context ends then, and not before.
func TestMuxHonoursTheDeadline(t *testing.T) {
	tn := startNode(t, "", Config{})
	var mu sync.Mutex
	deadlines := map[kvpb.MuxMethod]time.Time{}
	var shortErr error
	muxCallHook = func(ctx context.Context, method kvpb.MuxMethod) {
		dl, _ := ctx.Deadline()
		mu.Lock()
		deadlines[method] = dl
		mu.Unlock()
		if method == kvpb.MuxMethod_MUX_METHOD_DELETE {
			select {
			case <-ctx.Done(): // outlive the deadline
			case <-time.After(time.Minute):
			}
			mu.Lock()
			shortErr = ctx.Err()
			mu.Unlock()
		}
	}
	t.Cleanup(func() { muxCallHook = nil })
	m := openMux(t, tn.kv)
	before := time.Now()
	long := m.call(kvpb.MuxMethod_MUX_METHOD_PUT, muxPut("k", "v"), time.Hour)
	short := m.call(kvpb.MuxMethod_MUX_METHOD_DELETE, &kvpb.DeleteRequest{Key: []byte("k")}, 50*time.Millisecond)
	m.send(long, short)
	res := m.recv(2)
	after := time.Now()
	if dl := deadlines[kvpb.MuxMethod_MUX_METHOD_PUT]; dl.Before(before.Add(time.Hour)) || dl.After(after.Add(time.Hour)) {
		t.Errorf("Put ran with deadline %v; want an hour after it was sent (%v..%v)", dl, before.Add(time.Hour), after.Add(time.Hour))
	}
	if st := res[long.CallId].GetStatus(); st != nil {
		t.Errorf("Put: %v", st)
	}
	mu.Lock()
	defer mu.Unlock()
	if !errors.Is(shortErr, context.DeadlineExceeded) {
		t.Errorf("the 50ms call's context ended with %v, want its deadline", shortErr)
	}
	if dl := deadlines[kvpb.MuxMethod_MUX_METHOD_DELETE]; dl.Before(before.Add(50*time.Millisecond)) || dl.After(after.Add(50*time.Millisecond)) {
		t.Errorf("Delete ran with deadline %v; want 50ms after it was sent", dl)
	}
	if res[short.CallId] == nil {
		t.Error("the call past its deadline was not answered")
	}
}

// TestMuxDrainsOnStop: a node stopping answers every call it read (served,
// or refused as not applied) before it ends the stream cleanly, and keeps
// every write it acknowledged.
func TestMuxDrainsOnStop(t *testing.T) {
	tn := startNode(t, "", Config{})
	h := newHoldCalls(t)
	m := openMux(t, tn.kv)
	var frames []*kvpb.MuxCall
	for i := range 20 {
		frames = append(frames, m.call(kvpb.MuxMethod_MUX_METHOD_PUT, muxPut(string(rune('a'+i)), "v"), time.Minute))
	}
	m.send(frames...)
	h.waitHeld(len(frames))
	stopped := make(chan error, 1)
	go func() { stopped <- tn.n.Stop(context.Background()) }()
	for !tn.n.stopping.Load() {
		time.Sleep(time.Millisecond)
	}
	h.release(len(frames))
	res := m.recv(len(frames))
	if _, err := m.stream.Recv(); !errors.Is(err, io.EOF) {
		t.Errorf("after the last result: %v, want the stream to end cleanly (io.EOF)", err)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("Stop: %v", err)
	}
	// The node stopped before the calls reached the admit interceptor: each
	// is refused as not applied, with the retry hint a client needs to
	// retry a write safely.
	for _, f := range frames {
		st := res[f.CallId].GetStatus()
		if codes.Code(st.GetCode()) != codes.Unavailable || len(st.GetDetails()) != 1 {
			t.Fatalf("call %d: status %v, want Unavailable with RetryInfo", f.CallId, st)
		}
		var ri errdetails.RetryInfo
		if err := proto.Unmarshal(st.GetDetails()[0].GetValue(), &ri); err != nil {
			t.Errorf("call %d: detail %s: %v", f.CallId, st.GetDetails()[0].GetTypeUrl(), err)
		}
	}
}

// TestMuxDisabled: a node with multiplexing off answers the stream with
// Unimplemented, before running any call sent on it.
func TestMuxDisabled(t *testing.T) {
	tn := startNode(t, "", Config{Conn: ConnLimits{DisableMultiplex: true}})
	m := openMux(t, tn.kv)
	// The node may refuse the stream before the call is sent: Send then
	// says only io.EOF, and the refusal's status comes from Recv.
	if err := m.stream.Send(&kvpb.MuxRequest{Calls: []*kvpb.MuxCall{m.call(kvpb.MuxMethod_MUX_METHOD_PUT, muxPut("k", "v"), time.Minute)}}); err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("Send: %v", err)
	}
	if _, err := m.stream.Recv(); status.Code(err) != codes.Unimplemented {
		t.Fatalf("Recv: %v, want Unimplemented", err)
	}
	if _, found := get(t, tn, "k"); found {
		t.Error("a call on a refused stream was applied")
	}
}
