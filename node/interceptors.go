package node

import (
	"context"

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
func chainUnary(ics ...grpc.UnaryServerInterceptor) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		return ics[0](ctx, req, info, nextHandler(ics, 0, info, handler))
	}
}

// nextHandler is the handler interceptor i calls: interceptor i+1 with the
// rest of the chain, or the final handler after the last.
func nextHandler(ics []grpc.UnaryServerInterceptor, i int, info *grpc.UnaryServerInfo, final grpc.UnaryHandler) grpc.UnaryHandler {
	if i == len(ics)-1 {
		return final
	}
	return func(ctx context.Context, req any) (any, error) {
		return ics[i+1](ctx, req, info, nextHandler(ics, i+1, info, final))
	}
}
