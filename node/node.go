package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/internal/buildinfo"
	"github.com/shaledb/shale/internal/keys"
	"github.com/shaledb/shale/storage"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
)

// Node is one Shale server: the KV and Admin gRPC services over the node's
// engine, and an HTTP server for /healthz, /metrics and /debug/pprof.
//
// A Node is created with New (which opens the engine), runs with Serve, and
// stops with Stop (which drains requests and closes the engine).
type Node struct {
	cfg       Config
	log       *slog.Logger
	limits    Limits
	db        *storage.DB
	ident     keys.StoreIdent
	latches   *latches
	committer Committer
	metrics   *metrics
	started   time.Time

	grpc   *grpc.Server
	health *health.Server
	http   *http.Server

	// Addresses, fixed by Serve.
	grpcAddr, httpAddr atomic.Pointer[string]
	serving            atomic.Bool

	stopOnce sync.Once
	stopErr  error
}

// firstRangeID is the ID of the range that, on a single node, covers the
// whole key space. Requests naming it or range 0 are served.
const firstRangeID = 1

// New opens the node's engine in cfg.DataDir and prepares its servers.
func New(cfg Config) (*Node, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("node: creating data directory: %w", err)
	}
	engineDir := filepath.Join(cfg.DataDir, "engine")
	db, err := storage.Open(engineDir, &cfg.Engine)
	if err != nil {
		return nil, fmt.Errorf("node: opening the engine in %s: %w", engineDir, err)
	}
	ident, err := loadOrCreateIdent(db, cfg.NodeID)
	if err != nil {
		return nil, errors.Join(err, db.Close())
	}
	n := &Node{
		cfg:       cfg,
		log:       cfg.Logger.With("node", cfg.NodeID),
		limits:    cfg.Limits,
		db:        db,
		ident:     ident,
		latches:   newLatches(),
		committer: engineCommitter{db: db},
		started:   time.Now(),
		health:    health.NewServer(),
	}
	n.metrics = newMetrics(n)
	n.grpc = grpc.NewServer(
		grpc.MaxRecvMsgSize(n.limits.maxRecvMsgSize()),
		grpc.ChainUnaryInterceptor(n.metrics.unaryInterceptor, n.recoverInterceptor),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
	)
	kvpb.RegisterKVServer(n.grpc, &kvServer{n: n})
	kvpb.RegisterAdminServer(n.grpc, &adminServer{n: n})
	healthpb.RegisterHealthServer(n.grpc, n.health)
	n.http = &http.Server{Handler: n.httpHandler(), ReadHeaderTimeout: 10 * time.Second}
	return n, nil
}

// Serve serves gRPC on grpcLis and HTTP on httpLis until Stop. It returns
// nil after Stop, or the first error that stopped a server.
func (n *Node) Serve(grpcLis, httpLis net.Listener) error {
	ga, ha := n.cfg.AdvertiseAddr, n.cfg.AdvertiseHTTPAddr
	if ga == "" {
		ga = grpcLis.Addr().String()
	}
	if ha == "" {
		ha = httpLis.Addr().String()
	}
	n.grpcAddr.Store(&ga)
	n.httpAddr.Store(&ha)
	n.serving.Store(true)
	n.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	n.log.Info("serving", "grpc", grpcLis.Addr().String(), "http", httpLis.Addr().String(),
		"data_dir", n.cfg.DataDir, "cluster_id", n.ident.ClusterID, "version", buildinfo.Version)

	errc := make(chan error, 2)
	go func() { errc <- n.grpc.Serve(grpcLis) }()
	go func() {
		err := n.http.Serve(httpLis)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		errc <- err
	}()
	var first error
	for i := 0; i < 2; i++ {
		if err := <-errc; err != nil && first == nil {
			first = err
			// One server failed: stop the other so Serve returns.
			go n.Stop(context.Background())
		}
	}
	return first
}

// Stop stops the node gracefully: it reports NOT_SERVING, stops accepting
// requests, waits for running ones until ctx ends (then cancels them), and
// closes the engine. It returns the error of closing, and is idempotent.
func (n *Node) Stop(ctx context.Context) error {
	n.stopOnce.Do(func() {
		n.serving.Store(false)
		n.health.Shutdown()
		drained := make(chan struct{})
		go func() {
			n.grpc.GracefulStop()
			close(drained)
		}()
		select {
		case <-drained:
		case <-ctx.Done():
			n.log.Warn("stop: requests still running at the deadline; cancelling them")
			n.grpc.Stop()
			<-drained
		}
		httpErr := n.http.Shutdown(ctx)
		if httpErr != nil {
			httpErr = errors.Join(httpErr, n.http.Close())
		}
		n.stopErr = errors.Join(httpErr, n.db.Close())
		n.log.Info("stopped", "error", n.stopErr)
	})
	return n.stopErr
}

// ClusterID returns the cluster ID recorded in the node's data directory.
func (n *Node) ClusterID() string { return n.ident.ClusterID }

func (n *Node) respHeader() *kvpb.ResponseHeader {
	return &kvpb.ResponseHeader{RangeId: firstRangeID, NodeId: n.cfg.NodeID}
}

// checkRange refuses a request that names a range this node does not hold.
func (n *Node) checkRange(h *kvpb.RequestHeader) error {
	if id := h.GetRangeId(); id != 0 && id != firstRangeID {
		return rangeNotFound(id)
	}
	return nil
}

func (n *Node) descriptor() *kvpb.NodeDescriptor {
	d := &kvpb.NodeDescriptor{NodeId: n.cfg.NodeID}
	if a := n.grpcAddr.Load(); a != nil {
		d.Address = *a
	}
	if a := n.httpAddr.Load(); a != nil {
		d.HttpAddress = *a
	}
	return d
}
