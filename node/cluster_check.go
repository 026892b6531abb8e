package node

import (
	"context"
	"path"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/shaledb/shale/api/kvpb"
)

// Calls that name a cluster (kvpb.ClusterIDMetadata) must name this node's:
// a node or client of another cluster is refused before anything runs
// (identity.go says why IDs differ between clusters).

// checkClusterID refuses a call that names another cluster.
func (n *Node) checkClusterID(ctx context.Context, method string) error {
	// The one key, not a copy of every header (FromIncomingContext).
	ids := metadata.ValueFromIncomingContext(ctx, kvpb.ClusterIDMetadata)
	if len(ids) == 0 || ids[0] == n.ident.ClusterID {
		return nil
	}
	n.metrics.foreignCluster.Inc()
	return status.Errorf(codes.FailedPrecondition, "%s: this is node %d of cluster %q; the call is for cluster %q: not applied",
		path.Base(method), n.ident.NodeID, n.ident.ClusterID, ids[0])
}

// clusterUnaryInterceptor is checkClusterID for unary calls.
func (n *Node) clusterUnaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := n.checkClusterID(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

// clusterStreamInterceptor is checkClusterID for streams (KV.Multiplex and
// the Raft transport's streams, whose messages also carry the ID).
func (n *Node) clusterStreamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := n.checkClusterID(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	return handler(srv, ss)
}

// withClusterID returns dial options that name this node's cluster on
// every call made over the connection.
func (n *Node) withClusterID() []grpc.DialOption {
	id := n.ident.ClusterID
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			return invoker(metadata.AppendToOutgoingContext(ctx, kvpb.ClusterIDMetadata, id), method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			return streamer(metadata.AppendToOutgoingContext(ctx, kvpb.ClusterIDMetadata, id), desc, cc, method, opts...)
		}),
	}
}
