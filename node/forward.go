package node

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/metadata"

	"github.com/shaledb/shale/api/flowcontrol"
	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/raft/transport"
)

// peerClients are Admin clients to the other nodes, for forwarding
// operator requests to whoever must carry them out (a range's leader, a
// node holding meta), so that an operator can send them to any node.
type peerClients struct {
	n  *Node
	mu struct {
		sync.Mutex
		conns map[peerKey]*grpc.ClientConn
	}
}

// peerKey names a connection to another node.
type peerKey struct {
	id   uint64
	addr string
}

func newPeerClients(n *Node) *peerClients {
	p := &peerClients{n: n}
	p.mu.conns = map[peerKey]*grpc.ClientConn{}
	return p
}

// admin returns an Admin client for node id.
func (p *peerClients) admin(id uint64) (kvpb.AdminClient, error) {
	cc, err := p.conn(id)
	if err != nil {
		return nil, err
	}
	return kvpb.NewAdminClient(cc), nil
}

// conn returns a connection to node id's gRPC server.
func (p *peerClients) conn(id uint64) (*grpc.ClientConn, error) {
	d := p.n.nodeDescriptor(id)
	if d.GetAddress() == "" || d.GetAddress() == unknownAddress {
		return nil, fmt.Errorf("no address known for node %d", id)
	}
	addr := d.GetAddress()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.conns == nil {
		return nil, fmt.Errorf("node is stopping")
	}
	// Keyed by node and address: the connection checks that the server
	// is node id (its certificate), so another node at the same address
	// gets its own.
	key := peerKey{id: id, addr: addr}
	cc := p.mu.conns[key]
	if cc == nil {
		var err error
		opts := []grpc.DialOption{grpc.WithTransportCredentials(p.n.peerCredentials(id)),
			// Reconnect within a second of a node coming back (gRPC's
			// default backoff grows to two minutes).
			grpc.WithConnectParams(grpc.ConnectParams{
				Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
				MinConnectTimeout: 2 * time.Second,
			})}
		if ip := p.n.localIP(); ip != nil {
			opts = append(opts, grpc.WithContextDialer(transport.DialerFrom(ip)))
		}
		opts = append(opts, p.n.withClusterID()...)
		opts = append(opts, flowcontrol.DialOptions()...)
		cc, err = grpc.NewClient("passthrough:///"+addr, opts...)
		if err != nil {
			return nil, err
		}
		p.mu.conns[key] = cc
	}
	return cc, nil
}

func (p *peerClients) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, cc := range p.mu.conns {
		cc.Close()
	}
	p.mu.conns = nil
}

// forwardedMD marks a request already forwarded once (in gRPC metadata),
// so that two nodes with different views of a leader cannot bounce it
// between them forever.
const forwardedMD = "shale-forwarded"

func forwardCtx(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, forwardedMD, "1")
}

func isForwarded(ctx context.Context) bool {
	md, _ := metadata.FromIncomingContext(ctx)
	return len(md.Get(forwardedMD)) > 0
}

// readyAdmin returns an Admin client for node id once its connection is
// up, waiting up to wait (and ctx): a call on a connection that is still
// connecting, or in gRPC's reconnect backoff after the node was down,
// would fail at once without reaching the node. An error means nothing
// was sent.
func (p *peerClients) readyAdmin(ctx context.Context, id uint64, wait time.Duration) (kvpb.AdminClient, error) {
	cc, err := p.conn(id)
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for {
		s := cc.GetState()
		switch s {
		case connectivity.Ready:
			return kvpb.NewAdminClient(cc), nil
		case connectivity.Idle, connectivity.TransientFailure:
			cc.Connect()
		case connectivity.Shutdown:
			return nil, fmt.Errorf("connection to node %d is closed", id)
		}
		if !cc.WaitForStateChange(wctx, s) {
			return nil, fmt.Errorf("node %d is not reachable (connection %s)", id, strings.ToLower(s.String()))
		}
	}
}
