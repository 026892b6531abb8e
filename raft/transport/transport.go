// Package transport carries Raft traffic between Shale nodes over gRPC
// (api/raftrpcpb).
//
// Messages: each node keeps one long-lived RaftMessages stream to every
// peer it talks to. Messages for all the ranges two nodes share travel on
// that one stream, grouped into batches: a processing round hands the
// transport every message bound for a node at once, and the peer's sender
// goroutine sends whatever has queued up as one RaftMessageBatch. Delivery
// is best effort, as Raft expects: a message that cannot be sent (no
// connection, queue full) is dropped and reported through
// Config.OnUnreachable, so that Raft probes the follower again later.
// A broken stream is re-dialled with jittered exponential backoff.
//
// Snapshots: a snapshot is streamed on its own Snapshot stream, in chunks,
// throttled by a node-wide rate limit so that catching up a replica does
// not starve the message streams or the disk. The receiver hands the
// chunks to the Handler, which applies them atomically.
//
// Threads: all methods of Transport are safe for concurrent use. Handler
// methods are called concurrently, from gRPC's goroutines.
package transport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

	"github.com/shaledb/shale/api/raftrpcpb"
)

// Handler receives what peers send to this node. raft.Store implements it.
type Handler interface {
	// HandleRaftMessages delivers one batch received from a peer. It runs
	// on the stream's receive goroutine, so it must queue the work and
	// return quickly. It returns what to tell the sender (ranges this node
	// does not hold, replicas it knows were removed), or nil.
	HandleRaftMessages(ctx context.Context, batch *raftrpcpb.RaftMessageBatch) *raftrpcpb.RaftMessageBatchAck
	// HandleSnapshot receives one range snapshot: it reads r until io.EOF
	// and returns once the snapshot is applied, or an error saying why it
	// was refused (the sender reports the snapshot failed to Raft).
	HandleSnapshot(ctx context.Context, h *raftrpcpb.SnapshotHeader, r *SnapshotReader) error
}

// Resolver maps a node ID to the address of its gRPC server.
type Resolver func(nodeID uint64) (addr string, err error)

// Config configures a Transport. NodeID, ClusterID, Resolver and Handler
// are required.
type Config struct {
	NodeID    uint64
	ClusterID string
	Resolver  Resolver
	Handler   Handler
	// OnUnreachable is called (from a sender goroutine) with messages that
	// could not be delivered to toNode. May be nil.
	OnUnreachable func(toNode uint64, msgs []*raftrpcpb.RangeMessage)
	// OnAck is called (from a stream's receive goroutine) with what toNode
	// reported back about the messages it received. May be nil.
	OnAck func(toNode uint64, ack *raftrpcpb.RaftMessageBatchAck)
	// OnBatchSent is called (from a sender goroutine) after each batch
	// (one gRPC message on the peer's stream, the messages of many ranges
	// together) is handed to the stream, with its message count. May be
	// nil.
	OnBatchSent func(toNode uint64, msgs int)

	// QueueLimit bounds the messages queued for one peer; more are dropped
	// (and reported unreachable). Default 8192.
	QueueLimit int
	// MaxBatchBytes bounds the approximate size of one RaftMessageBatch.
	// Default 4 MiB. A single larger message is still sent on its own.
	MaxBatchBytes int
	// SnapshotRate limits the bytes per second of all outgoing snapshots
	// together. Default 32 MiB/s; a negative value means unlimited.
	SnapshotRate int64
	// SnapshotChunkBytes is the target size of one data chunk. Default
	// 256 KiB.
	SnapshotChunkBytes int
	// BackoffMin and BackoffMax bound the reconnect delay (jittered,
	// doubling). Defaults 50 ms and 2 s.
	BackoffMin, BackoffMax time.Duration
	// LocalIP, if set, is the source address of connections to peers (a
	// node with several addresses talks to its peers from the one it
	// advertises, so that firewall rules by address apply to it).
	LocalIP net.IP
	// Credentials gives the credentials securing the connection to each
	// peer node (mutual TLS between nodes, checking that the server is
	// the node dialled); nil means plaintext (insecure mode).
	Credentials func(nodeID uint64) credentials.TransportCredentials
	// DialOptions are added to the defaults (credentials, keepalive) when
	// connecting to peers.
	DialOptions []grpc.DialOption
	// Logger; defaults to slog.Default().
	Logger *slog.Logger
}

func (c *Config) setDefaults() error {
	if c.NodeID == 0 || c.ClusterID == "" || c.Resolver == nil || c.Handler == nil {
		return errors.New("transport: NodeID, ClusterID, Resolver and Handler are required")
	}
	if c.QueueLimit <= 0 {
		c.QueueLimit = 8192
	}
	if c.MaxBatchBytes <= 0 {
		c.MaxBatchBytes = 4 << 20
	}
	if c.SnapshotRate == 0 {
		c.SnapshotRate = 32 << 20
	}
	if c.SnapshotChunkBytes <= 0 {
		c.SnapshotChunkBytes = 256 << 10
	}
	if c.BackoffMin <= 0 {
		c.BackoffMin = 50 * time.Millisecond
	}
	if c.BackoffMax < c.BackoffMin {
		c.BackoffMax = max(2*time.Second, c.BackoffMin)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// ErrClosed is returned by operations on a closed Transport.
var ErrClosed = errors.New("transport: closed")

// MaxMessageBytes is the largest gRPC message the transport sends or
// accepts: a batch carries at most MaxBatchBytes, but one Raft message
// (entries of up to the node's value limit) may exceed it.
const MaxMessageBytes = 256 << 20

// ServerOptions returns the gRPC server options a node's server must use
// for the transport to work: message size limits that admit large Raft
// messages, and a keepalive policy that admits the transport's pings (the
// default policy would close connections that ping as often as the
// transport does to notice dead peers).
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(MaxMessageBytes),
		grpc.MaxSendMsgSize(MaxMessageBytes),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime:             500 * time.Millisecond,
			PermitWithoutStream: true,
		}),
		grpc.KeepaliveParams(ServerKeepalive),
	}
}

// ServerKeepalive is the server side of the transport's keepalive: pings
// that notice a dead peer within seconds. A server that sets more
// keepalive parameters (idle limits) must start from these.
var ServerKeepalive = keepalive.ServerParameters{
	Time:    2 * time.Second,
	Timeout: 2 * time.Second,
}

// Transport sends Raft messages and snapshots to peers and receives them
// from peers (once registered on a gRPC server).
type Transport struct {
	raftrpcpb.UnimplementedRaftTransportServer

	cfg     Config
	limiter *rate.Limiter
	ctx     context.Context // canceled by Close
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	// drain is closed by StopServing: streams served for peers end.
	drain     chan struct{}
	drainOnce sync.Once

	mu struct {
		sync.Mutex
		closed bool
		peers  map[uint64]*peer
	}
}

// New returns a Transport. It dials nothing until there is something to
// send.
func New(cfg Config) (*Transport, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	t := &Transport{cfg: cfg, drain: make(chan struct{})}
	lim := rate.Limit(cfg.SnapshotRate)
	burst := cfg.SnapshotChunkBytes * 2
	if cfg.SnapshotRate < 0 {
		lim = rate.Inf
	} else if int64(burst) < cfg.SnapshotRate/10 {
		burst = int(min(cfg.SnapshotRate/10, math.MaxInt32))
	}
	t.limiter = rate.NewLimiter(lim, burst)
	t.ctx, t.cancel = context.WithCancel(context.Background())
	t.mu.peers = make(map[uint64]*peer)
	return t, nil
}

// Register registers the transport's service on s. The server should be
// built with ServerOptions.
func (t *Transport) Register(s *grpc.Server) {
	raftrpcpb.RegisterRaftTransportServer(s, t)
}

// Send queues msgs for delivery to node toNode and returns at once. Every
// message must have ToNodeId == toNode. Messages that cannot be queued are
// reported through Config.OnUnreachable. The transport takes ownership of
// msgs: the caller must not modify them afterwards (the Raft entries they
// carry are immutable by Raft's contract, so they may be marshalled on the
// sender goroutine).
func (t *Transport) Send(toNode uint64, msgs []*raftrpcpb.RangeMessage) {
	if len(msgs) == 0 {
		return
	}
	p, err := t.peer(toNode)
	if err != nil {
		t.unreachable(toNode, msgs)
		return
	}
	if dropped := p.enqueue(msgs); len(dropped) > 0 {
		t.unreachable(toNode, dropped)
	}
}

func (t *Transport) unreachable(toNode uint64, msgs []*raftrpcpb.RangeMessage) {
	if t.cfg.OnUnreachable != nil && len(msgs) > 0 {
		t.cfg.OnUnreachable(toNode, msgs)
	}
}

// peer returns the sender for nodeID, starting it on first use.
func (t *Transport) peer(nodeID uint64) (*peer, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.closed {
		return nil, ErrClosed
	}
	if nodeID == t.cfg.NodeID {
		return nil, fmt.Errorf("transport: node %d sending to itself", nodeID)
	}
	p := t.mu.peers[nodeID]
	if p == nil {
		p = newPeer(t, nodeID)
		t.mu.peers[nodeID] = p
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			p.run()
		}()
	}
	return p, nil
}

// StopServing ends the streams this node serves for its peers (so that a
// graceful stop of the gRPC server does not wait for them forever); peers
// see the streams end and reconnect elsewhere or later. Sending is not
// affected.
func (t *Transport) StopServing() {
	t.drainOnce.Do(func() { close(t.drain) })
}

// Close stops every sender and closes every connection. Queued messages
// are dropped. Streams served for peers end when the gRPC server stops.
func (t *Transport) Close() {
	t.mu.Lock()
	if t.mu.closed {
		t.mu.Unlock()
		return
	}
	t.mu.closed = true
	peers := t.mu.peers
	t.mu.Unlock()
	t.cancel()
	for _, p := range peers {
		p.close()
	}
	t.wg.Wait()
}

// PeerStats is what a sender reports about one peer.
type PeerStats struct {
	NodeID     uint64
	Connected  bool
	Queued     int
	Sent       uint64 // messages
	Dropped    uint64 // messages
	Reconnects uint64
}

// Stats returns the state of every peer sender.
func (t *Transport) Stats() []PeerStats {
	t.mu.Lock()
	peers := make([]*peer, 0, len(t.mu.peers))
	for _, p := range t.mu.peers {
		peers = append(peers, p)
	}
	t.mu.Unlock()
	out := make([]PeerStats, 0, len(peers))
	for _, p := range peers {
		out = append(out, p.stats())
	}
	return out
}
