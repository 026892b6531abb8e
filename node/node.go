package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/shaledb/shale/api/flowcontrol"
	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/api/raftrpcpb"
	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/internal/buildinfo"
	"github.com/shaledb/shale/internal/diskspace"
	"github.com/shaledb/shale/raft"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/raft/transport"
	"github.com/shaledb/shale/rangesm"
	"github.com/shaledb/shale/storage"
	"github.com/shaledb/shale/tso"
)

// Node is one Shale server: the KV and Admin gRPC services and the Raft
// transport on one gRPC server, over the node's replicas (raft.Store) and
// engine, and an HTTP server for /healthz, /metrics and /debug/pprof.
//
// A Node is created with New (which opens the engine and the replicas),
// runs with Serve, and stops with Stop (which drains requests, stops
// replication and closes the engine).
type Node struct {
	cfg    Config
	log    *slog.Logger
	limits Limits
	sec    *security
	db     *storage.DB
	// data reads applied user data (the range state machine's read path).
	data rangesm.Reader
	// timestamps is the source of proposal timestamps (timestamps.go);
	// closes coalesces the Close commands reads above a range's frontier
	// wait for (read_close.go).
	timestamps TimestampSource
	closes     closer
	disk       *diskspace.Monitor // disk.go
	writes     *writeBudget       // memory.go
	ident      raft.StoreIdent
	store      *raft.Store
	peers      *peerClients
	// placeMu guards a placement pass's views and leaders while its
	// rebalancing moves run in parallel (placement.go).
	placeMu sync.Mutex
	live    liveness
	// lessor keeps the leases while this node leads meta (lease_lessor.go).
	lessor *lessor
	// quorumProbes confirm that silent voters are unreachable (quorum.go).
	quorumProbes quorumProbes
	load         loadTracker
	hot          hotTracker
	cpu          *cpuSampler
	hb           heartbeats
	merger       mergeCandidates
	metrics      *metrics
	started      time.Time

	// lockQueues are the writes waiting on intents, waitGraph this
	// node's part of the push graph (txn_wait.go).
	lockQueues lockQueues
	waitGraph  waitGraph
	// resolving are the resolutions in flight on this node
	// (txn_parallel.go, Resolve).
	resolving resolveFlights

	// watches holds the watchers of the ranges this node leads, and is
	// every replica's change feed sink (watch_feed.go).
	watches *watchFeeds

	// clock is the node's hybrid-logical clock (clock.go); clockGuard
	// says whether it may serve. oracle issues the cluster's timestamps
	// while this node holds meta's lease, and tsoClient is how this node
	// gets them wherever the oracle is (tso.go).
	clock      *hlc.Clock
	physClock  *offsetClock // the clock's physical clock
	clockGuard *clockGuard
	oracle     *tso.Oracle
	tsoClient  *tso.Client

	// splitMem is what the split loop carries from one pass to the next
	// (splitter.go; the split loop's alone).
	splitMem splitMemory
	// gcWaiting is when each range whose last GC pass failed first wanted
	// one (gc_queue.go; the GC loop's alone).
	gcWaiting map[uint64]time.Time
	// gcSkips is, for each range this node leads whose last GC pass
	// completed, when a pass could next collect anything (gc_queue.go;
	// the GC loop's alone).
	gcSkips map[uint64]gcSkip

	grpc *grpc.Server
	// unaryChain is the interceptor chain of every unary request, plain
	// or multiplexed (interceptors.go); mux serves KV.Multiplex streams.
	unaryChain grpc.UnaryServerInterceptor
	mux        *muxHub
	health     *health.Server
	http       *http.Server

	// Addresses, fixed by Serve.
	grpcAddr, httpAddr atomic.Pointer[string]
	serving            atomic.Bool
	// stopping refuses new client requests; inflight counts the ones
	// being served (Stop waits for them before it stops replication).
	stopping atomic.Bool
	inflight atomic.Int64
	// bgCancel stops the node's background work (self-registration).
	bgCtx    context.Context
	bgCancel context.CancelFunc
	bgWG     sync.WaitGroup
	// faults: the injected faults of a test build (faults_on.go).
	faults faultState

	stopOnce sync.Once
	stopErr  error
}

// streamWorkers is the number of goroutines that run gRPC requests (see
// grpc.NumStreamWorkers): enough for the requests of 64 clients waiting on
// commits, with room for reads and the Raft streams.
const streamWorkers = 128

// New opens the node's engine in cfg.DataDir, initializes the store
// (bootstrapping or joining a cluster on a first start) and prepares its
// servers. Replication starts with Serve.
func New(cfg Config) (*Node, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("node: creating data directory: %w", err)
	}
	disk, err := openDisk(cfg.DataDir, cfg.diskReserve(), cfg.NodeID)
	if err != nil {
		return nil, err
	}
	engineDir := filepath.Join(cfg.DataDir, "engine")
	engineOpts := cfg.Engine
	// A test build (faults_on.go) opens the engine over its fault layer.
	engineOpts.FaultInjection = engineOpts.FaultInjection || faultInjectionBuilt
	// The user keyspace holds versioned keys (store format 2).
	keys.WithUserVersions(&engineOpts)
	db, err := openEngine(engineDir, &engineOpts, disk)
	if err != nil {
		return nil, fmt.Errorf("node: opening the engine in %s: %w", engineDir, err)
	}
	n := &Node{
		cfg:     cfg,
		log:     cfg.Logger,
		limits:  cfg.Limits,
		db:      db,
		data:    rangesm.NewReader(db),
		disk:    disk,
		started: time.Now(),
		cpu:     newCPUSampler(cfg.Logger),
		health:  health.NewServer(),
	}
	if err := n.initSecurity(); err != nil {
		return nil, errors.Join(err, db.Close())
	}
	ident, peers, err := n.initStore(db)
	if err != nil {
		return nil, errors.Join(err, db.Close())
	}
	n.ident = *ident
	n.cfg.NodeID = ident.NodeID
	if n.sec.tls != nil {
		if err := checkOwnBinding(n.sec.tls.get().cert.Leaf, ident.NodeID); err != nil {
			return nil, errors.Join(err, db.Close())
		}
	}
	n.disk.SetNodeID(ident.NodeID)
	n.log = cfg.Logger.With("node", ident.NodeID)
	ro := cfg.Raft
	// The Raft logs share the engine's memtable with the data: held to a
	// quarter of it together, their entries are deleted before a flush
	// writes them to a table file (raft/truncate.go).
	memtable := engineOpts.WriteBufferSize
	if memtable == 0 {
		memtable = storage.EngineDefaults().WriteBufferSize
	}
	n.watches = newWatchFeeds()
	n.watches.onWatched = n.closes.notify // read_close.go
	sms, err := rangesm.NewFactory(rangesm.Config{Engine: db, Logger: n.log, Observe: n.observeFrontier, Feed: n.watches})
	if err != nil {
		return nil, err
	}
	n.store, err = raft.NewStore(raft.Config{
		Engine:                    db,
		StateMachines:             sms,
		NodeID:                    ident.NodeID,
		ClusterID:                 ident.ClusterID,
		Peers:                     peers,
		TickInterval:              ro.TickInterval,
		ElectionTicks:             ro.ElectionTicks,
		HeartbeatTicks:            ro.HeartbeatTicks,
		MaxSizePerMsg:             ro.MaxSizePerMsg,
		MaxInflightMsgs:           ro.MaxInflightMsgs,
		MaxUncommittedEntriesSize: ro.MaxUncommittedBytes,
		LogMaxEntries:             ro.LogMaxEntries,
		LogMaxBytes:               ro.LogMaxBytes,
		LogBudgetBytes:            int64(memtable / 4),
		Disk:                      n.disk,
		SnapshotMemoryBytes:       cfg.memoryBudget() / snapshotMemoryShare, // memory.go
		EntryCacheNodeBytes:       cfg.memoryBudget() / entryCacheShare,     // memory.go
		SnapshotRate:              ro.SnapshotRate,
		MaxSnapshotBytes:          ro.MaxSnapshotBytes,
		DisableLeaseReads:         ro.DisableLeaseReads,
		DisableQuiescence:         ro.DisableQuiescence,
		LocalIP:                   n.localIP(),
		TransportCredentials:      n.peerCredentials,
		Logger:                    n.log,
		Testing:                   cfg.raftTesting,
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("node: opening the replicas: %w", err), db.Close())
	}
	if err := n.checkDirectoryCluster(ident.ClusterID); err != nil {
		n.store.Stop()
		return nil, errors.Join(err, db.Close())
	}
	n.peers = newPeerClients(n)
	budget := cfg.memoryBudget()
	if cfg.MemoryBudgetBytes > 0 {
		applyMemoryLimit(budget)
	}
	n.writes = newWriteBudget(budget, n.limits.MaxWriteBytes)
	n.bgCtx, n.bgCancel = context.WithCancel(context.Background())
	n.initClock()
	n.timestamps = oracleSource{n: n}
	n.lessor = newLessor(n)
	n.metrics = newMetrics(n)
	n.unaryChain = n.newUnaryChain()
	n.mux = newMuxHub(n)
	// The transport's server options (keepalive policy), with the message
	// cap of the KV service: it admits the largest write the limits allow,
	// so it also admits the Raft messages carrying one (appends carry at
	// most MaxSizePerMsg, 1 MiB, beyond their first entry).
	// Then the connection limits (conn_limits.go) and the credentials and
	// authorization of security.go: every request is authorized before
	// it is admitted.
	opts := append(transport.ServerOptions(),
		grpc.MaxRecvMsgSize(n.limits.maxRecvMsgSize()),
		n.sec.serverCredentials(),
		grpc.UnaryInterceptor(n.unaryChain),
		grpc.ChainStreamInterceptor(n.metrics.streamInterceptor, n.sec.auth.streamInterceptor, n.identityStreamInterceptor, n.clusterStreamInterceptor),
	)
	opts = append(opts, n.cfg.Conn.serverOptions()...)
	// Static flow-control windows: no bandwidth probe (a PING and its
	// answer) per small message (api/flowcontrol).
	opts = append(opts, flowcontrol.ServerOptions()...)
	// Requests run on a set of long-lived goroutines instead of one new
	// goroutine each: a new one starts with a small stack and grows it
	// through the interceptors and the handler (stack copies were about 3%
	// of a node's CPU under a write load). A request that finds every
	// worker busy still gets a goroutine of its own.
	opts = append(opts, grpc.NumStreamWorkers(streamWorkers))
	n.grpc = grpc.NewServer(opts...)
	kvpb.RegisterKVServer(n.grpc, &kvServer{n: n})
	kvpb.RegisterAdminServer(n.grpc, &adminServer{n: n})
	kvpb.RegisterBackupServer(n.grpc, &backupServer{n: n})
	kvpb.RegisterWatchServer(n.grpc, &watchServer{n: n})
	kvpb.RegisterLeaseServer(n.grpc, &leaseServer{n: n})
	kvpb.RegisterLeaseInternalServer(n.grpc, &leaseInternalServer{n: n})
	kvpb.RegisterProtectionServer(n.grpc, &protectionServer{n: n})
	kvpb.RegisterTxnServer(n.grpc, &txnServer{n: n})
	raftrpcpb.RegisterTimestampOracleServer(n.grpc, &tsoServer{n: n})
	healthpb.RegisterHealthServer(n.grpc, n.health)
	n.store.RegisterServer(n.grpc)
	n.metrics.grpc.InitializeMetrics(n.grpc) // every method's series, at zero
	n.http = &http.Server{Handler: n.httpHandler(), ReadHeaderTimeout: 10 * time.Second}
	return n, nil
}

// Serve starts replication and serves gRPC on grpcLis and HTTP on httpLis
// until Stop. It returns nil after Stop, or the first error that stopped a
// server.
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
	n.store.SetPeerAddress(n.ident.NodeID, ga)
	n.store.SetRemoteMeta(remoteMeta{s: &adminServer{n: n}})
	n.store.SetAppliedWaiter(appliedWaiter{n: n})
	n.store.Start()
	n.startSharding()
	n.bgWG.Add(7)
	go func() {
		defer n.bgWG.Done()
		n.lessor.loop(n.bgCtx) // lease_lessor.go
	}()
	go n.diskLoop()
	go n.freshnessLoop()   // read_close.go
	go n.watchIntentLoop() // watch_intents.go
	go func() {
		defer n.bgWG.Done()
		n.clockGuard.loop(n.bgCtx)
	}()
	go func() {
		defer n.bgWG.Done()
		n.registerSelf(n.bgCtx)
	}()
	go func() {
		defer n.bgWG.Done()
		n.probeLoop(n.bgCtx)
	}()
	n.serving.Store(true)
	n.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	n.log.Info("serving", "grpc", grpcLis.Addr().String(), "http", httpLis.Addr().String(), "https", n.cfg.HTTP.TLS, "pprof", n.cfg.HTTP.Pprof,
		"data_dir", n.cfg.DataDir, "cluster_id", n.ident.ClusterID, "version", buildinfo.Version, "memory", n.writes.String())

	errc := make(chan error, 2)
	grpcLis = n.cfg.Conn.limitListener(grpcLis)
	go func() {
		err := n.grpc.Serve(grpcLis)
		if errors.Is(err, grpc.ErrServerStopped) && n.stopping.Load() {
			err = nil // Stop came before Serve reached grpc's Serve
		}
		errc <- err
	}()
	go func() {
		err := n.http.Serve(n.httpListener(httpLis))
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
// requests, waits for running ones until ctx ends (then cancels them),
// stops replication and closes the engine. It returns the error of
// closing, and is idempotent.
func (n *Node) Stop(ctx context.Context) error {
	n.stopOnce.Do(func() {
		n.serving.Store(false)
		n.stopping.Store(true)
		n.health.Shutdown()
		n.bgCancel()
		// New requests are refused from here on; the ranges this node
		// leads move now, while it can still replicate (shutdown.go).
		n.handOffLeadership(ctx)
		// Requests in flight finish while replication still runs (a write
		// needs its followers); new ones are refused with Unavailable.
		for n.inflight.Load() > 0 && ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
		if n.inflight.Load() > 0 {
			n.log.Warn("stop: requests still running at the deadline; cancelling them")
		}
		// Multiplex streams never end by themselves either: each one
		// answers what it holds and ends (mux_server.go).
		n.mux.stop()
		// The peers' Raft streams never end by themselves: end them, so
		// that the graceful stop below has nothing left to wait for.
		n.store.StopServing()
		drained := make(chan struct{})
		go func() {
			n.grpc.GracefulStop()
			close(drained)
		}()
		select {
		case <-drained:
		case <-ctx.Done():
			n.grpc.Stop()
			<-drained
		}
		httpErr := n.http.Shutdown(ctx)
		if httpErr != nil {
			httpErr = errors.Join(httpErr, n.http.Close())
		}
		n.bgWG.Wait()
		n.oracle.Close()
		n.mux.close()
		n.peers.close()
		n.store.Stop()
		n.stopErr = errors.Join(httpErr, n.db.Close())
		n.log.Info("stopped", "error", n.stopErr)
	})
	return n.stopErr
}

// admitInterceptor refuses new requests once the node is stopping and
// counts the ones in flight.
func (n *Node) admitInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	// Count first, check second: Stop sets stopping and then waits for
	// the count, so a request it does not wait for is one that refuses.
	n.inflight.Add(1)
	defer n.inflight.Add(-1)
	if n.stopping.Load() {
		return nil, unavailable(time.Second, "%s: node is shutting down; not applied", path.Base(info.FullMethod))
	}
	return handler(ctx, req)
}

// ClusterID returns the cluster ID recorded in the node's data directory.
func (n *Node) ClusterID() string { return n.ident.ClusterID }

// NodeID returns the node's ID.
func (n *Node) NodeID() uint64 { return n.ident.NodeID }

// localIP is the address connections to peers start from: the advertised
// one, when it is a definite IP.
func (n *Node) localIP() net.IP {
	host, _, err := net.SplitHostPort(n.cfg.AdvertiseAddr)
	if err != nil {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || ip.IsUnspecified() {
		return nil
	}
	return ip
}

func (n *Node) descriptor() *kvpb.NodeDescriptor {
	// Started: this node serves; its registration marks it as one that
	// may not bootstrap again from an empty directory (identity.go).
	d := &kvpb.NodeDescriptor{NodeId: n.ident.NodeID, Started: true}
	if a := n.grpcAddr.Load(); a != nil {
		d.Address = *a
	}
	if a := n.httpAddr.Load(); a != nil {
		d.HttpAddress = *a
	}
	return d
}
