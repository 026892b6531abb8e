package node

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/shaledb/shale/api/kvpb"
)

// slowClientLimits are small limits, so that a test can reach them.
var slowClientLimits = ConnLimits{
	MaxConnections:       48,
	MaxConcurrentStreams: 16,
	HandshakeTimeout:     time.Second,
}

// servedWithin checks that a fresh client on its own connection gets n
// writes and reads through, each within d.
func servedWithin(t *testing.T, tn *testNode, n int, d time.Duration) {
	t.Helper()
	kv := kvpb.NewKVClient(dialTLS(t, tn, nil))
	for i := 0; i < n; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		k := []byte(fmt.Sprintf("served-%d", i))
		_, err := kv.Put(ctx, &kvpb.PutRequest{Key: k, Value: k})
		if err == nil {
			var r *kvpb.GetResponse
			r, err = kv.Get(ctx, &kvpb.GetRequest{Key: k})
			if err == nil && string(r.GetValue()) != string(k) {
				err = fmt.Errorf("read %q", r.GetValue())
			}
		}
		cancel()
		if err != nil {
			t.Fatalf("request %d of a well-behaved client: %v", i, err)
		}
	}
}

// TestSlowClientsDoNotStopOthers: connections that never finish their
// handshake, and connections holding every stream they may open without
// ever sending a request (a slowloris), do not stop a well-behaved client
// from being served; the silent connections are closed after the
// handshake timeout.
func TestSlowClientsDoNotStopOthers(t *testing.T) {
	tn := startNode(t, "", Config{Conn: slowClientLimits})
	addr := tn.addr()

	// 20 raw TCP connections that send nothing.
	var silent []net.Conn
	for i := 0; i < 20; i++ {
		c, err := net.Dial("tcp", addr)
		must(t, err)
		silent = append(silent, c)
		defer c.Close()
	}
	// 20 gRPC connections, each with every stream it may open idle: a
	// Get whose request never comes.
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	desc := &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}
	opened := 0
	for i := 0; i < 20; i++ {
		cc := dialTLS(t, tn, nil)
		for j := 0; j < int(slowClientLimits.MaxConcurrentStreams); j++ {
			sctx, scancel := context.WithTimeout(ctx, 2*time.Second)
			if _, err := cc.NewStream(sctx, desc, "/shale.kv.v1.KV/Get"); err == nil {
				opened++
			}
			wg.Add(1)
			go func() { defer wg.Done(); <-ctx.Done(); scancel() }()
		}
	}
	if opened < 20*int(slowClientLimits.MaxConcurrentStreams)/2 {
		t.Fatalf("the slow clients opened only %d idle streams", opened)
	}

	start := time.Now()
	servedWithin(t, tn, 50, 2*time.Second)
	t.Logf("50 writes and reads of a well-behaved client beside %d silent connections and %d idle streams: %v",
		len(silent), opened, time.Since(start))

	// The silent connections are closed once the handshake timeout ends.
	for i, c := range silent {
		must(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
		if _, err := c.Read(make([]byte, 64)); err == nil {
			// The server may send its settings frame first; the close follows.
			if _, err := c.Read(make([]byte, 4096)); err == nil {
				t.Errorf("silent connection %d still open after the handshake timeout", i)
			}
		} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Errorf("silent connection %d not closed 5s after connecting (handshake timeout 1s)", i)
		}
	}
	cancel()
	wg.Wait()
}

// TestConnectionLimitFreesUp: silent connections filling the connection
// limit delay a new client by at most the handshake timeout.
func TestConnectionLimitFreesUp(t *testing.T) {
	tn := startNode(t, "", Config{Conn: slowClientLimits})
	addr := tn.addr()
	for i := 0; i < slowClientLimits.MaxConnections+8; i++ {
		c, err := net.Dial("tcp", addr) // the kernel's backlog accepts past the limit
		must(t, err)
		defer c.Close()
	}
	start := time.Now()
	servedWithin(t, tn, 5, 5*time.Second)
	if d := time.Since(start); d > 4*time.Second {
		t.Fatalf("a client waited %v behind silent connections (handshake timeout %v)", d, slowClientLimits.HandshakeTimeout)
	}
}

// TestDefaultRequestDeadline: a request without a deadline gets the
// node's default.
func TestDefaultRequestDeadline(t *testing.T) {
	l := ConnLimits{DefaultRequestTimeout: 1500 * time.Millisecond}
	var left time.Duration
	_, err := l.deadlineInterceptor(context.Background(), nil, &grpc.UnaryServerInfo{}, func(ctx context.Context, _ any) (any, error) {
		d, ok := ctx.Deadline()
		if !ok {
			return nil, fmt.Errorf("no deadline")
		}
		left = time.Until(d)
		return nil, nil
	})
	if err != nil || left <= time.Second || left > 1500*time.Millisecond {
		t.Fatalf("deadline left = %v, %v", left, err)
	}
	// A caller's own deadline stays.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = l.deadlineInterceptor(ctx, nil, &grpc.UnaryServerInfo{}, func(ctx context.Context, _ any) (any, error) {
		d, _ := ctx.Deadline()
		left = time.Until(d)
		return nil, nil
	})
	if left < 9*time.Second {
		t.Fatalf("a caller's 10s deadline became %v", left)
	}
}
