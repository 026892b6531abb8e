package node

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/raft"
	"github.com/shaledb/shale/storage"
)

// Config configures a Node. DataDir is required; every other field has a
// documented default.
type Config struct {
	// NodeID identifies the node in the cluster. 0 means: the ID the
	// node's TLS certificate is bound to, if it is (docs/security.md,
	// "Node identity"); else the ID the data directory remembers; on a
	// first start, the entry of InitialCluster whose address is
	// AdvertiseAddr, the ID the cluster assigns when joining, or 1 for a
	// one-node cluster. A node refuses to start on another node's
	// directory.
	NodeID uint64
	// DataDir holds everything the node stores; the engine lives in
	// DataDir/engine.
	DataDir string
	// AdvertiseAddr and AdvertiseHTTPAddr are the addresses other nodes and
	// clients reach this node's gRPC and HTTP servers at. Empty means the
	// addresses of the listeners given to Serve. Joining a cluster needs
	// AdvertiseAddr.
	AdvertiseAddr     string
	AdvertiseHTTPAddr string

	// InitialCluster bootstraps a new cluster of these members on the
	// first start (the same list on every initial node). Join instead
	// joins an existing cluster through any of these member addresses.
	// Neither: a one-node cluster. Both are ignored once the data
	// directory is initialized.
	InitialCluster []*kvpb.NodeDescriptor
	Join           []string
	// ClusterID names the cluster. Empty: a new cluster gets a random ID,
	// made by its seed (the initial member with the lowest node ID) and
	// learnt by the other initial members, which wait for it (identity.go).
	// Set on every initial member, it is the ID and nobody waits. When set,
	// a data directory or a cluster of another ID is refused.
	ClusterID string

	// Raft tunes replication (zero: the documented defaults).
	Raft RaftOptions
	// Sharding tunes splits and placement (zero: the documented defaults).
	Sharding ShardingOptions
	// GC tunes history retention and garbage collection (zero: the
	// documented defaults).
	GC GCOptions
	// Engine configures the storage engine (zero: the engine's defaults).
	Engine storage.Options
	// Limits bound requests (zero: DefaultLimits).
	Limits Limits
	// Conn bounds connections and streams (zero fields: defaults).
	Conn ConnLimits
	// Security configures TLS and authentication (zero: insecure mode).
	Security SecurityConfig
	// Clock configures the node's clock (zero: the defaults).
	Clock ClockOptions
	// HTTP configures the HTTP server of /healthz, /metrics and pprof
	// (zero: plaintext, no pprof).
	HTTP HTTPOptions
	// DiskReserveBytes is the disk reserve (disk.go): writes are refused
	// while the data directory's file system has less than this
	// available, and a reserve file of this size is kept to let writes in
	// flight finish on a disk that filled anyway. 0: DefaultDiskReserve;
	// negative: no reserve (a full disk is still survived, but with no
	// room kept for recovering).
	DiskReserveBytes int64
	// MemoryBudgetBytes is the memory budget of the node's Go process
	// (memory.go): client writes in flight may hold an eighth of it, and,
	// when GOMEMLIMIT is not set, it is the runtime's soft memory limit.
	// 0: GOMEMLIMIT if set, else DefaultMemoryBudget.
	MemoryBudgetBytes int64
	// Logger receives the node's logs (nil: slog.Default()).
	Logger *slog.Logger

	// BackupDir is where backups are written and read (the Backup
	// service): a directory every node of the cluster sees at the same
	// path, such as a shared volume. Requests name directories inside it.
	// Empty: the node serves no backup requests.
	BackupDir string

	// raftTesting are the replication layer's testing hooks, set by this
	// package's tests only.
	raftTesting raft.TestingKnobs
}

// DefaultDiskReserve is the default disk reserve: room for a memtable's
// flush (64 MiB by default) and the log appends in flight, twice over.
const DefaultDiskReserve = 128 << 20

// diskReserve is the reserve in bytes (0: none).
func (c *Config) diskReserve() uint64 {
	switch {
	case c.DiskReserveBytes < 0:
		return 0
	case c.DiskReserveBytes == 0:
		return DefaultDiskReserve
	}
	return uint64(c.DiskReserveBytes)
}

// RaftOptions tunes replication; every zero field keeps its default
// (docs/replication.md and docs/operations.md explain each).
type RaftOptions struct {
	TickInterval   time.Duration // 100 ms
	ElectionTicks  int           // 10 ticks (Raft randomizes in [10, 20))
	HeartbeatTicks int           // 1 tick
	// MaxSizePerMsg bounds one append message (1 MiB); MaxInflightMsgs the
	// appends in flight to one follower (256).
	MaxSizePerMsg   uint64
	MaxInflightMsgs int
	// MaxUncommittedBytes bounds what a leader holds uncommitted; beyond
	// it writes fail as Unavailable (64 MiB).
	MaxUncommittedBytes uint64
	// LogMaxEntries and LogMaxBytes cap a range's log before it is
	// truncated regardless of lagging followers (10000, 64 MiB).
	LogMaxEntries uint64
	LogMaxBytes   int64
	// SnapshotRate limits outgoing snapshot bytes per second (32 MiB/s);
	// MaxSnapshotBytes refuses larger incoming snapshots (1 GiB).
	SnapshotRate     int64
	MaxSnapshotBytes int64
	// DisableLeaseReads makes every linearizable read take a ReadIndex
	// round trip.
	DisableLeaseReads bool
	// DisableQuiescence keeps idle ranges ticking and heartbeating
	// (docs/replication.md, "Quiescence").
	DisableQuiescence bool
}

func (c *Config) setDefaults() error {
	if c.DataDir == "" {
		return errors.New("node: Config.DataDir is required")
	}
	if c.Limits == (Limits{}) {
		c.Limits = DefaultLimits()
	}
	if err := c.Limits.Validate(); err != nil {
		return fmt.Errorf("node: Config.Limits: %w", err)
	}
	if c.HTTP.TLS && !c.Security.TLS.Enabled() {
		return errors.New("node: HTTP over TLS needs the node's TLS certificate (Security.TLS)")
	}
	if err := c.Security.validate(); err != nil {
		return err
	}
	c.Conn.setDefaults()
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.Sharding.setDefaults()
	if err := c.GC.setDefaults(); err != nil {
		return err
	}
	return nil
}
