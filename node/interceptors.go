package node

import (
	"context"
	"sync"

	"google.golang.org/grpc"
)

// The unary interceptor chain. Every unary request runs through it in this
// order, whether it arrives as its own gRPC call or as one call of a
// KV.Multiplex stream (mux_server.go):
//
//	metrics    count and time the request under its method's name
//	auth       authenticate the caller and check the method's role
//	identity   a caller whose node certificate is bound to a node ID may
//	           claim no other (peer_identity.go)
//	cluster    refuse a call that names another cluster (cluster_check.go),
//	           after auth, so that only a caller let in learns the ID
//	deadline   give a request without a deadline the default one
//	admit      refuse requests once the node is stopping; count the rest
//	hot        count a served request against its range, sample its keys
//	           (hot.go)
//	recover    turn a handler's panic into an Internal error
//	clock      answer a liveness probe with this node's clock (clock.go)
//
// One chain for both paths, so that a multiplexed call can never skip a
// check a unary one gets.

// newUnaryChain returns the node's unary interceptor chain.
func (n *Node) newUnaryChain() grpc.UnaryServerInterceptor {
	return chainUnary(
		n.metrics.unaryInterceptor,
		n.sec.auth.unaryInterceptor,
		n.identityUnaryInterceptor,
		n.clusterUnaryInterceptor,
		n.cfg.Conn.deadlineInterceptor,
		n.admitInterceptor,
		n.hot.unaryInterceptor,
		n.recoverInterceptor,
		n.clockHeaderInterceptor,
	)
}

// chainUnary composes interceptors into one: the first is outermost.
//
// Each request needs a handler per interceptor (the rest of the chain
// from there on). Built per request, as closures, they were eight
// allocations of every request; a chainCall holds them built once, and
// is reused through a pool: a request takes one, fills in its info and
// final handler, and gives it back when the chain returns. An
// interceptor may call its handler more than once, but never after it
// has returned (none of ours keeps it).
func chainUnary(ics ...grpc.UnaryServerInterceptor) grpc.UnaryServerInterceptor {
	pool := sync.Pool{New: func() any { return newChainCall(ics) }}
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		c := pool.Get().(*chainCall)
		c.info, c.final = info, handler
		resp, err := ics[0](ctx, req, info, c.handlers[0])
		c.info, c.final = nil, nil
		pool.Put(c)
		return resp, err
	}
}

// chainCall is one request's way through a chain: handlers[i] is the
// handler interceptor i calls (interceptor i+1, or final after the last).
type chainCall struct {
	info     *grpc.UnaryServerInfo
	final    grpc.UnaryHandler
	handlers []grpc.UnaryHandler
}

func newChainCall(ics []grpc.UnaryServerInterceptor) *chainCall {
	c := &chainCall{handlers: make([]grpc.UnaryHandler, len(ics))}
	for i := range ics {
		if i == len(ics)-1 {
			c.handlers[i] = func(ctx context.Context, req any) (any, error) { return c.final(ctx, req) }
			continue
		}
		next, h := ics[i+1], i+1
		c.handlers[i] = func(ctx context.Context, req any) (any, error) {
			return next(ctx, req, c.info, c.handlers[h])
		}
	}
	return c
}
