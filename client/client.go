package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"

	"github.com/shaledb/shale/api/flowcontrol"
	"github.com/shaledb/shale/api/kvpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
)

// Client talks to a Shale cluster. It is safe for concurrent use; create
// one per application and Close it when done.
type Client struct {
	opts      Options
	conns     []*endpoint
	preferred atomic.Uint32 // index of the endpoint to try first
	clientID  uint64
	seq       atomic.Uint64 // request_seq of the last write
	// observed is the highest timestamp seen, sent with every request
	// (timestamp.go).
	observed highWater
	closed   atomic.Bool

	// Routing (route.go): the range cache, connections to nodes learned
	// from the cluster, and the turn of replicas tried when a range's
	// leader is unknown.
	cache       *rangeCache
	dialOpts    []grpc.DialOption
	extra       extraConns
	replicaTurn atomic.Uint64
	// spreadTurn spreads bounded-staleness reads over replicas (route.go).
	spreadTurn atomic.Uint64
	// suspects are nodes that just failed to answer an attempt in time
	// (attempt.go).
	suspects suspects
	// watches spreads watch streams over connections (watch_conns.go).
	watches watchConns
	// leaseStreams are the shared KeepAlive streams (lease_stream.go).
	leaseStreams leaseStreams
	// recordGC deletes finished transaction records in batches
	// (txn_across.go).
	recordGC recordGC
	// resolutions are the committed transactions across ranges whose
	// intents may not be resolved yet (txn_resolve.go).
	resolutions txnResolutions
	// begins shares Begin calls between transactions (txn_begin.go).
	begins beginShare
}

// endpoint is one node address and its connection.
type endpoint struct {
	addr  string
	cc    *grpc.ClientConn
	kv    kvpb.KVClient // mux, or unary when multiplexing is disabled
	mux   *muxKV        // nil when multiplexing is disabled
	admin kvpb.AdminClient
	// backup serves backup and restore (backup.go).
	backup kvpb.BackupClient
	// txn serves transactions' timestamps and commits (txn.go): over the
	// mux stream unless multiplexing is disabled.
	txn kvpb.TxnClient
}

// newEndpoint wraps a connection to addr: KV calls go over its Multiplex
// stream unless Options.DisableMultiplexing (mux_kv.go).
func (c *Client) newEndpoint(addr string, cc *grpc.ClientConn) *endpoint {
	e := &endpoint{addr: addr, cc: cc, kv: kvpb.NewKVClient(cc), admin: kvpb.NewAdminClient(cc), backup: kvpb.NewBackupClient(cc),
		txn: kvpb.NewTxnClient(cc)}
	if !c.opts.DisableMultiplexing {
		e.mux = newMuxKV(e.kv)
		e.kv = e.mux
		e.txn = &muxTxn{m: e.mux, unary: e.txn}
	}
	return e
}

// close ends the endpoint's stream and closes its connection.
func (e *endpoint) close() error {
	if e.mux != nil {
		e.mux.close()
	}
	return e.cc.Close()
}

// Dial connects to the cluster through endpoints (host:port of any of its
// nodes). It returns once one endpoint answers a health check, or fails
// with ErrUnavailable naming every endpoint and why it failed, when ctx (or
// Options.DialTimeout, if ctx has no deadline) ends first.
func Dial(ctx context.Context, endpoints []string, opts *Options) (*Client, error) {
	o := opts.withDefaults()
	if len(endpoints) == 0 {
		return nil, &Error{Op: "Dial", Msg: "no endpoints given", kind: ErrInvalidArgument}
	}
	c := &Client{opts: o, clientID: rand.Uint64() | 1, cache: newRangeCache()}
	secOpts, err := o.securityDialOptions()
	if err != nil {
		return nil, &Error{Op: "Dial", Msg: err.Error(), kind: ErrInvalidArgument, cause: err}
	}
	dialOpts := append(secOpts,
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessageSize), grpc.MaxCallSendMsgSize(maxMessageSize)),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 30 * time.Second, Timeout: 10 * time.Second, PermitWithoutStream: true}),
		// Reconnect quickly after a node restarts (gRPC's default backoff
		// grows to two minutes).
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 3 * time.Second},
			MinConnectTimeout: 5 * time.Second,
		}),
	)
	// Static flow-control windows: no bandwidth probe (a PING and its
	// answer) per small response.
	dialOpts = append(dialOpts, flowcontrol.DialOptions()...)
	if o.ClusterID != "" {
		dialOpts = append(dialOpts, withClusterID(o.ClusterID)...)
	}
	dialOpts = append(dialOpts, o.DialOptions...)
	c.dialOpts = dialOpts
	for _, addr := range endpoints {
		addr = strings.TrimSpace(addr)
		cc, err := grpc.NewClient("passthrough:///"+addr, dialOpts...)
		if err != nil {
			c.Close()
			return nil, &Error{Op: "Dial", Endpoint: addr, Msg: err.Error(), kind: ErrInvalidArgument, cause: err}
		}
		c.conns = append(c.conns, c.newEndpoint(addr, cc))
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.DialTimeout)
		defer cancel()
	}
	if err := c.checkHealth(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// checkHealth finds an endpoint that answers the gRPC health check with
// SERVING and prefers it. It goes round the endpoints, backing off between
// rounds, until one answers or ctx ends, and then names each endpoint with
// the last reason it failed (e.g. "connection refused").
func (c *Client) checkHealth(ctx context.Context) error {
	reasons := make([]string, len(c.conns))
	var last error
	for round := 0; ; round++ {
		refused := 0
		for i, e := range c.conns {
			// Not WaitForReady: a node that cannot be reached fails at once
			// with the transport's reason.
			resp, err := healthpb.NewHealthClient(e.cc).Check(ctx, &healthpb.HealthCheckRequest{})
			if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
				c.preferred.Store(uint32(i))
				return nil
			}
			if st := status.Convert(err); err != nil && st.Code() == codes.FailedPrecondition {
				// The node refused us outright (a node of another cluster
				// than Options.ClusterID): waiting changes nothing.
				refused++
				reasons[i] = st.Message()
				last = err
				continue
			}
			switch {
			case err == nil:
				reasons[i] = "node reports " + resp.GetStatus().String()
			case ctx.Err() != nil && reasons[i] != "":
				// Keep the reason from before the deadline.
			case ctx.Err() != nil:
				reasons[i] = "no answer in time (" + describeState(e.cc) + ")"
			default:
				reasons[i] = explainTransportFailure(status.Convert(err).Message(), c.opts.TLS != nil)
				last = err
			}
		}
		if refused == len(c.conns) {
			return &Error{Op: "Dial", Msg: "every endpoint refused the client: " + strings.Join(reasons, "; "), kind: ErrInvalidArgument, cause: last}
		}
		if !sleep(ctx, c.backoff(round)) {
			break
		}
	}
	failures := make([]string, len(c.conns))
	for i, e := range c.conns {
		failures[i] = e.addr + ": " + reasons[i]
	}
	return &Error{Op: "Dial", Msg: "no endpoint is reachable: " + strings.Join(failures, "; "), kind: ErrUnavailable, cause: last}
}

func describeState(cc *grpc.ClientConn) string {
	switch s := cc.GetState(); s {
	case connectivity.TransientFailure:
		return "connection failing"
	default:
		return "connection " + strings.ToLower(s.String())
	}
}

// Close closes every connection. Requests in flight fail.
func (c *Client) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	var errs []error
	for _, e := range c.conns {
		errs = append(errs, e.close())
	}
	c.extra.Lock()
	for _, e := range c.extra.conns {
		errs = append(errs, e.close())
	}
	c.extra.conns = nil
	c.extra.Unlock()
	errs = append(errs, c.closeWatchConns())
	c.leaseStreams.closeAll()
	return errors.Join(errs...)
}

// Endpoints returns the endpoints the client was dialled with.
func (c *Client) Endpoints() []string {
	out := make([]string, len(c.conns))
	for i, e := range c.conns {
		out[i] = e.addr
	}
	return out
}

// header returns the request header for a read or, with a fresh sequence
// number, a write.
func (c *Client) header(write bool) *kvpb.RequestHeader {
	h := &kvpb.RequestHeader{Observed: toProto(c.observed.load())}
	if write {
		h.ClientId = c.clientID
		h.RequestSeq = c.seq.Add(1)
	}
	return h
}

// do runs call against the preferred endpoint, retrying on another (or the
// same, after backoff) while the error says the request was not applied and
// the deadline allows. A write is sent only over a connection that is up,
// so that a failure to connect is never mistaken for a write in flight.
func (c *Client) do(ctx context.Context, op string, write bool, call func(context.Context, *endpoint) error) error {
	if c.closed.Load() {
		return &Error{Op: op, Msg: "the client is closed", kind: ErrClosed}
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.opts.RequestTimeout)
		defer cancel()
	}
	var last *Error
	var leader string
	timedOut := 0
	for attempt := 0; ; attempt++ {
		raw := c.preferred.Load()
		// Pass over endpoints that just failed to answer in time, while
		// another is left.
		for i := 0; i < len(c.conns) && c.suspects.has(c.conns[raw%uint32(len(c.conns))].addr); i++ {
			raw++
		}
		idx := raw % uint32(len(c.conns))
		e := c.conns[idx]
		var retryAfter time.Duration
		if err := e.waitReady(ctx); err != nil {
			if ctx.Err() != nil {
				if last != nil {
					return last
				}
				return contextEnded(op, e.addr, ctx.Err())
			}
			last = &Error{Op: op, Endpoint: e.addr, Msg: err.Error(), kind: ErrUnavailable, cause: err}
		} else {
			// A read gets its own attempt timeout (attempt.go); a write
			// here (an admin request) has no deduplicating identity, so it
			// is never sent twice and keeps the whole deadline.
			actx, cancel := ctx, context.CancelFunc(func() {})
			limit := c.attemptTimeout(timedOut)
			if !write {
				actx, cancel = withAttemptTimeout(ctx, limit)
			}
			err := call(actx, e)
			expired := !write && attemptExpired(actx, ctx, err)
			cancel()
			if err == nil {
				c.suspects.clear(e.addr)
				return nil
			}
			if expired {
				timedOut++
				c.suspects.mark(e.addr, c.suspectFor())
				last = &Error{Op: op, Endpoint: e.addr, Code: codes.DeadlineExceeded, kind: ErrUnavailable, cause: err,
					Msg: fmt.Sprintf("no answer within the attempt timeout of %v", limit)}
				c.preferred.CompareAndSwap(raw, raw+1)
				continue
			}
			cl := classify(op, e.addr, write, err, ctx.Err())
			if !cl.retry {
				return cl.err
			}
			last, retryAfter = cl.err, cl.retryAfter
			leader = cl.leader
		}
		// Try the next endpoint, or the leader a NotLeader answer named if
		// it is one of ours; back off once every endpoint has failed.
		// (raw, not idx: the counter is reduced modulo the endpoint count
		// only when read.)
		next := raw + 1
		if j := c.endpointIndex(leader); j >= 0 {
			next = uint32(j)
		}
		leader = ""
		c.preferred.CompareAndSwap(raw, next)
		if (attempt+1)%len(c.conns) == 0 || retryAfter > 0 {
			if !sleep(ctx, max(retryAfter, c.backoff(attempt/len(c.conns)))) {
				return last
			}
		}
	}
}

// endpointIndex returns the index of the endpoint with address addr, or
// -1.
func (c *Client) endpointIndex(addr string) int {
	if addr == "" {
		return -1
	}
	for i, e := range c.conns {
		if e.addr == addr {
			return i
		}
	}
	return -1
}

// backoff returns the jittered wait before retry round n: 10ms doubling up
// to MaxBackoff, uniformly jittered between half and all of it.
func (c *Client) backoff(n int) time.Duration {
	d := c.opts.MaxBackoff
	if n < 20 {
		d = min(d, 10*time.Millisecond<<n)
	}
	return d/2 + rand.N(d/2+1)
}

func sleep(ctx context.Context, d time.Duration) bool {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// waitReady waits until the connection is up. It fails when the connection
// is in TRANSIENT_FAILURE (the node is unreachable: nothing was sent) or
// ctx ends.
func (e *endpoint) waitReady(ctx context.Context) error {
	for {
		s := e.cc.GetState()
		switch s {
		case connectivity.Ready:
			return nil
		case connectivity.Idle:
			e.cc.Connect()
		case connectivity.TransientFailure:
			return e.probe(ctx)
		case connectivity.Shutdown:
			return fmt.Errorf("connection to %s is closed", e.addr)
		}
		if !e.cc.WaitForStateChange(ctx, s) {
			return ctx.Err()
		}
	}
}

// probe asks a failing connection's health service for the reason it
// fails. The health check does not wait for the connection, so gRPC answers
// at once with the transport's error (e.g. "connection refused").
func (e *endpoint) probe(ctx context.Context) error {
	_, err := healthpb.NewHealthClient(e.cc).Check(ctx, &healthpb.HealthCheckRequest{})
	if err == nil {
		return nil // reconnected meanwhile
	}
	return fmt.Errorf("cannot connect: %s", status.Convert(err).Message())
}
