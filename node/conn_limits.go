package node

import (
	"context"
	"fmt"
	"net"
	"time"

	"golang.org/x/net/netutil"
	"google.golang.org/grpc"

	"github.com/shaledb/shale/raft/transport"
)

// ConnLimits bound what one connection, and all of them together, can hold
// of a node, so that a slow or hostile client cannot exhaust it. Every
// zero field keeps its default (docs/security.md, "Limits").
type ConnLimits struct {
	// MaxConnections bounds the gRPC connections open at once; the node
	// stops accepting (new ones wait in the kernel's backlog) at the limit
	// (4096).
	MaxConnections int
	// MaxConcurrentStreams bounds the RPCs in flight on one connection;
	// a client past it waits for one of its own to finish (256).
	MaxConcurrentStreams uint32
	// HandshakeTimeout bounds the TLS and HTTP/2 handshake of a new
	// connection: one that sends nothing is closed after it (10s).
	HandshakeTimeout time.Duration
	// MaxConnectionIdle closes a connection with no RPC for this long
	// (15 min); clients reconnect transparently.
	MaxConnectionIdle time.Duration
	// DefaultRequestTimeout is the deadline of a unary request that comes
	// without one (30s), so that no request holds the node forever.
	DefaultRequestTimeout time.Duration
	// MaxMuxCallsPerStream bounds the calls in flight on one KV.Multiplex
	// stream (512): past it the node stops reading the stream until one
	// finishes, and HTTP/2 flow control holds the client back.
	MaxMuxCallsPerStream int
	// DisableMultiplex answers KV.Multiplex with Unimplemented, so that
	// clients fall back to one unary call per request.
	DisableMultiplex bool
}

func (l *ConnLimits) setDefaults() {
	if l.MaxConnections <= 0 {
		l.MaxConnections = 4096
	}
	if l.MaxConcurrentStreams == 0 {
		l.MaxConcurrentStreams = 256
	}
	if l.HandshakeTimeout <= 0 {
		l.HandshakeTimeout = 10 * time.Second
	}
	if l.MaxConnectionIdle <= 0 {
		l.MaxConnectionIdle = 15 * time.Minute
	}
	if l.DefaultRequestTimeout <= 0 {
		l.DefaultRequestTimeout = 30 * time.Second
	}
	if l.MaxMuxCallsPerStream <= 0 {
		l.MaxMuxCallsPerStream = 512
	}
}

// serverOptions are the gRPC server options enforcing l. They come after
// the transport's (keepalive enforcement and pings), which they extend.
func (l ConnLimits) serverOptions() []grpc.ServerOption {
	// The transport's ping settings must stay: they are how peers notice
	// a dead node quickly.
	ka := transport.ServerKeepalive
	ka.MaxConnectionIdle = l.MaxConnectionIdle
	return []grpc.ServerOption{
		grpc.MaxConcurrentStreams(l.MaxConcurrentStreams),
		grpc.ConnectionTimeout(l.HandshakeTimeout),
		grpc.KeepaliveParams(ka),
	}
}

// limitListener caps the connections lis hands out at MaxConnections.
func (l ConnLimits) limitListener(lis net.Listener) net.Listener {
	return netutil.LimitListener(lis, l.MaxConnections)
}

// deadlineInterceptor gives a request without a deadline the default one.
func (l ConnLimits) deadlineInterceptor(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, l.DefaultRequestTimeout)
		defer cancel()
	}
	return handler(ctx, req)
}

func (l ConnLimits) String() string {
	return fmt.Sprintf("max_connections=%d max_streams_per_conn=%d handshake_timeout=%v idle_timeout=%v default_deadline=%v max_mux_calls_per_stream=%d multiplex=%v",
		l.MaxConnections, l.MaxConcurrentStreams, l.HandshakeTimeout, l.MaxConnectionIdle, l.DefaultRequestTimeout,
		l.MaxMuxCallsPerStream, !l.DisableMultiplex)
}
