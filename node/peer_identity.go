package node

import (
	"context"
	"crypto/x509"
	"fmt"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/api/raftrpcpb"
	"github.com/shaledb/shale/internal/certs"
)

// Node identity (docs/security.md, "Node identity"). A node certificate
// may be bound to one node ID (certs.NodeIDURI). The node ID a peer claims
// travels in its messages - from_node_id of every Raft message batch, of
// each range message in it, and of a snapshot's header - and in the node
// descriptor of AddNode; a caller whose certificate is bound to node N may
// claim only N. A claim of another ID is refused with PermissionDenied and
// logged: it is a stolen or misissued certificate at work. An unbound node
// certificate (made before binding existed, or with --node-id 0) binds
// nothing: its holder is trusted as any node, as before.

// raftTransportPrefix is the Raft transport service's method prefix.
const raftTransportPrefix = "/shale.raftrpc.v1.RaftTransport/"

// boundNodeID returns the node ID the caller's verified node certificate
// is bound to, and whether there is one. Callers without a certificate,
// with a client (not node) certificate, or with an unbound node
// certificate are not bound.
func boundNodeID(ctx context.Context) (uint64, bool, error) {
	leaf := verifiedLeaf(ctx)
	if leaf == nil {
		return 0, false, nil
	}
	if role, err := certs.RoleOf(leaf); err != nil || role != certs.RoleNode {
		return 0, false, nil
	}
	return certs.NodeIDOf(leaf)
}

// verifiedLeaf is the caller's certificate when TLS verified it, else nil.
func verifiedLeaf(ctx context.Context) *x509.Certificate {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.VerifiedChains) == 0 || len(ti.State.PeerCertificates) == 0 {
		return nil
	}
	return ti.State.PeerCertificates[0]
}

// checkClaim refuses a claim of node ID claimed by a caller bound to
// bound.
func (n *Node) checkClaim(method string, bound, claimed uint64) error {
	if claimed == bound {
		return nil
	}
	n.metrics.impersonation.Inc()
	n.log.Warn("refused a peer claiming another node's ID: its certificate is bound to another node",
		"method", method, "certificate_node", bound, "claimed_node", claimed)
	return status.Errorf(codes.PermissionDenied, "%s: the certificate is bound to node %d; it cannot act as node %d",
		method, bound, claimed)
}

// identityStreamInterceptor checks, on the Raft transport, every node ID
// a bound caller claims in the messages it sends.
func (n *Node) identityStreamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if n.sec.tls == nil || !strings.HasPrefix(info.FullMethod, raftTransportPrefix) {
		return handler(srv, ss)
	}
	id, bound, err := boundNodeID(ss.Context())
	if err != nil {
		return status.Errorf(codes.PermissionDenied, "%s: node certificate: %v", info.FullMethod, err)
	}
	if !bound {
		return handler(srv, ss)
	}
	cs := &claimCheckedStream{ServerStream: ss, n: n, method: info.FullMethod, bound: id}
	err = handler(srv, cs)
	if refused := cs.refused.Load(); refused != nil {
		// The transport's handler may take a failed receive for the end
		// of the stream; the sender must learn why it was cut off.
		return *refused
	}
	return err
}

// identityUnaryInterceptor checks the node ID a bound caller registers
// with AddNode (a node joining names itself there). A forwarded AddNode
// is checked too, against the forwarding member's certificate, and so
// refused when it names another node: the header that marks forwarding
// proves nothing, and trusting it would let a thief register another
// node's address. A node joining with a bound certificate must therefore
// join through a member holding a replica of meta (docs/security.md).
func (n *Node) identityUnaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if r, ok := req.(*kvpb.AddNodeRequest); ok && n.sec.tls != nil && r.GetNode().GetNodeId() != 0 {
		id, bound, err := boundNodeID(ctx)
		if err != nil {
			return nil, status.Errorf(codes.PermissionDenied, "%s: node certificate: %v", info.FullMethod, err)
		}
		if bound {
			if err := n.checkClaim(info.FullMethod, id, r.GetNode().GetNodeId()); err != nil {
				return nil, err
			}
		}
	}
	return handler(ctx, req)
}

// claimCheckedStream checks each received message's claimed node IDs.
type claimCheckedStream struct {
	grpc.ServerStream
	n       *Node
	method  string
	bound   uint64
	refused atomic.Pointer[error] // the first refusal, if any
}

func (s *claimCheckedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if err := s.check(m); err != nil {
		s.refused.CompareAndSwap(nil, &err)
		return err
	}
	return nil
}

// check checks one received message's claims.
func (s *claimCheckedStream) check(m any) error {
	switch m := m.(type) {
	case *raftrpcpb.RaftMessageBatch:
		if err := s.n.checkClaim(s.method, s.bound, m.GetFromNodeId()); err != nil {
			return err
		}
		for _, rm := range m.GetMessages() {
			if err := s.n.checkClaim(s.method, s.bound, rm.GetFromNodeId()); err != nil {
				return err
			}
		}
	case *raftrpcpb.SnapshotChunk:
		if h := m.GetHeader(); h != nil {
			if err := s.n.checkClaim(s.method, s.bound, h.GetFromNodeId()); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkOwnBinding refuses to run node id with a certificate bound to
// another node: the operator swapped two nodes' files.
func checkOwnBinding(leaf *x509.Certificate, id uint64) error {
	certID, bound, err := certs.NodeIDOf(leaf)
	switch {
	case err != nil:
		return fmt.Errorf("node: --tls-cert: %w", err)
	case bound && id != 0 && certID != id:
		return fmt.Errorf("node: --tls-cert is bound to node %d, but this is node %d: give each node its own certificate", certID, id)
	}
	return nil
}
