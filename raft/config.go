package raft

import (
	"errors"
	"log/slog"
	"net"
	"os"
	"runtime"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/shaledb/shale/internal/diskspace"
	"github.com/shaledb/shale/raft/apply"
	"github.com/shaledb/shale/raft/transport"
	"github.com/shaledb/shale/storage"
)

// Config configures a Store. Engine, StateMachines, NodeID and ClusterID
// are required;
// every other field has a documented default (applied by NewStore).
type Config struct {
	// Engine is the node's engine; the Store keeps all Raft and range
	// state in it. The caller opens and closes it (a simulator opens it
	// over the engine's fault-injecting file layer:
	// storage.Options.FaultInjection).
	Engine *storage.DB
	// StateMachines makes the replicas' range state machines (package
	// apply; rangesm.NewFactory over the same Engine).
	StateMachines apply.Factory
	// NodeID and ClusterID identify this node (see Bootstrap and Join).
	NodeID    uint64
	ClusterID string
	// Resolver maps node IDs to gRPC addresses for the transport. If nil,
	// the Store resolves from the node registry in its copy of meta and
	// from Peers.
	Resolver transport.Resolver
	// Peers are addresses known before meta is readable (the
	// --initial-cluster or --join addresses), by node ID.
	Peers map[uint64]string

	// Clock is the Store's source of time: ticks, the leader lease,
	// proposer timestamps and every wait (clock.go). Default: WallClock.
	Clock Clock
	// NewTransport makes the transport that carries the Store's messages
	// and snapshots to other nodes, delivering what arrives to the given
	// handlers (transport_seam.go). Default: the gRPC transport of
	// raft/transport, configured by Resolver, Peers and the transport
	// tuning fields below.
	NewTransport func(TransportHandlers) (Transport, error)

	// TickInterval is the Raft tick (100 ms). ElectionTicks (10) and
	// HeartbeatTicks (1) are in ticks; Raft randomizes the election
	// timeout in [ElectionTicks, 2*ElectionTicks).
	TickInterval   time.Duration
	ElectionTicks  int
	HeartbeatTicks int

	// MaxSizePerMsg bounds the entry bytes of one append message (1 MiB).
	MaxSizePerMsg uint64
	// MaxInflightMsgs bounds the append messages in flight to one
	// follower (256).
	MaxInflightMsgs int
	// MaxUncommittedEntriesSize bounds the bytes a leader holds in
	// uncommitted entries; proposals beyond it fail as Unavailable, so a
	// slow quorum cannot make memory grow without bound (64 MiB).
	MaxUncommittedEntriesSize uint64
	// MaxCommittedSizePerReady bounds the committed entries applied in one
	// round per range (64 MiB).
	MaxCommittedSizePerReady uint64

	// EntryCacheBytes is each replica's in-memory cache of recent log
	// entries (16 MiB).
	EntryCacheBytes int
	// EntryCacheNodeBytes bounds the entry caches of all the node's
	// replicas together (logstore.CacheBudget): a cache that grows while
	// they hold more drops its own oldest entries (256 MiB; the node
	// gives it a share of its memory budget).
	EntryCacheNodeBytes int64
	// LogTruncateMinEntries: a log is truncated only when at least this
	// many entries can go, so truncations are rare (1000), or when it
	// holds LogTruncateMinBytes.
	LogTruncateMinEntries uint64
	// LogTruncateMinBytes: a log holding this many bytes is truncated
	// even with fewer than LogTruncateMinEntries entries to go, so that
	// large entries die in the engine's memtable instead of being
	// flushed and compacted (4 MiB; truncate.go).
	LogTruncateMinBytes int64
	// LogBudgetBytes bounds the node's Raft logs together: while they hold
	// more, a log is truncated once LogTruncateFloorBytes of it can go, so
	// that many ranges' logs, each under LogTruncateMinBytes, do not
	// outgrow the memtable they share (4 MiB; the node sets a quarter of
	// the engine's memtable; truncate.go).
	LogBudgetBytes int64
	// LogTruncateFloorBytes is the smallest truncation made for
	// LogBudgetBytes: smaller ones would add range deletions faster than
	// they free memtable space (64 KiB).
	LogTruncateFloorBytes int64
	// LogMaxEntries and LogMaxBytes cap a range's log: past either, the
	// leader truncates up to its applied index even if a follower still
	// needs the entries (it will get a snapshot instead). 10000 entries,
	// 64 MiB.
	LogMaxEntries uint64
	LogMaxBytes   int64

	// DiskStallThreshold is how long a Raft log write (its fsync) may
	// take before the node counts its disk as stalled: its leaders then
	// hand their leadership to an up-to-date follower and stop using and
	// renewing their leases (diskstall.go). Default: the election timeout
	// (ElectionTicks ticks), at least 500 ms; negative turns the
	// detection off.
	DiskStallThreshold time.Duration
	// LeaseSafetyMargin is subtracted from the election timeout to get the
	// leader lease duration (see docs/replication.md, "Leases"). Default:
	// two ticks.
	LeaseSafetyMargin time.Duration
	// DisableLeaseReads makes every linearizable read take a ReadIndex
	// round.
	DisableLeaseReads bool
	// DisableQuiescence keeps every range ticking and heartbeating even
	// when it is idle (quiesce.go).
	DisableQuiescence bool

	// DedupWindow is how long a client request's outcome is kept for
	// deduplication, measured with proposer timestamps (10 min).
	// DedupSeqWindow is how many request_seqs per client are kept (8192).
	DedupWindow    time.Duration
	DedupSeqWindow uint64
	// DedupGCInterval is how often each range's leader proposes a GC of
	// expired dedup records (1 min).
	DedupGCInterval time.Duration

	// MetaCheckInterval is how often each range's leader checks that meta
	// holds its current descriptor, and repairs it if not (10 s).
	MetaCheckInterval time.Duration
	// MergeFreezeTimeout is how long a range may stay frozen for a merge
	// before its leader settles the merge itself (aborting it unless it
	// committed): the coordinator normally finishes in well under a
	// second (10 s).
	MergeFreezeTimeout time.Duration
	// AppliedWaiter checks, before a merge is proposed, that every replica
	// of the frozen range has applied its freeze (it asks their nodes).
	// Merges fail without one; the node layer provides it.
	AppliedWaiter AppliedWaiter

	// Workers is the size of the worker pool processing ranges
	// (GOMAXPROCS, at least 2).
	Workers int
	// MaxPendingProposals bounds the proposals queued on one replica before
	// they enter the log; more fail as Unavailable (10000).
	MaxPendingProposals int

	// Transport tuning (see transport.Config). TransportCredentials
	// gives the credentials securing the connection to each peer node
	// (nil: plaintext).
	TransportCredentials func(nodeID uint64) credentials.TransportCredentials
	LocalIP              net.IP
	SnapshotRate         int64
	SnapshotChunkBytes   int
	// MaxSnapshotBytes refuses incoming snapshots larger than this: they
	// are staged in memory before being applied (1 GiB).
	MaxSnapshotBytes int64
	// SnapshotMemoryBytes bounds the bytes all incoming snapshots hold
	// in memory at once; a receiver over it waits (snapshot_memory.go).
	// 0: unbounded.
	SnapshotMemoryBytes int64
	// testSnapshotMemory, set by tests of this package, replaces the
	// allowance SnapshotMemoryBytes would make.
	testSnapshotMemory *snapshotMemory

	// Logger; defaults to slog.Default().
	Logger *slog.Logger
	// TestingSkipMetaUpdates makes replica changes skip their meta update,
	// so that tests can watch the periodic repair do it.
	TestingSkipMetaUpdates bool
	// TestingLogWriteDelay makes the log writer wait this long between
	// staging a batch and writing it, widening the window in which a
	// replica can be destroyed under a staged write. Tests only.
	TestingLogWriteDelay time.Duration

	// Manual makes the caller drive processing step by step (StepRound,
	// StepLogWrite, Tick; manual.go): Start starts no goroutines. For the
	// deterministic simulator.
	Manual bool
	// Testing holds hooks and planted bugs for tests (testing_knobs.go).
	Testing TestingKnobs
	// Disk is the node's disk-space monitor (nil: none). While it says
	// the disk is full, the store takes no new data from peers, and a
	// write the disk has no room for releases its reserve and waits for
	// space instead of failing (diskfull.go).
	Disk *diskspace.Monitor

	// Fatal is called when the node cannot continue safely (a failed Raft
	// log write, corrupt state): it must not return. Default: log and
	// os.Exit(1).
	Fatal func(msg string, err error)
}

func (c *Config) setDefaults() error {
	if c.Engine == nil || c.StateMachines == nil || c.NodeID == 0 || c.ClusterID == "" {
		return errors.New("raft: Config needs Engine, StateMachines, NodeID and ClusterID")
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def64 := func(v *uint64, d uint64) {
		if *v == 0 {
			*v = d
		}
	}
	if c.TickInterval <= 0 {
		c.TickInterval = 100 * time.Millisecond
	}
	if c.Clock == nil {
		c.Clock = WallClock{}
	}
	def(&c.ElectionTicks, 10)
	def(&c.HeartbeatTicks, 1)
	if c.ElectionTicks <= c.HeartbeatTicks {
		return errors.New("raft: ElectionTicks must be greater than HeartbeatTicks")
	}
	def64(&c.MaxSizePerMsg, 1<<20)
	def(&c.MaxInflightMsgs, 256)
	def64(&c.MaxUncommittedEntriesSize, 64<<20)
	def64(&c.MaxCommittedSizePerReady, 64<<20)
	def(&c.EntryCacheBytes, 16<<20)
	if c.EntryCacheNodeBytes <= 0 {
		c.EntryCacheNodeBytes = 256 << 20
	}
	def64(&c.LogTruncateMinEntries, 1000)
	if c.LogTruncateMinBytes <= 0 {
		c.LogTruncateMinBytes = 4 << 20
	}
	if c.LogBudgetBytes <= 0 {
		c.LogBudgetBytes = 4 << 20
	}
	if c.LogTruncateFloorBytes <= 0 {
		c.LogTruncateFloorBytes = 64 << 10
	}
	def64(&c.LogMaxEntries, 10000)
	if c.LogMaxBytes <= 0 {
		c.LogMaxBytes = 64 << 20
	}
	if c.LeaseSafetyMargin <= 0 {
		c.LeaseSafetyMargin = 2 * c.TickInterval
	}
	if c.DiskStallThreshold == 0 {
		// Not below minDiskStallThreshold: with the short ticks of tests,
		// a loaded machine's fsync would move leaders for nothing.
		c.DiskStallThreshold = max(c.electionTimeout(), minDiskStallThreshold)
	}
	if c.DedupWindow <= 0 {
		c.DedupWindow = 10 * time.Minute
	}
	def64(&c.DedupSeqWindow, 8192)
	if c.DedupGCInterval <= 0 {
		c.DedupGCInterval = time.Minute
	}
	if c.MergeFreezeTimeout <= 0 {
		c.MergeFreezeTimeout = 10 * time.Second
	}
	if c.MetaCheckInterval <= 0 {
		c.MetaCheckInterval = 10 * time.Second
	}
	def(&c.Workers, max(runtime.GOMAXPROCS(0), 2))
	def(&c.MaxPendingProposals, 10000)
	if c.MaxSnapshotBytes <= 0 {
		c.MaxSnapshotBytes = 1 << 30
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Fatal == nil {
		log := c.Logger
		c.Fatal = func(msg string, err error) {
			log.Error("FATAL: "+msg, "err", err)
			os.Exit(1)
		}
	}
	return nil
}

// electionTimeout is the minimum election timeout in wall time.
func (c *Config) electionTimeout() time.Duration {
	return time.Duration(c.ElectionTicks) * c.TickInterval
}

// leaseDuration is how long a quorum's confirmation keeps the leader's
// lease valid (docs/replication.md, "Leases"): a follower that heard from
// the leader at time T refuses to vote for another candidate until it has
// counted ElectionTicks ticks, which takes at least
// (ElectionTicks-1)*TickInterval of wall time after T (its first tick may
// come right away). The margin covers clock-rate differences and
// scheduling delays between taking T and sending the heartbeat.
func (c *Config) leaseDuration() time.Duration {
	return time.Duration(c.ElectionTicks-1)*c.TickInterval - c.LeaseSafetyMargin
}
