package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/shaledb/shale/api/raftrpcpb"
	"github.com/shaledb/shale/raft"
	"github.com/shaledb/shale/raft/transport"
)

// The simulated network carries the nodes' Raft messages and snapshots in
// memory. A transport only queues what it is asked to send (in its outbox,
// from any goroutine); the simulator drains the outbox after each step,
// in a canonical order (by sender, then receiver, then the order of the
// calls), and only then draws from the seeded source whether each batch
// is lost, duplicated or delayed, and by how much. Delivery happens when
// the simulator chooses, at or after the drawn time: batches drawn with
// different delays arrive out of order.

// netParams are the network's fault rates and delays.
type netParams struct {
	drop     float64 // probability a batch is lost
	dup      float64 // probability a batch arrives twice
	minDelay time.Duration
	maxDelay time.Duration
}

// link is one direction between two nodes.
type link struct{ from, to uint64 }

// sendReq is one call to a transport, waiting in the outbox.
type sendReq struct {
	from, to uint64
	msgs     []*raftrpcpb.RangeMessage // a message batch, or
	snap     *snapReq                  // a snapshot
}

// snapReq is a snapshot on its way: the sender waits on res.
type snapReq struct {
	h      *raftrpcpb.SnapshotHeader
	chunks []*raftrpcpb.SnapshotChunk
	res    chan error // capacity 1
}

// delivery is a batch or snapshot in flight.
type delivery struct {
	at  time.Time
	seq uint64
	req sendReq
}

type network struct {
	mu     sync.Mutex
	outbox []sendReq

	// The simulator's own state (its goroutine only).
	inflight []*delivery
	seq      uint64
	blocked  map[link]bool
	params   netParams
}

func newNetwork() *network {
	return &network{blocked: map[link]bool{}}
}

func (n *network) post(r sendReq) {
	n.mu.Lock()
	n.outbox = append(n.outbox, r)
	n.mu.Unlock()
}

// drain takes the outbox in canonical order.
func (n *network) drain() []sendReq {
	n.mu.Lock()
	out := n.outbox
	n.outbox = nil
	n.mu.Unlock()
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].from != out[j].from {
			return out[i].from < out[j].from
		}
		return out[i].to < out[j].to
	})
	return out
}

// simTransport is one node's raft.Transport.
type simTransport struct {
	net    *network
	node   uint64
	h      raft.TransportHandlers
	mu     sync.Mutex
	closed bool
}

var _ raft.Transport = (*simTransport)(nil)

func (t *simTransport) isClosed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closed
}

// Send implements raft.Transport. Messages are copied through their wire
// encoding, as the gRPC transport does, so that sender and receiver share
// nothing.
func (t *simTransport) Send(to uint64, msgs []*raftrpcpb.RangeMessage) {
	if t.isClosed() {
		return
	}
	cp := make([]*raftrpcpb.RangeMessage, len(msgs))
	for i, m := range msgs {
		cp[i] = cloneMsg(m)
	}
	// The Store groups messages for a node by iterating a map: order
	// them by range (keeping each range's own order) so that runs of one
	// seed agree.
	sort.SliceStable(cp, func(i, j int) bool { return cp[i].GetRangeId() < cp[j].GetRangeId() })
	t.net.post(sendReq{from: t.node, to: to, msgs: cp})
}

func cloneMsg(m *raftrpcpb.RangeMessage) *raftrpcpb.RangeMessage {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("sim: encoding a Raft message: %v", err))
	}
	out := new(raftrpcpb.RangeMessage)
	if err := proto.Unmarshal(b, out); err != nil {
		panic(fmt.Sprintf("sim: decoding a Raft message: %v", err))
	}
	return out
}

// SendSnapshot implements raft.Transport: it reads the snapshot's data on
// the caller's goroutine, posts it, and waits for the receiver's answer
// (or for ctx).
func (t *simTransport) SendSnapshot(ctx context.Context, h *raftrpcpb.SnapshotHeader, src transport.SnapshotSource) error {
	if t.isClosed() {
		return errors.New("sim: transport closed")
	}
	h = proto.Clone(h).(*raftrpcpb.SnapshotHeader)
	h.FromNodeId = t.node
	var chunks []*raftrpcpb.SnapshotChunk
	var total uint64
	n, err := src(func(chunk []byte) error {
		if len(chunk) == 0 {
			return nil
		}
		total += uint64(len(chunk))
		chunks = append(chunks, &raftrpcpb.SnapshotChunk{Chunk: &raftrpcpb.SnapshotChunk_Data{Data: append([]byte(nil), chunk...)}})
		return nil
	})
	if err != nil {
		return err
	}
	chunks = append(chunks, &raftrpcpb.SnapshotChunk{Chunk: &raftrpcpb.SnapshotChunk_Done{Done: &raftrpcpb.SnapshotDone{TotalEntries: n, TotalBytes: total}}})
	req := &snapReq{h: h, chunks: chunks, res: make(chan error, 1)}
	t.net.post(sendReq{from: t.node, to: h.GetToNodeId(), snap: req})
	select {
	case err := <-req.res:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// SnapshotChunkBytes implements raft.Transport.
func (t *simTransport) SnapshotChunkBytes() int { return 64 << 10 }

// Close implements raft.Transport.
func (t *simTransport) Close() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
}

// chunkStream is the receiving end of a snapshot: a gRPC client stream
// over the chunks in memory, for transport.NewSnapshotReader.
type chunkStream struct {
	grpc.ServerStream
	ctx    context.Context
	chunks []*raftrpcpb.SnapshotChunk
}

var _ raftrpcpb.RaftTransport_SnapshotServer = (*chunkStream)(nil)

func (s *chunkStream) Recv() (*raftrpcpb.SnapshotChunk, error) {
	if len(s.chunks) == 0 {
		return nil, io.EOF
	}
	c := s.chunks[0]
	s.chunks = s.chunks[1:]
	return c, nil
}

func (s *chunkStream) SendAndClose(*raftrpcpb.SnapshotResponse) error { return nil }
func (s *chunkStream) Context() context.Context                       { return s.ctx }
func (s *chunkStream) SetHeader(metadata.MD) error                    { return nil }
func (s *chunkStream) SendHeader(metadata.MD) error                   { return nil }
func (s *chunkStream) SetTrailer(metadata.MD)                         {}
