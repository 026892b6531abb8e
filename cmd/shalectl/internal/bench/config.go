package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Config describes one run. Zero fields take the defaults of
// (*Config).withDefaults, which match the flags of `shalectl bench`.
type Config struct {
	// Workload is one of Workloads.
	Workload string
	// Clients is the number of concurrent workers, each with one request
	// in flight (16).
	Clients int
	// Conns is the number of connections the workers share, round robin
	// (Clients/16, at least 1): like etcd's benchmark --conns.
	Conns int
	// Duration is how long the timed phase runs (10s).
	Duration time.Duration
	// KeySize and ValueSize are the sizes of keys and values in bytes (16,
	// 100). Keys are decimal indexes zero-padded to KeySize, so that their
	// byte order is their numeric order.
	KeySize, ValueSize int
	// Keys is the key space: indexes 0..Keys-1 (100,000).
	Keys int64
	// BatchSize is the keys per BatchGet of multiget and the entries per
	// Scan of readseq (32).
	BatchSize int
	// Stale makes reads bounded-stale (follower reads, served by any
	// replica at a timestamp at most StaleBound old) instead of
	// linearizable.
	Stale bool
	// Load writes every key of the key space before the timed phase, so
	// that reads find data. Workloads that only make sense on loaded data
	// (dirwalk) load what they need regardless.
	Load bool
	// DirFanout and DirDepth shape the directory tree of dirwalk (10, 4).
	DirFanout, DirDepth int
	// OpTimeout bounds each request (10s).
	OpTimeout time.Duration
	// Seed makes the random choices reproducible (0: from the clock).
	Seed uint64
	// Progress receives one line per second during the timed phase (nil:
	// none).
	Progress io.Writer
	// Label names the system in the report (Report.Label), e.g. "etcd 3.7"
	// when two versions of one system are compared ("": none).
	Label string
	// Watch, if set, names the servers whose CPU time and written bytes
	// the report gives for the timed phase (Report.Server).
	Watch *Watch

	// leases are the leases workload's, granted before the timed phase.
	leases *leaseState
}

// Workloads lists the workloads and what each does.
var Workloads = map[string]string{
	"put":              "random-key puts over the key space",
	"fillseq":          "puts of keys 0, 1, 2, ... in order (shared by all clients)",
	"get":              "random-key gets (linearizable; --stale for stale)",
	"readrandom":       "same as get (db_bench's name)",
	"ycsb-a":           "YCSB A: 50% reads, 50% updates, zipfian keys",
	"ycsb-b":           "YCSB B: 95% reads, 5% updates, zipfian keys",
	"readwhilewriting": "clients-1 random readers beside one random writer (db_bench)",
	"readseq":          "scans of batch-size entries from random keys, in key order",
	"multiget":         "BatchGets of batch-size random keys",
	"dirwalk":          "walks of a directory tree: dir-depth dependent gets (seeds/002)",
	"leases":           "keys live leases (TTL 10s), each kept alive every third of its TTL; see --server-pids",
}

// WorkloadNames returns the workload names, sorted.
func WorkloadNames() []string {
	names := make([]string, 0, len(Workloads))
	for n := range Workloads {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func (c Config) withDefaults() Config {
	if c.Clients == 0 {
		c.Clients = 16
	}
	if c.Conns == 0 {
		c.Conns = max(1, c.Clients/16)
	}
	if c.Duration == 0 {
		c.Duration = 10 * time.Second
	}
	if c.KeySize == 0 {
		c.KeySize = 16
	}
	if c.ValueSize == 0 {
		c.ValueSize = 100
	}
	if c.Keys == 0 {
		c.Keys = 100_000
	}
	if c.BatchSize == 0 {
		c.BatchSize = 32
	}
	if c.DirFanout == 0 {
		c.DirFanout = 10
	}
	if c.DirDepth == 0 {
		c.DirDepth = 4
	}
	if c.OpTimeout == 0 {
		c.OpTimeout = 10 * time.Second
	}
	return c
}

// validate reports the first bad setting of a defaulted Config.
func (c Config) validate() error {
	if _, ok := Workloads[c.Workload]; !ok {
		return fmt.Errorf("unknown workload %q (want one of %s)", c.Workload, strings.Join(WorkloadNames(), ", "))
	}
	switch {
	case c.Clients < 1:
		return fmt.Errorf("--clients %d: need at least 1", c.Clients)
	case c.Conns < 1 || c.Conns > c.Clients:
		return fmt.Errorf("--conns %d: need 1..clients (%d)", c.Conns, c.Clients)
	case c.Duration <= 0:
		return fmt.Errorf("--duration %v: need a positive duration", c.Duration)
	case c.ValueSize < 0:
		return fmt.Errorf("--value-size %d is negative", c.ValueSize)
	case c.Keys < 1:
		return fmt.Errorf("--keys %d: need at least 1", c.Keys)
	case c.BatchSize < 1 || c.BatchSize > 128:
		// 128 is etcd's default limit of operations per transaction.
		return fmt.Errorf("--batch-size %d: need 1..128", c.BatchSize)
	case c.DirFanout < 1 || c.DirDepth < 1:
		return fmt.Errorf("--dir-fanout %d, --dir-depth %d: need at least 1 each", c.DirFanout, c.DirDepth)
	case c.OpTimeout <= 0:
		return fmt.Errorf("--op-timeout %v: need a positive duration", c.OpTimeout)
	}
	if need := len(fmt.Sprint(c.Keys - 1)); c.KeySize < need {
		return fmt.Errorf("--key-size %d cannot hold %d keys: need at least %d bytes", c.KeySize, c.Keys, need)
	}
	if c.Workload == "readwhilewriting" && c.Clients < 2 {
		return fmt.Errorf("readwhilewriting needs at least 2 clients (one writer, the rest readers)")
	}
	if c.Workload == "dirwalk" {
		dirs := int64(0)
		level := int64(1)
		for range c.DirDepth {
			level *= int64(c.DirFanout)
			dirs += level
			if dirs > 10_000_000 {
				return fmt.Errorf("--dir-fanout %d --dir-depth %d make over 10 million directories", c.DirFanout, c.DirDepth)
			}
		}
	}
	return nil
}

// StaleBound is the staleness bound of stale reads: well above the
// closed-timestamp lag (docs/versions.md), so that followers serve them.
const StaleBound = 10 * time.Second
