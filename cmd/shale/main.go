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
	var s settings
	s.define(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: shale [flags]\n\nRuns one Shale node. Every flag is also an environment variable\n"+
			"SHALE_<FLAG_NAME> and a key of the --config file; a flag beats the\n"+
			"environment, which beats the file (docs/operations.md).\n\nFlags:\n")
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
	if s.version {
		fmt.Printf("shale %s (%s)\n", buildinfo.Version, node.EngineVersion())
		return nil
	}
	sources, err := resolveSources(fs, os.Getenv)
	if err != nil {
		return err
	}
	c, err := node.ParseCompression(s.compression)
	if err != nil {
		return fmt.Errorf("--engine-compression: %w", err)
	}
	eng := s.eng
	eng.Compression = c
	logger, err := newLogger(s.logLevel, s.logFormat)
	if err != nil {
		return err
	}
	slog.SetDefault(logger)
	logSettings(logger, fs, sources)
	if err := setGCPercent(s.gcPercent); err != nil {
		return err
	}
	if err := setGOMAXPROCS(s.gomaxprocs, os.Getenv); err != nil {
		return err
	}

	// Inherited listeners come first: their addresses are the listen
	// addresses the node advertises.
	grpcLis, err := inheritedListener("listen", s.listenFD, &s.listen, sources)
	if err != nil {
		return err
	}
	httpLis, err := inheritedListener("http", s.httpFD, &s.httpAddr, sources)
	if err != nil {
		closeListener(grpcLis)
		return err
	}

	var members []*kvpb.NodeDescriptor
	if s.initialCluster != "" {
		if members, err = node.ParseInitialCluster(s.initialCluster); err != nil {
			return fmt.Errorf("--initial-cluster: %w", err)
		}
	}
	var joinAddrs []string
	for _, a := range strings.Split(s.join, ",") {
		if a = strings.TrimSpace(a); a != "" {
			joinAddrs = append(joinAddrs, a)
		}
	}
	adv := s.advertise
	if adv == "" {
		// Other nodes must reach us at a definite address: a wildcard
		// listen address is not one.
		adv = s.listen
	}
	advHTTP := s.advertiseHTTP
	if advHTTP == "" {
		advHTTP = s.httpAddr
	}
	cfg := node.Config{
		NodeID:            s.nodeID,
		DataDir:           s.dataDir,
		DiskReserveBytes:  s.diskReserve,
		BackupDir:         s.backupDir,
		MemoryBudgetBytes: s.memoryBudget,
		AdvertiseAddr:     adv,
		AdvertiseHTTPAddr: advHTTP,
		InitialCluster:    members,
		Join:              joinAddrs,
		ClusterID:         s.clusterID,
		Raft:              s.raft,
		Clock:             s.clock,
		Sharding:          s.sharding,
		GC:                s.gc,
		Engine:            eng,
		Logger:            logger,
	}
	s.sec.apply(&cfg)
	n, err := node.New(cfg)
	if err != nil {
		closeListener(grpcLis)
		closeListener(httpLis)
		return err
	}
	reloadOnSIGHUP(n, logger)
	if grpcLis == nil {
		if grpcLis, err = net.Listen("tcp", s.listen); err != nil {
			closeListener(httpLis)
			return fmt.Errorf("--listen: %w (%v)", err, n.Stop(context.Background()))
		}
	}
	if httpLis == nil {
		if httpLis, err = net.Listen("tcp", s.httpAddr); err != nil {
			grpcLis.Close()
			return fmt.Errorf("--http: %w (%v)", err, n.Stop(context.Background()))
		}
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
		logger.Info("stopping", "signal", sig.String(), "timeout", s.shutdownTimeout.String())
		ctx, cancel := context.WithTimeout(context.Background(), s.shutdownTimeout)
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
