package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/api/raftrpcpb"
)

// recorder is the receiving end used by these tests: it keeps what the
// transport delivered, so the tests can check order, batching and content.
type recorder struct {
	mu       sync.Mutex
	msgs     []*raftrpcpb.RangeMessage
	batches  int
	unknown  map[uint64]bool
	snaps    [][]byte
	snapErr  error
	received chan struct{}
}

func newRecorder() *recorder {
	return &recorder{unknown: map[uint64]bool{}, received: make(chan struct{}, 1024)}
}

func (r *recorder) HandleRaftMessages(_ context.Context, b *raftrpcpb.RaftMessageBatch) *raftrpcpb.RaftMessageBatchAck {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.batches++
	var unknown []uint64
	for _, m := range b.GetMessages() {
		if r.unknown[m.GetRangeId()] {
			unknown = append(unknown, m.GetRangeId())
			continue
		}
		r.msgs = append(r.msgs, m)
	}
	select {
	case r.received <- struct{}{}:
	default:
	}
	if len(unknown) == 0 {
		return nil
	}
	return &raftrpcpb.RaftMessageBatchAck{UnknownRangeIds: unknown}
}

func (r *recorder) HandleSnapshot(_ context.Context, h *raftrpcpb.SnapshotHeader, sr *SnapshotReader) error {
	var data []byte
	chunks := 0
	for {
		c, err := sr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		chunks++
		data = append(data, c...)
	}
	if uint64(chunks) != sr.TotalEntries() {
		return fmt.Errorf("got %d chunks, sender says %d", chunks, sr.TotalEntries())
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.snapErr != nil {
		return r.snapErr
	}
	r.snaps = append(r.snaps, data)
	return nil
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.msgs)
}

type node struct {
	id   uint64
	t    *Transport
	rec  *recorder
	srv  *grpc.Server
	addr string
}

type cluster struct {
	t     *testing.T
	mu    sync.Mutex
	nodes map[uint64]*node
	// unreachable counts messages reported undeliverable, per sender.
	unreachable map[uint64]int
	unknownAck  map[uint64][]uint64
}

func newCluster(t *testing.T) *cluster {
	return &cluster{t: t, nodes: map[uint64]*node{}, unreachable: map[uint64]int{}, unknownAck: map[uint64][]uint64{}}
}

func (c *cluster) resolve(id uint64) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.nodes[id]
	if n == nil || n.addr == "" {
		return "", fmt.Errorf("node %d unknown", id)
	}
	return n.addr, nil
}

func (c *cluster) add(id uint64, clusterID string, tweak func(*Config)) *node {
	c.t.Helper()
	rec := newRecorder()
	cfg := Config{
		NodeID: id, ClusterID: clusterID, Resolver: c.resolve, Handler: rec,
		OnUnreachable: func(_ uint64, msgs []*raftrpcpb.RangeMessage) {
			c.mu.Lock()
			c.unreachable[id] += len(msgs)
			c.mu.Unlock()
		},
		OnAck: func(to uint64, ack *raftrpcpb.RaftMessageBatchAck) {
			c.mu.Lock()
			c.unknownAck[id] = append(c.unknownAck[id], ack.GetUnknownRangeIds()...)
			c.mu.Unlock()
		},
		BackoffMin: 10 * time.Millisecond, BackoffMax: 100 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler),
	}
	if tweak != nil {
		tweak(&cfg)
	}
	tr, err := New(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	n := &node{id: id, t: tr, rec: rec}
	c.mu.Lock()
	c.nodes[id] = n
	c.mu.Unlock()
	c.serve(n, "127.0.0.1:0")
	c.t.Cleanup(func() {
		n.t.Close()
		n.srv.Stop()
	})
	return n
}

func (c *cluster) serve(n *node, addr string) {
	c.t.Helper()
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		c.t.Fatal(err)
	}
	n.srv = grpc.NewServer(ServerOptions()...)
	n.t.Register(n.srv)
	c.mu.Lock()
	n.addr = lis.Addr().String()
	c.mu.Unlock()
	go func() { _ = n.srv.Serve(lis) }()
}

func msg(rangeID, from, to uint64, index uint64, data []byte) *raftrpcpb.RangeMessage {
	return &raftrpcpb.RangeMessage{
		RangeId: rangeID, FromNodeId: from, ToNodeId: to,
		Message: &pb.Message{Type: pb.MsgApp.Enum(), From: new(uint64(from)), To: new(uint64(to)), Index: new(index),
			Entries: []*pb.Entry{{Index: new(index + 1), Term: new(uint64(1)), Data: data}}},
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestDeliveryInOrderAcrossRanges: messages of many ranges share one stream
// and arrive in the order they were sent, with their content intact.
func TestDeliveryInOrderAcrossRanges(t *testing.T) {
	c := newCluster(t)
	var batches, sent atomic.Int64
	a := c.add(1, "c1", func(cfg *Config) {
		cfg.OnBatchSent = func(to uint64, msgs int) {
			if to == 2 {
				batches.Add(1)
				sent.Add(int64(msgs))
			}
		}
	})
	b := c.add(2, "c1", nil)
	const n = 2000
	for i := 0; i < n; i += 10 {
		var msgs []*raftrpcpb.RangeMessage
		for j := i; j < i+10; j++ {
			msgs = append(msgs, msg(uint64(j%7+1), 1, 2, uint64(j), []byte(fmt.Sprint("payload-", j))))
		}
		a.t.Send(2, msgs)
	}
	waitFor(t, "all messages", func() bool { return b.rec.count() == n })
	b.rec.mu.Lock()
	defer b.rec.mu.Unlock()
	for i, m := range b.rec.msgs {
		if got := m.GetMessage().GetIndex(); got != uint64(i) {
			t.Fatalf("message %d has index %d: out of order", i, got)
		}
		if m.GetRangeId() != uint64(i%7+1) || string(m.GetMessage().GetEntries()[0].GetData()) != fmt.Sprint("payload-", i) {
			t.Fatalf("message %d corrupted: %v", i, m)
		}
	}
	if b.rec.batches >= n {
		t.Errorf("%d batches for %d messages: nothing was batched", b.rec.batches, n)
	}
	t.Logf("%d messages in %d batches", n, b.rec.batches)
	// The sender reports every batch it sent (reported after the send,
	// so wait for the last report).
	waitFor(t, "the sender's batch reports", func() bool { return sent.Load() == n })
	if got := batches.Load(); got != int64(b.rec.batches) {
		t.Errorf("the sender reported %d batches; the receiver got %d", got, b.rec.batches)
	}
}

// TestUnknownRangesAreAcked: the receiver reports ranges it does not hold.
func TestUnknownRangesAreAcked(t *testing.T) {
	c := newCluster(t)
	a := c.add(1, "c1", nil)
	b := c.add(2, "c1", nil)
	b.rec.mu.Lock()
	b.rec.unknown[9] = true
	b.rec.mu.Unlock()
	a.t.Send(2, []*raftrpcpb.RangeMessage{msg(9, 1, 2, 1, nil), msg(3, 1, 2, 2, nil)})
	waitFor(t, "ack", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.unknownAck[1]) == 1 && c.unknownAck[1][0] == 9
	})
	if b.rec.count() != 1 {
		t.Fatalf("delivered %d messages, want 1", b.rec.count())
	}
}

// TestReconnectAfterPeerRestart: while the peer is down, messages are
// reported unreachable; once it is back on its address, delivery resumes
// on a new stream.
func TestReconnectAfterPeerRestart(t *testing.T) {
	c := newCluster(t)
	a := c.add(1, "c1", nil)
	b := c.add(2, "c1", nil)
	a.t.Send(2, []*raftrpcpb.RangeMessage{msg(1, 1, 2, 0, nil)})
	waitFor(t, "first delivery", func() bool { return b.rec.count() == 1 })

	addr := b.addr
	b.srv.Stop()
	waitFor(t, "messages reported unreachable while the peer is down", func() bool {
		a.t.Send(2, []*raftrpcpb.RangeMessage{msg(1, 1, 2, 1, nil)})
		time.Sleep(20 * time.Millisecond)
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.unreachable[1] > 0
	})
	c.serve(b, addr)
	waitFor(t, "delivery after restart", func() bool {
		a.t.Send(2, []*raftrpcpb.RangeMessage{msg(1, 1, 2, 2, []byte("after"))})
		time.Sleep(20 * time.Millisecond)
		b.rec.mu.Lock()
		defer b.rec.mu.Unlock()
		last := b.rec.msgs[len(b.rec.msgs)-1]
		return string(last.GetMessage().GetEntries()[0].GetData()) == "after"
	})
	var st PeerStats
	for _, s := range a.t.Stats() {
		if s.NodeID == 2 {
			st = s
		}
	}
	if st.Reconnects == 0 || st.Dropped == 0 {
		t.Errorf("peer stats after a restart: %+v", st)
	}
}

// TestWrongClusterRefused: a node of another cluster never gets its
// messages delivered.
func TestWrongClusterRefused(t *testing.T) {
	c := newCluster(t)
	a := c.add(1, "c1", nil)
	b := c.add(2, "c2", nil)
	for i := 0; i < 20; i++ {
		a.t.Send(2, []*raftrpcpb.RangeMessage{msg(1, 1, 2, uint64(i), nil)})
		time.Sleep(10 * time.Millisecond)
	}
	waitFor(t, "the refused stream to be re-dialled", func() bool {
		for _, s := range a.t.Stats() {
			if s.NodeID == 2 && s.Reconnects >= 2 {
				return true
			}
		}
		return false
	})
	if n := b.rec.count(); n != 0 {
		t.Fatalf("node of another cluster received %d messages", n)
	}
}

// TestQueueLimitDrops: messages beyond the queue limit are dropped and
// reported, never buffered without bound.
func TestQueueLimitDrops(t *testing.T) {
	c := newCluster(t)
	a := c.add(1, "c1", func(cfg *Config) { cfg.QueueLimit = 10 })
	// Node 3 does not exist: nothing drains the queue.
	var msgs []*raftrpcpb.RangeMessage
	for i := 0; i < 25; i++ {
		msgs = append(msgs, msg(1, 1, 3, uint64(i), nil))
	}
	a.t.Send(3, msgs)
	waitFor(t, "drops reported", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.unreachable[1] >= 15
	})
}

func snapHeader(to uint64) *raftrpcpb.SnapshotHeader {
	return &raftrpcpb.SnapshotHeader{
		RangeId: 2, ToNodeId: to,
		Message:         &pb.Message{Type: pb.MsgSnap.Enum(), Snapshot: &pb.Snapshot{Metadata: &pb.SnapshotMetadata{Index: new(uint64(100)), Term: new(uint64(3))}}},
		RangeDescriptor: &kvpb.RangeDescriptor{RangeId: 2},
	}
}

func TestSnapshotStream(t *testing.T) {
	c := newCluster(t)
	a := c.add(1, "c1", nil)
	b := c.add(2, "c1", nil)
	var want []byte
	src := func(emit func([]byte) error) (uint64, error) {
		for i := 0; i < 50; i++ {
			chunk := bytes.Repeat([]byte{byte(i)}, 1000+i)
			want = append(want, chunk...)
			if err := emit(chunk); err != nil {
				return 0, err
			}
		}
		return 50, nil
	}
	if err := a.t.SendSnapshot(context.Background(), snapHeader(2), src); err != nil {
		t.Fatal(err)
	}
	b.rec.mu.Lock()
	defer b.rec.mu.Unlock()
	if len(b.rec.snaps) != 1 || !bytes.Equal(b.rec.snaps[0], want) {
		t.Fatalf("received %d snapshots; data intact: %v", len(b.rec.snaps), len(b.rec.snaps) == 1 && bytes.Equal(b.rec.snaps[0], want))
	}
}

func TestSnapshotRefusalReachesSender(t *testing.T) {
	c := newCluster(t)
	a := c.add(1, "c1", nil)
	b := c.add(2, "c1", nil)
	b.rec.mu.Lock()
	b.rec.snapErr = errors.New("range 2 is busy")
	b.rec.mu.Unlock()
	src := func(emit func([]byte) error) (uint64, error) { return 1, emit([]byte("x")) }
	err := a.t.SendSnapshot(context.Background(), snapHeader(2), src)
	if err == nil || !strings.Contains(err.Error(), "range 2 is busy") {
		t.Fatalf("SendSnapshot = %v, want the receiver's refusal", err)
	}
	// A sender that lies about its entry count is refused too.
	b.rec.mu.Lock()
	b.rec.snapErr = nil
	b.rec.mu.Unlock()
	src = func(emit func([]byte) error) (uint64, error) { return 5, emit([]byte("x")) }
	if err := a.t.SendSnapshot(context.Background(), snapHeader(2), src); err == nil || !strings.Contains(err.Error(), "sender says 5") {
		t.Fatalf("SendSnapshot with a bad count = %v", err)
	}
}

// TestSnapshotRateLimit: 600 KB at 1 MB/s (burst 100 KB) cannot take less
// than about half a second. Only the lower bound is checked: a busy
// machine can only make it slower.
func TestSnapshotRateLimit(t *testing.T) {
	c := newCluster(t)
	a := c.add(1, "c1", func(cfg *Config) { cfg.SnapshotRate = 1 << 20; cfg.SnapshotChunkBytes = 32 << 10 })
	c.add(2, "c1", nil)
	src := func(emit func([]byte) error) (uint64, error) {
		for i := 0; i < 20; i++ {
			if err := emit(make([]byte, 30<<10)); err != nil {
				return 0, err
			}
		}
		return 20, nil
	}
	start := time.Now()
	if err := a.t.SendSnapshot(context.Background(), snapHeader(2), src); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 400*time.Millisecond {
		t.Fatalf("600 KB at 1 MB/s took %v: not throttled", el)
	}
}
