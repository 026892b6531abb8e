// Command shale runs one Shale node: the KV and Admin gRPC services and
// the node-to-node Raft transport on --listen, and /healthz, /metrics and
// /debug/pprof on --http.
//
// On its first start a node bootstraps a new cluster (--initial-cluster,
// the same list on every initial node), joins an existing one (--join), or
// with neither forms a one-node cluster. Its data directory remembers the
// cluster afterwards:
//
//	shale --node-id 1 --listen 127.0.0.1:7379 --http 127.0.0.1:7380 --data-dir data/node1 \
//	      --initial-cluster 1=127.0.0.1:7379,2=127.0.0.1:7381,3=127.0.0.1:7383
//
// SIGINT or SIGTERM stops it gracefully: it stops accepting requests, lets
// running ones finish (up to --shutdown-timeout), and closes the engine.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/internal/buildinfo"
	"github.com/shaledb/shale/node"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "shale:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("shale", flag.ContinueOnError)
	var (
		nodeID          = fs.Uint64("node-id", 0, "this node's ID; 0: the data directory's, else found in --initial-cluster by --advertise, assigned when joining, or 1 alone")
		listen          = fs.String("listen", "127.0.0.1:7379", "gRPC listen address (KV and Admin services)")
		httpAddr        = fs.String("http", "127.0.0.1:7380", "HTTP listen address (/healthz, /metrics, /debug/pprof)")
		advertise       = fs.String("advertise", "", "gRPC address other nodes and clients reach this node at (default: --listen)")
		advertiseHTTP   = fs.String("advertise-http", "", "HTTP address others reach this node at (default: --http)")
		initialCluster  = fs.String("initial-cluster", "", "bootstrap a new cluster of these members on the first start: id=host:port,... (the same on every initial node)")
		join            = fs.String("join", "", "join an existing cluster through these member addresses on the first start: host:port,...")
		clusterID       = fs.String("cluster-id", "", "the cluster's ID (default: derived from --initial-cluster); refuses a data directory or cluster of another ID")
		dataDir         = fs.String("data-dir", "data/node1", "directory for the node's data")
		logLevel        = fs.String("log-level", "info", "log level: debug, info, warn, error")
		logFormat       = fs.String("log-format", "text", "log format: text or json")
		shutdownTimeout = fs.Duration("shutdown-timeout", 10*time.Second, "how long a graceful stop waits for running requests")
		version         = fs.Bool("version", false, "print the version and exit")
	)
	d := node.EngineDefaults()
	var eng node.EngineOptions
	fs.Uint64Var(&eng.WriteBufferSize, "engine-write-buffer-size", 0, fmt.Sprintf("memtable size in bytes (0: engine default, %d)", d.WriteBufferSize))
	fs.Uint64Var(&eng.BlockCacheSize, "engine-block-cache-size", 0, fmt.Sprintf("block cache size in bytes (0: engine default, %d)", d.BlockCacheSize))
	fs.IntVar(&eng.BloomBitsPerKey, "engine-bloom-bits", 0, fmt.Sprintf("Bloom filter bits per key; negative disables (0: engine default, %d)", d.BloomBitsPerKey))
	fs.IntVar(&eng.MaxBackgroundJobs, "engine-max-background-jobs", 0, fmt.Sprintf("flush and compaction threads (0: engine default, %d)", d.MaxBackgroundJobs))
	fs.IntVar(&eng.MaxOpenFiles, "engine-max-open-files", 0, "table cache bound; negative is unbounded (0: engine default)")
	fs.BoolVar(&eng.DisableAutoCompactions, "engine-disable-auto-compactions", false, "turn background compactions off")
	var ro node.RaftOptions
	fs.DurationVar(&ro.TickInterval, "raft-tick", 100*time.Millisecond, "Raft tick interval")
	fs.IntVar(&ro.ElectionTicks, "raft-election-ticks", 10, "election timeout in ticks (randomized up to twice that)")
	fs.IntVar(&ro.HeartbeatTicks, "raft-heartbeat-ticks", 1, "heartbeat interval in ticks")
	fs.Uint64Var(&ro.MaxSizePerMsg, "raft-max-size-per-msg", 1<<20, "bytes of entries in one append message")
	fs.IntVar(&ro.MaxInflightMsgs, "raft-max-inflight-msgs", 256, "append messages in flight to one follower")
	fs.Uint64Var(&ro.MaxUncommittedBytes, "raft-max-uncommitted-bytes", 64<<20, "uncommitted bytes a leader holds before refusing writes")
	fs.Uint64Var(&ro.LogMaxEntries, "raft-log-max-entries", 10000, "log entries kept before truncating past lagging followers (they get snapshots)")
	fs.Int64Var(&ro.LogMaxBytes, "raft-log-max-bytes", 64<<20, "log bytes kept before truncating past lagging followers")
	fs.Int64Var(&ro.SnapshotRate, "snapshot-rate", 32<<20, "bytes per second of outgoing snapshots, all ranges together; negative: unlimited")
	fs.Int64Var(&ro.MaxSnapshotBytes, "max-snapshot-bytes", 1<<30, "largest incoming snapshot accepted (staged in memory)")
	fs.BoolVar(&ro.DisableLeaseReads, "disable-lease-reads", false, "serve every linearizable read through a ReadIndex round, never the leader lease")
	sharding := shardingFlags(fs)
	compression := fs.String("engine-compression", "", "SST block compression: none or snappy (empty: engine default, "+d.Compression.String()+")")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: shale [flags]\n\nRuns one Shale node.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q (flags only; see --help)", fs.Args())
	}
	if *version {
		fmt.Printf("shale %s (%s)\n", buildinfo.Version, node.EngineVersion())
		return nil
	}
	c, err := node.ParseCompression(*compression)
	if err != nil {
		return fmt.Errorf("--engine-compression: %w", err)
	}
	eng.Compression = c
	logger, err := newLogger(*logLevel, *logFormat)
	if err != nil {
		return err
	}
	slog.SetDefault(logger)

	var members []*kvpb.NodeDescriptor
	if *initialCluster != "" {
		if members, err = node.ParseInitialCluster(*initialCluster); err != nil {
			return fmt.Errorf("--initial-cluster: %w", err)
		}
	}
	var joinAddrs []string
	for _, a := range strings.Split(*join, ",") {
		if a = strings.TrimSpace(a); a != "" {
			joinAddrs = append(joinAddrs, a)
		}
	}
	adv := *advertise
	if adv == "" {
		// Other nodes must reach us at a definite address: a wildcard
		// listen address is not one.
		adv = *listen
	}
	advHTTP := *advertiseHTTP
	if advHTTP == "" {
		advHTTP = *httpAddr
	}
	n, err := node.New(node.Config{
		NodeID:            *nodeID,
		DataDir:           *dataDir,
		AdvertiseAddr:     adv,
		AdvertiseHTTPAddr: advHTTP,
		InitialCluster:    members,
		Join:              joinAddrs,
		ClusterID:         *clusterID,
		Raft:              ro,
		Sharding:          *sharding,
		Engine:            eng,
		Logger:            logger,
	})
	if err != nil {
		return err
	}
	grpcLis, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("--listen: %w (%v)", err, n.Stop(context.Background()))
	}
	httpLis, err := net.Listen("tcp", *httpAddr)
	if err != nil {
		grpcLis.Close()
		return fmt.Errorf("--http: %w (%v)", err, n.Stop(context.Background()))
	}

	served := make(chan error, 1)
	go func() { served <- n.Serve(grpcLis, httpLis) }()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	select {
	case err := <-served:
		// A server failed on its own: Serve has stopped the node.
		stopErr := n.Stop(context.Background())
		if err == nil {
			err = stopErr
		}
		return err
	case sig := <-sigs:
		logger.Info("stopping", "signal", sig.String(), "timeout", shutdownTimeout.String())
		ctx, cancel := context.WithTimeout(context.Background(), *shutdownTimeout)
		defer cancel()
		go func() {
			// A second signal stops at once, without waiting for requests.
			<-sigs
			logger.Warn("second signal: stopping now")
			cancel()
		}()
		if err := n.Stop(ctx); err != nil {
			return fmt.Errorf("stopping: %w", err)
		}
		return <-served
	}
}

func newLogger(level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}
