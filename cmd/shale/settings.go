package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/shaledb/shale/node"
)

// settings is every setting of a node. Each is a flag defined in define;
// config.go gives every one of them (but --config and --version) an
// environment variable SHALE_<NAME> and a config-file key <name> too.
//
// Adding a setting is one line in define (plus its use and its row in the
// docs/operations.md table, which TestSettingsDocumented enforces).
type settings struct {
	config          string
	version         bool
	nodeID          uint64
	listen          string
	httpAddr        string
	listenFD        int
	httpFD          int
	advertise       string
	advertiseHTTP   string
	initialCluster  string
	join            string
	clusterID       string
	dataDir         string
	diskReserve     int64
	backupDir       string
	memoryBudget    int64
	logLevel        string
	logFormat       string
	shutdownTimeout time.Duration
	gcPercent       int
	gomaxprocs      int
	compression     string
	eng             node.EngineOptions
	raft            node.RaftOptions
	sharding        node.ShardingOptions
	gc              node.GCOptions
	clock           node.ClockOptions
	sec             securityFlags // security.go
}

// define registers every setting on fs with its default.
func (s *settings) define(fs *flag.FlagSet) {
	fs.StringVar(&s.config, "config", "", "optional config file (.yaml, .yml or .toml) of setting: value pairs; env SHALE_CONFIG")
	fs.BoolVar(&s.version, "version", false, "print the version and exit")

	fs.Uint64Var(&s.nodeID, "node-id", 0, "this node's ID; 0: the data directory's, else found in --initial-cluster by --advertise, assigned when joining, or 1 alone")
	fs.StringVar(&s.listen, "listen", "127.0.0.1:7379", "gRPC listen address (KV and Admin services)")
	fs.StringVar(&s.httpAddr, "http", "127.0.0.1:7380", "HTTP listen address (/healthz, /metrics, /debug/pprof with --pprof); bind it to a private address or use --http-tls")
	fs.IntVar(&s.listenFD, "listen-fd", 0, "serve gRPC on this inherited listening socket (file descriptor, as a supervisor or test harness passes it) instead of binding --listen; its address is the listen address; 0: bind --listen")
	fs.IntVar(&s.httpFD, "http-fd", 0, "serve HTTP on this inherited listening socket instead of binding --http; its address is the HTTP address; 0: bind --http")
	fs.StringVar(&s.advertise, "advertise", "", "gRPC address other nodes and clients reach this node at (default: --listen)")
	fs.StringVar(&s.advertiseHTTP, "advertise-http", "", "HTTP address others reach this node at (default: --http)")
	fs.StringVar(&s.initialCluster, "initial-cluster", "", "bootstrap a new cluster of these members on the first start: id=host:port,... (the same on every initial node)")
	fs.StringVar(&s.join, "join", "", "join an existing cluster through these member addresses on the first start: host:port,...")
	fs.StringVar(&s.clusterID, "cluster-id", "", "the cluster's ID (default: random, made by the initial member with the lowest ID and learnt by the others); refuses a data directory or cluster of another ID")
	fs.StringVar(&s.dataDir, "data-dir", "data/node1", "directory for the node's data")
	fs.Int64Var(&s.memoryBudget, "memory-budget", 0, "memory budget of the node's Go process in bytes: client writes in flight may hold an eighth of it (more wait, then fail Unavailable), and it is the Go soft memory limit unless GOMEMLIMIT is set; 0: GOMEMLIMIT if set, else 2 GiB")
	fs.StringVar(&s.backupDir, "backup-dir", "", "directory that backups are written to and restored from: every node of the cluster must see the same directory at this path (a shared volume); empty: the node serves no backup requests")
	fs.Int64Var(&s.diskReserve, "disk-reserve", node.DefaultDiskReserve, "bytes of disk kept free: below this much available space the node refuses writes, and a reserve file this large gives writes in flight room on a disk that filled anyway; negative: no reserve")
	fs.StringVar(&s.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&s.logFormat, "log-format", "text", "log format: text or json")
	fs.DurationVar(&s.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long a graceful stop waits for running requests")
	fs.IntVar(&s.gcPercent, "gc-percent", defaultGCPercent, "Go garbage collector target, as GOGC (heap growth in percent between collections); 0 keeps the runtime's (GOGC or 100)")
	fs.IntVar(&s.gomaxprocs, "gomaxprocs", 0, "Go scheduler threads (GOMAXPROCS); 0: the GOMAXPROCS environment variable if set, else the CPUs available plus 2")

	d := node.EngineDefaults()
	fs.Uint64Var(&s.eng.WriteBufferSize, "engine-write-buffer-size", 0, fmt.Sprintf("memtable size in bytes (0: engine default, %d)", d.WriteBufferSize))
	fs.Uint64Var(&s.eng.BlockCacheSize, "engine-block-cache-size", 0, fmt.Sprintf("block cache size in bytes (0: engine default, %d)", d.BlockCacheSize))
	fs.IntVar(&s.eng.BloomBitsPerKey, "engine-bloom-bits", 0, fmt.Sprintf("Bloom filter bits per key; negative disables (0: engine default, %d)", d.BloomBitsPerKey))
	fs.IntVar(&s.eng.MaxBackgroundJobs, "engine-max-background-jobs", 0, fmt.Sprintf("flush and compaction threads (0: engine default, %d)", d.MaxBackgroundJobs))
	fs.IntVar(&s.eng.MaxOpenFiles, "engine-max-open-files", 0, "table cache bound; negative is unbounded (0: engine default)")
	fs.BoolVar(&s.eng.DisableAutoCompactions, "engine-disable-auto-compactions", false, "turn background compactions off")
	fs.StringVar(&s.compression, "engine-compression", "", "SST block compression: none or snappy (empty: engine default, "+d.Compression.String()+")")

	fs.DurationVar(&s.clock.MaxOffset, "max-clock-offset", 500*time.Millisecond, "the most two nodes' clocks may differ; a node farther than 80% of it from most of its peers stops serving requests that need a timestamp (the same on every node)")
	fs.DurationVar(&s.clock.TestingOffset, "testing-clock-offset", 0, "TESTING ONLY: shift this node's clock by this much (the fault suite's clock-skew nemesis); never set it in production")

	fs.DurationVar(&s.raft.TickInterval, "raft-tick", 100*time.Millisecond, "Raft tick interval")
	fs.IntVar(&s.raft.ElectionTicks, "raft-election-ticks", 10, "election timeout in ticks (randomized up to twice that)")
	fs.IntVar(&s.raft.HeartbeatTicks, "raft-heartbeat-ticks", 1, "heartbeat interval in ticks")
	fs.Uint64Var(&s.raft.MaxSizePerMsg, "raft-max-size-per-msg", 1<<20, "bytes of entries in one append message")
	fs.IntVar(&s.raft.MaxInflightMsgs, "raft-max-inflight-msgs", 256, "append messages in flight to one follower")
	fs.Uint64Var(&s.raft.MaxUncommittedBytes, "raft-max-uncommitted-bytes", 64<<20, "uncommitted bytes a leader holds before refusing writes")
	fs.Uint64Var(&s.raft.LogMaxEntries, "raft-log-max-entries", 10000, "log entries kept before truncating past lagging followers (they get snapshots)")
	fs.Int64Var(&s.raft.LogMaxBytes, "raft-log-max-bytes", 64<<20, "log bytes kept before truncating past lagging followers")
	fs.Int64Var(&s.raft.SnapshotRate, "snapshot-rate", 32<<20, "bytes per second of outgoing snapshots, all ranges together; negative: unlimited")

	// Splits and placement (docs/sharding.md).
	o := &s.sharding
	fs.Uint64Var(&o.SplitSizeBytes, "split-size", 64<<20, "split a range whose approximate size exceeds this many bytes")
	fs.Float64Var(&o.SplitQPS, "split-qps", 2500, "split a range serving more requests per second than this, at a key dividing its traffic; negative: never by load")
	fs.Float64Var(&o.SplitHostCPU, "split-host-cpu", 0.8, "split by load only while the host of one of the range's voters has less than this fraction of its CPU busy; 1: whatever the CPU use")
	fs.DurationVar(&o.SplitCheckInterval, "split-check-interval", 10*time.Second, "how often leaders check their ranges' size and load")
	fs.BoolVar(&o.DisableAutoSplit, "disable-auto-split", false, "turn size and load splits off (manual splits still work)")
	fs.DurationVar(&o.PlacementInterval, "placement-interval", 10*time.Second, "how often the placement controller runs a pass")
	fs.DurationVar(&o.DeadNodeTimeout, "dead-node-timeout", 5*time.Minute, "a node not heard from for this long is dead and its replicas are re-created elsewhere")
	fs.IntVar(&o.ReplicationFactor, "replication-factor", 3, "voters per range that placement keeps when enough nodes are live")
	fs.IntVar(&o.MaxMovesPerPass, "placement-max-moves", 4, "replica moves one placement pass starts")
	fs.BoolVar(&o.DisablePlacement, "disable-placement", false, "turn the placement controller off")
	fs.Uint64Var(&o.MergeSizeBytes, "merge-size", 0, "merge adjacent ranges each smaller than this many bytes once cold for --merge-delay (0: a quarter of --split-size)")
	fs.DurationVar(&o.MergeDelay, "merge-delay", 5*time.Minute, "how long two adjacent ranges must stay small and cold before they are merged")
	fs.BoolVar(&o.DisableAutoMerge, "disable-auto-merge", false, "turn automatic merges off (manual merges still work)")
	fs.Int64Var(&s.raft.MaxSnapshotBytes, "max-snapshot-bytes", 1<<30, "largest incoming snapshot accepted (staged in memory)")
	fs.BoolVar(&s.raft.DisableLeaseReads, "disable-lease-reads", false, "serve every linearizable read through a ReadIndex round, never the leader lease")
	fs.BoolVar(&s.raft.DisableQuiescence, "disable-quiescence", false, "keep idle ranges ticking and heartbeating instead of putting them to rest")

	// History retention and garbage collection (docs/versions.md).
	fs.DurationVar(&s.gc.Retention, "history-retention", node.DefaultRetention, "how long old versions are kept: reads as of an older time fail with \"history compacted\" (at least 1s)")
	fs.DurationVar(&s.gc.Interval, "history-gc-interval", 0, "how often leaders look for history to collect (0: a tenth of --history-retention, between 1s and 1m)")
	fs.BoolVar(&s.gc.Disable, "disable-history-gc", false, "keep every version: GC thresholds stay where they are")

	s.sec.register(fs)
}
