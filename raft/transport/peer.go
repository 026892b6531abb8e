package transport

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"

	"github.com/shaledb/shale/api/flowcontrol"
	"github.com/shaledb/shale/api/raftrpcpb"
)

// healthyStream is how long a stream must have lived for its failure to
// count as a new outage (backoff restarts from its minimum).
const healthyStream = time.Second

// peer is the sending side of the message stream to one node: a bounded
// queue that Send fills and one goroutine (run) that drains it into
// batches on a long-lived stream, re-dialling with backoff when the stream
// breaks.
type peer struct {
	t      *Transport
	nodeID uint64
	// wake has room for one pending signal: "the queue may have grown".
	wake chan struct{}

	mu struct {
		sync.Mutex
		queue      []*raftrpcpb.RangeMessage
		conn       *grpc.ClientConn
		closed     bool
		connected  bool
		sent       uint64
		dropped    uint64
		reconnects uint64
	}
}

func newPeer(t *Transport, nodeID uint64) *peer {
	return &peer{t: t, nodeID: nodeID, wake: make(chan struct{}, 1)}
}

// enqueue appends msgs to the queue and returns the ones that did not fit.
func (p *peer) enqueue(msgs []*raftrpcpb.RangeMessage) (dropped []*raftrpcpb.RangeMessage) {
	p.mu.Lock()
	if p.mu.closed {
		p.mu.Unlock()
		return msgs
	}
	if room := p.t.cfg.QueueLimit - len(p.mu.queue); room < len(msgs) {
		room = max(room, 0)
		dropped = msgs[room:]
		msgs = msgs[:room]
		p.mu.dropped += uint64(len(dropped))
	}
	p.mu.queue = append(p.mu.queue, msgs...)
	p.mu.Unlock()
	p.signal()
	return dropped
}

func (p *peer) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// drainLocked empties the queue and returns what it held.
// REQUIRES: p.mu is held.
func (p *peer) drainLocked() []*raftrpcpb.RangeMessage {
	q := p.mu.queue
	p.mu.queue = nil
	p.mu.dropped += uint64(len(q))
	return q
}

// dropQueue discards every queued message and reports them unreachable.
func (p *peer) dropQueue() {
	p.mu.Lock()
	q := p.drainLocked()
	p.mu.Unlock()
	p.t.unreachable(p.nodeID, q)
}

func (p *peer) close() {
	p.mu.Lock()
	p.mu.closed = true
	p.mu.queue = nil
	conn := p.mu.conn
	p.mu.conn = nil
	p.mu.Unlock()
	p.signal()
	if conn != nil {
		_ = conn.Close()
	}
}

func (p *peer) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.closed
}

// client returns a connection to the peer, creating it on first use. The
// connection is lazy: gRPC dials when a stream is opened and redials on
// its own; the address is resolved once per connection.
func (p *peer) client() (*grpc.ClientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.closed {
		return nil, ErrClosed
	}
	if p.mu.conn != nil {
		return p.mu.conn, nil
	}
	addr, err := p.t.cfg.Resolver(p.nodeID)
	if err != nil {
		return nil, err
	}
	var creds credentials.TransportCredentials = insecure.NewCredentials()
	if p.t.cfg.Credentials != nil {
		creds = p.t.cfg.Credentials(p.nodeID)
	}
	opts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageBytes), grpc.MaxCallSendMsgSize(MaxMessageBytes)),
		// Pings notice a dead or partitioned peer within a few seconds, so
		// a stream blocked on a full flow-control window fails and the
		// queue is dropped (and reported) instead of going stale.
		grpc.WithKeepaliveParams(keepalive.ClientParameters{
			Time:                time.Second,
			Timeout:             2 * time.Second,
			PermitWithoutStream: true,
		}),
	}, flowcontrol.DialOptions()...)
	opts = append(opts, p.t.cfg.DialOptions...)
	if ip := p.t.cfg.LocalIP; ip != nil {
		opts = append(opts, grpc.WithContextDialer(DialerFrom(ip)))
	}
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, err
	}
	p.mu.conn = conn
	return conn, nil
}

// DialerFrom returns a gRPC context dialer whose connections start from
// local address ip.
func DialerFrom(ip net.IP) func(context.Context, string) (net.Conn, error) {
	return func(ctx context.Context, addr string) (net.Conn, error) {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}}
		return d.DialContext(ctx, "tcp", addr)
	}
}

// resetClient closes the connection so that the next attempt resolves the
// address again (the peer may have moved).
func (p *peer) resetClient() {
	p.mu.Lock()
	conn := p.mu.conn
	p.mu.conn = nil
	p.mu.Unlock()
	if conn != nil {
		_ = conn.Close()
	}
}

// run is the sender goroutine: connect, stream batches until the stream
// breaks, back off, reconnect. It returns when the transport closes.
func (p *peer) run() {
	log := p.t.cfg.Logger.With("peer", p.nodeID)
	b := backoff{min: p.t.cfg.BackoffMin, max: p.t.cfg.BackoffMax}
	for {
		if !p.waitForWork(p.t.ctx) {
			return
		}
		start := time.Now()
		err := p.stream()
		if time.Since(start) > healthyStream {
			// A stream that lived this long was healthy: start the
			// backoff afresh rather than where the last outage left it.
			b.reset()
		}
		if p.isClosed() || p.t.ctx.Err() != nil {
			return
		}
		// Whatever queued while the stream was failing is stale by now:
		// drop it and let Raft retransmit.
		p.dropQueue()
		switch {
		case b.attempts == 0:
			log.Info("raft transport: lost the stream to peer; reconnecting", "err", err)
		case b.attempts%20 == 0:
			log.Warn("raft transport: still cannot reach peer", "attempts", b.attempts, "err", err)
		}
		if b.attempts%5 == 4 {
			p.resetClient()
		}
		if !sleepCtx(p.t.ctx, b.next()) {
			return
		}
		p.mu.Lock()
		p.mu.reconnects++
		p.mu.Unlock()
	}
}

// waitForWork blocks until the queue is non-empty or ctx is done.
func (p *peer) waitForWork(ctx context.Context) bool {
	for {
		p.mu.Lock()
		closed, n := p.mu.closed, len(p.mu.queue)
		p.mu.Unlock()
		if closed {
			return false
		}
		if n > 0 {
			return true
		}
		select {
		case <-p.wake:
		case <-ctx.Done():
			return false
		}
	}
}

// stream opens one RaftMessages stream and sends batches on it until it
// breaks or the transport closes.
func (p *peer) stream() error {
	conn, err := p.client()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(p.t.ctx)
	defer cancel()
	// No replay buffer: gRPC otherwise keeps every batch sent (256 KiB of
	// them, as decoded messages) until the peer first answers, which on
	// this stream may be never, to retry a stream the server never saw.
	// Raft sends again whatever is lost, and run redials.
	s, err := raftrpcpb.NewRaftTransportClient(conn).RaftMessages(ctx, grpc.MaxRetryRPCBufferSize(0))
	if err != nil {
		return err
	}
	p.setConnected(true)
	defer p.setConnected(false)

	// The ack reader notices a broken stream even when there is nothing
	// to send, and reports ranges the peer does not know.
	recvErr := make(chan error, 1)
	go func() {
		for {
			ack, err := s.Recv()
			if err != nil {
				recvErr <- err
				cancel()
				return
			}
			if p.t.cfg.OnAck != nil {
				p.t.cfg.OnAck(p.nodeID, ack)
			}
		}
	}()
	defer func() {
		_ = s.CloseSend()
		cancel()
	}()

	for {
		if !p.waitForWork(ctx) {
			select {
			case err := <-recvErr:
				if errors.Is(err, io.EOF) {
					return errors.New("peer closed the stream")
				}
				return err
			default:
				return ctx.Err()
			}
		}
		batch, n := p.takeBatch()
		if n == 0 {
			continue
		}
		if err := s.Send(batch); err != nil {
			p.t.unreachable(p.nodeID, batch.Messages)
			p.mu.Lock()
			p.mu.dropped += uint64(n)
			p.mu.Unlock()
			// Send reports io.EOF for a stream the server ended; the
			// reason is on the receive side.
			if errors.Is(err, io.EOF) {
				select {
				case rerr := <-recvErr:
					return rerr
				case <-time.After(time.Second):
				}
			}
			return err
		}
		p.mu.Lock()
		p.mu.sent += uint64(n)
		p.mu.Unlock()
		if f := p.t.cfg.OnBatchSent; f != nil {
			f(p.nodeID, n)
		}
	}
}

// takeBatch removes from the queue as many messages as fit in one batch
// (at least one).
func (p *peer) takeBatch() (*raftrpcpb.RaftMessageBatch, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	q := p.mu.queue
	if len(q) == 0 {
		return nil, 0
	}
	n, size := 0, 0
	for n < len(q) {
		size += approxSize(q[n])
		n++
		if size >= p.t.cfg.MaxBatchBytes {
			break
		}
	}
	msgs := make([]*raftrpcpb.RangeMessage, n)
	copy(msgs, q[:n])
	clear(q[:n])
	p.mu.queue = q[n:]
	if len(p.mu.queue) == 0 {
		p.mu.queue = nil
	}
	return &raftrpcpb.RaftMessageBatch{
		FromNodeId: p.t.cfg.NodeID,
		ToNodeId:   p.nodeID,
		ClusterId:  p.t.cfg.ClusterID,
		Messages:   msgs,
	}, n
}

// approxSize estimates the encoded size of m without marshalling it:
// entry payloads dominate.
func approxSize(m *raftrpcpb.RangeMessage) int {
	size := 64
	for _, e := range m.GetMessage().GetEntries() {
		size += len(e.GetData()) + 24
	}
	size += len(m.GetMessage().GetSnapshot().GetData())
	return size
}

func (p *peer) setConnected(c bool) {
	p.mu.Lock()
	p.mu.connected = c
	p.mu.Unlock()
}

func (p *peer) stats() PeerStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return PeerStats{
		NodeID:     p.nodeID,
		Connected:  p.mu.connected,
		Queued:     len(p.mu.queue),
		Sent:       p.mu.sent,
		Dropped:    p.mu.dropped,
		Reconnects: p.mu.reconnects,
	}
}
