package node

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/shaledb/shale/api/kvpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// testNode is a real node serving real gRPC and HTTP on loopback.
type testNode struct {
	n        *Node
	dir      string
	cc       *grpc.ClientConn
	kv       kvpb.KVClient
	admin    kvpb.AdminClient
	httpAddr string
	served   chan error
}

func startNode(t testing.TB, dir string, cfg Config) *testNode {
	t.Helper()
	if dir == "" {
		dir = filepath.Join(t.TempDir(), "node")
	}
	if cfg.NodeID == 0 {
		cfg.NodeID = 1
	}
	cfg.DataDir = dir
	if cfg.Logger == nil {
		// Node logs go to the test's output, shown when it fails or with -v;
		// benchmarks would print them with every result, so they drop them.
		cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
		if _, ok := t.(*testing.B); ok {
			cfg.Logger = slog.New(slog.DiscardHandler)
		}
	}
	n, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tn := &testNode{n: n, dir: dir, httpAddr: hl.Addr().String(), served: make(chan error, 1)}
	go func() { tn.served <- n.Serve(gl, hl) }()
	cc, err := grpc.NewClient("passthrough:///"+gl.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	tn.cc, tn.kv, tn.admin = cc, kvpb.NewKVClient(cc), kvpb.NewAdminClient(cc)
	t.Cleanup(func() {
		cc.Close()
		tn.stop(t)
	})
	return tn
}

// stop stops the node and checks that Serve returned cleanly.
func (tn *testNode) stop(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tn.n.Stop(ctx); err != nil {
		t.Errorf("Stop: %v", err)
	}
	select {
	case err := <-tn.served:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
		tn.served <- nil // later calls see a clean return too
	case <-time.After(10 * time.Second):
		t.Error("Serve did not return after Stop")
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
