package node

import (
	"context"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/shaledb/shale/internal/certs"
)

// Method roles: the weakest role allowed to call each method. A method
// not listed needs admin (deny by default: a new RPC is an operator's
// until someone decides otherwise).
var methodRoles = map[string]certs.Role{
	"/grpc.health.v1.Health/Check": certs.RoleNone,
	"/grpc.health.v1.Health/Watch": certs.RoleNone,
	"/grpc.health.v1.Health/List":  certs.RoleNone,

	"/shale.kv.v1.KV/Get":                 certs.RoleReadOnly,
	"/shale.kv.v1.KV/Scan":                certs.RoleReadOnly,
	"/shale.kv.v1.KV/BatchGet":            certs.RoleReadOnly,
	"/shale.kv.v1.KV/Multiplex":           certs.RoleReadOnly, // each call on it is authorized as its own method
	"/shale.kv.v1.Watch/Watch":            certs.RoleReadOnly,
	"/shale.kv.v1.Admin/Status":           certs.RoleReadOnly,
	"/shale.kv.v1.Admin/RangeLookup":      certs.RoleReadOnly,
	"/shale.kv.v1.Admin/Ranges":           certs.RoleReadOnly,
	"/shale.kv.v1.Admin/Nodes":            certs.RoleReadOnly,
	"/shale.kv.v1.Admin/HotSpots":         certs.RoleReadOnly, // names keys: readers may see them anyway
	"/shale.kv.v1.KV/Put":                 certs.RoleReadWrite,
	"/shale.kv.v1.KV/Delete":              certs.RoleReadWrite,
	"/shale.kv.v1.KV/Batch":               certs.RoleReadWrite,
	"/shale.kv.v1.KV/CompareAndSwap":      certs.RoleReadWrite,
	"/shale.kv.v1.KV/DeleteRange":         certs.RoleReadWrite,
	"/shale.kv.v1.Lease/TimeToLive":       certs.RoleReadOnly,
	"/shale.kv.v1.Lease/Leases":           certs.RoleReadOnly,
	"/shale.kv.v1.Lease/Grant":            certs.RoleReadWrite,
	"/shale.kv.v1.Lease/KeepAlive":        certs.RoleReadWrite,
	"/shale.kv.v1.Lease/Revoke":           certs.RoleReadWrite,
	"/shale.kv.v1.LeaseInternal/":         certs.RoleNode,
	"/shale.kv.v1.Protection/Protections": certs.RoleReadOnly, // Protect and Release: admin, as backups are
	"/shale.kv.v1.Txn/Begin":              certs.RoleReadOnly, // a timestamp; read-only transactions need it
	"/shale.kv.v1.Txn/Commit":             certs.RoleReadWrite,
	"/shale.kv.v1.Txn/Write":              certs.RoleReadWrite,
	"/shale.kv.v1.Txn/Record":             certs.RoleReadWrite,
	"/shale.kv.v1.Txn/Resolve":            certs.RoleReadWrite,
	"/shale.kv.v1.Txn/Prevent":            certs.RoleReadWrite,
	"/shale.kv.v1.Txn/WaitFor":            certs.RoleNode, // nodes' push graph
	"/shale.kv.v1.Txn/Lock":               certs.RoleReadWrite,
	"/shale.raftrpc.v1.RaftTransport/":    certs.RoleNode, // every method of the service
	"/shale.raftrpc.v1.TimestampOracle/":  certs.RoleNode,
}

// requiredRole returns the role fullMethod needs.
func requiredRole(fullMethod string) certs.Role {
	if r, ok := methodRoles[fullMethod]; ok {
		return r
	}
	if i := strings.LastIndexByte(fullMethod, '/'); i > 0 {
		if r, ok := methodRoles[fullMethod[:i+1]]; ok {
			return r
		}
	}
	return certs.RoleAdmin
}

// principal is who sent a request, as authenticated.
type principal struct {
	name string
	role certs.Role
	via  string // "token" or "certificate"
}

// authorizer authenticates every gRPC request and checks its role. With
// TLS off it is disabled: every request is allowed (insecure mode).
type authorizer struct {
	enabled bool
	tokens  *tokenFile // nil: bearer tokens are not accepted
}

// identify returns the request's principal: the bearer token's, if the
// request carries an "authorization: Bearer <token>" header, else the
// verified client certificate's. A token that is not listed is an error
// even when a certificate is present: a client that sends a wrong token
// means to be someone the certificate may not be.
func (a *authorizer) identify(ctx context.Context) (principal, error) {
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if vals := md.Get("authorization"); len(vals) > 0 {
			tok, ok := strings.CutPrefix(vals[0], "Bearer ")
			if !ok {
				return principal{}, status.Error(codes.Unauthenticated, `authorization header: want "Bearer <token>"`)
			}
			if a.tokens == nil {
				return principal{}, status.Error(codes.Unauthenticated, "this node accepts no bearer tokens (no token file); use a client certificate")
			}
			e, ok := a.tokens.lookup(strings.TrimSpace(tok))
			if !ok {
				return principal{}, status.Error(codes.Unauthenticated, "unknown bearer token")
			}
			return principal{name: e.name, role: e.role, via: "token"}, nil
		}
	}
	p, ok := peer.FromContext(ctx)
	if !ok {
		return principal{}, status.Error(codes.Unauthenticated, "no peer information")
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.VerifiedChains) == 0 || len(ti.State.PeerCertificates) == 0 {
		return principal{}, status.Error(codes.Unauthenticated, "no client certificate signed by the cluster CA and no bearer token")
	}
	leaf := ti.State.PeerCertificates[0]
	role, err := certs.RoleOf(leaf)
	if err != nil {
		return principal{}, status.Errorf(codes.PermissionDenied, "client certificate: %v", err)
	}
	return principal{name: leaf.Subject.CommonName, role: role, via: "certificate"}, nil
}

// authorize checks that the request may call fullMethod.
func (a *authorizer) authorize(ctx context.Context, fullMethod string) error {
	if !a.enabled {
		return nil
	}
	need := requiredRole(fullMethod)
	if need == certs.RoleNone {
		return nil
	}
	who, err := a.identify(ctx)
	if err != nil {
		return err
	}
	if who.role < need {
		return status.Errorf(codes.PermissionDenied, "%s needs role %v; %s %q has role %v",
			fullMethod, need, who.via, who.name, who.role)
	}
	return nil
}

func (a *authorizer) unaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := a.authorize(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

func (a *authorizer) streamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := a.authorize(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	return handler(srv, ss)
}
