package node

import (
	"context"
	"runtime/debug"
	"strconv"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shaledb/shale/raft/keys"
)

// metrics are the node's Prometheus metrics, in a registry of its own (so
// several nodes can run in one test process). docs/metrics.md lists every
// series; TestMetricsDocumented checks a live node exports them all.
//
//	grpc_server_*                   per-method gRPC rate, codes and latency (go-grpc-middleware)
//	shale_engine_*                  engine statistics, read at scrape time
//	shale_raft_*                    replication (raft/metrics.go, raft/metrics_latency.go)
//	shale_range_*{range}            per-range Raft state, read at scrape time
//	shale_ranges*                   replica, leader and leaderless counts of the node
//	shale_node_host_cpu_busy_ratio  the host's CPU use (cpu.go)
//	shale_load_splits_held_total    load splits waiting for spare CPU (splitter.go)
//	shale_gc_*                      the GC queue (gc_queue.go)
//	shale_watch*                    the Watch service (watch_metrics.go)
//	shale_clock_*, shale_tso_*      the clock guard and the oracle client (clock.go)
//	go_*, process_*                 Go runtime and process
type metrics struct {
	registry *prometheus.Registry
	grpc     *grpcprom.ServerMetrics
	// unaryInterceptor and streamInterceptor count and time every RPC.
	unaryInterceptor  grpc.UnaryServerInterceptor
	streamInterceptor grpc.StreamServerInterceptor
	// loadSplitsHeld counts load splits held back for want of spare CPU
	// (splitter.go).
	loadSplitsHeld prometheus.Counter
	// foreignCluster counts calls refused for naming another cluster
	// (cluster_check.go).
	foreignCluster prometheus.Counter
	// impersonation counts claims of a node ID refused because the
	// caller's certificate is bound to another node (peer_identity.go),
	// and servers refused for presenting another node's certificate
	// (tls.go); it is security's counter.
	impersonation prometheus.Counter
	// gc are the GC queue's (gc_queue.go).
	gc gcMetrics
	// closes counts the Close commands proposed for reads above a
	// range's frontier (read_close.go); followerReads the
	// bounded-staleness reads served at a replica's frontier without the
	// leader (read.go).
	closes        prometheus.Counter
	followerReads prometheus.Counter
	// lockWaits, lockWaitTimeouts and deadlocks count the writes that
	// waited on an intent, the waits that reached their bound, and the
	// waits given up to break a deadlock (txn_wait.go), locking reads'
	// waits included (txn_lock.go).
	lockWaits        prometheus.Counter
	lockWaitTimeouts prometheus.Counter
	deadlocks        prometheus.Counter
	// intentReads counts the reads that met an intent they could not
	// ignore (txn_intents.go).
	intentReads prometheus.Counter
	// watch are the Watch service's (watch_metrics.go).
	watch watchMetrics
}

func newMetrics(n *Node) *metrics {
	gm := grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram(
		// 25µs to ~26s: in-memory reads through fsynced writes to
		// requests stuck behind a stall.
		grpcprom.WithHistogramBuckets(prometheus.ExponentialBuckets(25e-6, 2, 21)),
	))
	m := &metrics{
		registry:          prometheus.NewRegistry(),
		grpc:              gm,
		unaryInterceptor:  gm.UnaryServerInterceptor(),
		streamInterceptor: gm.StreamServerInterceptor(),
		loadSplitsHeld: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shale_load_splits_held_total",
			Help: "Load splits this node held back because no host of the range's voters had CPU to spare (--split-host-cpu).",
		}),
		foreignCluster: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shale_foreign_cluster_calls_total",
			Help: "Calls refused because they named another cluster's ID: a node or client of another cluster is talking to this one.",
		}),
		impersonation: n.sec.impersonation,
		gc:            newGCMetrics(),
		watch:         newWatchMetrics(n),
		followerReads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shale_follower_reads_total",
			Help: "Bounded-staleness reads this node served at a replica's frontier, without a leader barrier (on a follower or the leader).",
		}),
		closes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shale_closed_timestamps_proposed_total",
			Help: "Close commands this node proposed as a range's leader, so that reads above the range's frontier could be served.",
		}),
		intentReads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shale_txn_reads_met_intents_total",
			Help: "Reads this node served that met another transaction's intent at or below their timestamp, and so resolved it, waited for it, or were answered Unavailable.",
		}),
		lockWaits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shale_txn_lock_waits_total",
			Help: "Writes this node, as a range's leader, queued behind another transaction's intent on a key, and locking reads queued behind another transaction's lock or intent.",
		}),
		lockWaitTimeouts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shale_txn_lock_wait_timeouts_total",
			Help: "Waits on an intent or a lock that reached their bound (the write was answered with its conflict, the locking read with fewer keys locked).",
		}),
		deadlocks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shale_txn_deadlocks_total",
			Help: "Waits on an intent or a lock given up because the waiting transaction was the younger of a deadlock found in the push graph.",
		}),
	}
	m.registry.MustRegister(
		gm,
		m.loadSplitsHeld,
		m.foreignCluster,
		m.impersonation,
		m.gc.versions,
		m.gc.commands,
		m.gc.failures,
		m.gc.lag,
		m.gc.skipped,
		m.gc.protections,
		m.gc.protectedOldest,
		m.closes,
		m.lockWaits,
		m.intentReads,
		m.lockWaitTimeouts,
		m.deadlocks,
		m.followerReads,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&engineCollector{n: n},
		&rangeCollector{n: n},
		&hotCollector{n: n},
		&cpuCollector{n: n},
		&diskCollector{n: n},
		&memoryCollector{n: n},
		&clockCollector{n: n},
	)
	m.registry.MustRegister(m.watch.collectors()...)
	m.registry.MustRegister(n.lessor.collectors()...)
	if err := n.store.Metrics().Register(m.registry); err != nil {
		panic(err) // a fresh registry: only a duplicate name can fail
	}
	return m
}

// recoverInterceptor turns a panic in a handler into an Internal error so
// that one bad request cannot take the node down; the stack is logged.
func (n *Node) recoverInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	defer func() {
		if r := recover(); r != nil {
			n.log.Error("panic serving request", "method", info.FullMethod, "panic", r, "stack", string(debug.Stack()))
			resp, err = nil, status.Errorf(codes.Internal, "%s: internal error (panic: %v)", info.FullMethod, r)
		}
	}()
	return handler(ctx, req)
}

// engineCollector exports the engine's statistics, read once per scrape.
type engineCollector struct{ n *Node }

var (
	engineLevelFiles = prometheus.NewDesc("shale_engine_level_files", "SST files per LSM level.", []string{"level"}, nil)
	engineLevelBytes = prometheus.NewDesc("shale_engine_level_bytes", "SST bytes per LSM level.", []string{"level"}, nil)
	engineWriteAmp   = prometheus.NewDesc("shale_engine_write_amplification", "Bytes written to disk per user byte written, since start.", nil, nil)
	engineStall      = prometheus.NewDesc("shale_engine_stall_seconds_total", "Time writers spent slowed or stopped by the engine.", nil, nil)
	engineHitRatio   = prometheus.NewDesc("shale_engine_block_cache_hit_ratio", "Block cache hits over lookups since start (0 before the first lookup).", nil, nil)
)

// Describe sends nothing: an unchecked collector, since the engine's
// statistics can only be read while it is open.
func (c *engineCollector) Describe(chan<- *prometheus.Desc) {}

func (c *engineCollector) Collect(ch chan<- prometheus.Metric) {
	st, err := c.n.db.Stats()
	if err != nil {
		return // closed: no engine metrics
	}
	counter := func(name, help string, v uint64) {
		ch <- prometheus.MustNewConstMetric(prometheus.NewDesc("shale_engine_"+name, help, nil, nil), prometheus.CounterValue, float64(v))
	}
	gauge := func(name, help string, v uint64) {
		ch <- prometheus.MustNewConstMetric(prometheus.NewDesc("shale_engine_"+name, help, nil, nil), prometheus.GaugeValue, float64(v))
	}
	counter("user_bytes_written_total", "Batch payload bytes accepted.", st.UserBytesWritten)
	counter("user_keys_written_total", "Batch records accepted.", st.UserKeysWritten)
	counter("wal_bytes_written_total", "Bytes appended to the WAL.", st.WALBytesWritten)
	counter("wal_syncs_total", "WAL fsyncs.", st.WALSyncs)
	counter("flush_bytes_written_total", "Bytes written by memtable flushes.", st.FlushBytesWritten)
	counter("compaction_bytes_written_total", "Bytes written by compactions.", st.CompactionBytesWritten)
	counter("compaction_bytes_read_total", "Bytes read by compactions.", st.CompactionBytesRead)
	counter("bytes_read_total", "Key and value bytes returned by reads.", st.BytesRead)
	counter("keys_read_total", "Keys returned by reads.", st.KeysRead)
	ch <- prometheus.MustNewConstMetric(engineStall, prometheus.CounterValue, float64(st.StallMicros)/1e6)
	counter("block_cache_hits_total", "Block cache hits.", st.BlockCacheHits)
	counter("block_cache_misses_total", "Block cache misses.", st.BlockCacheMisses)
	counter("bloom_filter_checked_total", "Bloom filter probes.", st.BloomFilterChecked)
	counter("bloom_filter_useful_total", "Bloom filter negatives (data block reads avoided).", st.BloomFilterUseful)
	counter("flushes_total", "Memtable flushes.", st.FlushCount)
	counter("compactions_total", "Compactions.", st.CompactionCount)
	gauge("block_cache_usage_bytes", "Bytes in the block cache.", st.BlockCacheUsage)
	gauge("block_cache_capacity_bytes", "Block cache capacity.", st.BlockCacheCapacity)
	gauge("memtable_bytes", "Bytes in the active and immutable memtables.", st.MemtableBytes)
	gauge("immutable_memtables", "Immutable memtables waiting to flush.", st.NumImmutableMemtables)
	gauge("running_flushes", "Flushes running.", st.RunningFlushes)
	gauge("running_compactions", "Compactions running.", st.RunningCompactions)
	gauge("pending_compaction_bytes", "Bytes compaction is behind by.", st.PendingCompactionBytes)
	gauge("live_sst_bytes", "Bytes in live SST files.", st.LiveSSTBytes)
	gauge("wal_file_bytes", "Bytes in live WAL files.", st.WALFileBytes)
	gauge("snapshots", "Open snapshots.", st.NumSnapshots)
	var bgErr uint64
	if st.BackgroundError != nil {
		bgErr = 1
	}
	gauge("background_error", "1 while writes are stopped by a background error.", bgErr)
	for i := range st.LevelFiles {
		lvl := strconv.Itoa(i)
		ch <- prometheus.MustNewConstMetric(engineLevelFiles, prometheus.GaugeValue, float64(st.LevelFiles[i]), lvl)
		ch <- prometheus.MustNewConstMetric(engineLevelBytes, prometheus.GaugeValue, float64(st.LevelBytes[i]), lvl)
	}
	ch <- prometheus.MustNewConstMetric(engineWriteAmp, prometheus.GaugeValue, st.WriteAmplification())
	var ratio float64
	if lookups := st.BlockCacheHits + st.BlockCacheMisses; lookups > 0 {
		ratio = float64(st.BlockCacheHits) / float64(lookups)
	}
	ch <- prometheus.MustNewConstMetric(engineHitRatio, prometheus.GaugeValue, ratio)
}

// rangeCollector exports the Raft state of every replica of the node.
type rangeCollector struct{ n *Node }

var (
	rangeLeader  = prometheus.NewDesc("shale_range_is_leader", "1 if this node's replica leads the range.", []string{"range"}, nil)
	rangeTerm    = prometheus.NewDesc("shale_range_term", "Raft term of this node's replica.", []string{"range"}, nil)
	rangeCommit  = prometheus.NewDesc("shale_range_commit_index", "Raft commit index of this node's replica.", []string{"range"}, nil)
	rangeApplied = prometheus.NewDesc("shale_range_applied_index", "Applied index of this node's replica.", []string{"range"}, nil)
	rangeLogSize = prometheus.NewDesc("shale_range_log_entries", "Entries in this node's Raft log of the range.", []string{"range"}, nil)
	rangeLease   = prometheus.NewDesc("shale_range_lease_valid", "1 while this node holds the range's leader lease.", []string{"range"}, nil)
	// The range's replicated MVCC stats and GC threshold (range_size.go).
	rangeLiveBytes   = prometheus.NewDesc("shale_range_live_bytes", "Bytes of the range's live data (its keys' newest live versions).", []string{"range"}, nil)
	rangeLiveKeys    = prometheus.NewDesc("shale_range_live_keys", "Keys of the range whose newest version is a live value.", []string{"range"}, nil)
	rangeMVCCBytes   = prometheus.NewDesc("shale_range_mvcc_bytes", "Bytes of every version the range holds, history and deletions included.", []string{"range"}, nil)
	rangeVersions    = prometheus.NewDesc("shale_range_versions", "Versions the range holds, deletions included.", []string{"range"}, nil)
	rangeGCThreshold = prometheus.NewDesc("shale_range_gc_threshold_seconds", "The range's GC threshold as Unix seconds (0: never collected); reads below it are refused.", []string{"range"}, nil)

	rangesReplicas   = prometheus.NewDesc("shale_ranges", "Replicas (ranges) on this node.", nil, nil)
	rangesLeaders    = prometheus.NewDesc("shale_ranges_leader", "Ranges this node's replica leads.", nil, nil)
	rangesLeaderless = prometheus.NewDesc("shale_ranges_unavailable", "Ranges whose replica on this node knows no leader: they serve no writes or linearizable reads.", nil, nil)
)

func (c *rangeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{rangeLeader, rangeTerm, rangeCommit, rangeApplied, rangeLogSize, rangeLease,
		rangeLiveBytes, rangeLiveKeys, rangeMVCCBytes, rangeVersions, rangeGCThreshold,
		rangesReplicas, rangesLeaders, rangesLeaderless} {
		ch <- d
	}
}

func (c *rangeCollector) Collect(ch chan<- prometheus.Metric) {
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	var replicas, leaders, leaderless float64
	defer func() {
		ch <- prometheus.MustNewConstMetric(rangesReplicas, prometheus.GaugeValue, replicas)
		ch <- prometheus.MustNewConstMetric(rangesLeaders, prometheus.GaugeValue, leaders)
		ch <- prometheus.MustNewConstMetric(rangesLeaderless, prometheus.GaugeValue, leaderless)
	}()
	for _, r := range c.n.store.Replicas() {
		st := r.Status()
		id := strconv.FormatUint(st.RangeID, 10)
		replicas++
		if st.State == "leader" {
			leaders++
		}
		if st.Leader == 0 {
			leaderless++
		}
		ch <- prometheus.MustNewConstMetric(rangeLeader, prometheus.GaugeValue, b(st.State == "leader"), id)
		ch <- prometheus.MustNewConstMetric(rangeTerm, prometheus.GaugeValue, float64(st.Term), id)
		ch <- prometheus.MustNewConstMetric(rangeCommit, prometheus.GaugeValue, float64(st.Commit), id)
		ch <- prometheus.MustNewConstMetric(rangeApplied, prometheus.GaugeValue, float64(st.Applied), id)
		ch <- prometheus.MustNewConstMetric(rangeLogSize, prometheus.GaugeValue, float64(st.LastIndex-st.Truncated), id)
		ch <- prometheus.MustNewConstMetric(rangeLease, prometheus.GaugeValue, b(st.LeaseValid), id)
		if st.Descriptor == nil || keys.IsMetaRange(st.Descriptor) {
			continue
		}
		ms := mvccState(r)
		ch <- prometheus.MustNewConstMetric(rangeLiveBytes, prometheus.GaugeValue, float64(ms.Stats.LiveBytes), id)
		ch <- prometheus.MustNewConstMetric(rangeLiveKeys, prometheus.GaugeValue, float64(ms.Stats.LiveKeys), id)
		ch <- prometheus.MustNewConstMetric(rangeMVCCBytes, prometheus.GaugeValue, float64(ms.Stats.Bytes), id)
		ch <- prometheus.MustNewConstMetric(rangeVersions, prometheus.GaugeValue, float64(ms.Stats.Versions), id)
		ch <- prometheus.MustNewConstMetric(rangeGCThreshold, prometheus.GaugeValue, float64(ms.GCThreshold.WallTime)/1e9, id)
	}
}
