package node

import (
	"context"
	"fmt"
	"math"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/semaphore"

	"github.com/shaledb/shale/command"
)

// The node's memory budget (docs/operations.md, "Memory").
//
// A node is given one figure, Config.MemoryBudgetBytes (--memory-budget;
// default: GOMEMLIMIT when set, else DefaultMemoryBudget), for the memory
// of its Go process. The engine's memtables and block cache are C memory
// outside it, sized by their own flags. When GOMEMLIMIT is not set, the
// budget becomes the Go runtime's soft memory limit, so that the collector
// works to it.
//
// The part that grows with load is the client writes in flight. Every
// byte of a write is held several times between its arrival and its
// apply: the request, the encoded command, the Raft entry in the unstable
// log and in the appends to each follower, the log writer's batch and the
// apply batch. Without a bound, a flood of large values piles these up
// until the node is out of memory, and the writes that did get in time
// out as "outcome unknown". So a write must be admitted before it is
// proposed: it takes its payload's bytes from a node-wide allowance of
// an eighth of the budget (writeInflightShare), and gives them back once
// it has applied or failed. A write that finds the allowance taken waits,
// which slows its client, for at most half of the time left before its
// deadline. If it still does not fit, it fails with a definite
// Unavailable that asks the client to retry a little later; nothing was
// proposed. The largest write the limits allow always fits alone.
//
// Incoming snapshots, staged in memory until applied, may hold a quarter
// of the budget together (raft/snapshot_memory.go); a receiver over it
// stops reading and its sender waits.
//
// The Raft entry caches of all the node's replicas (recent log entries
// kept for followers and applies; 16 MiB each) share a sixteenth of the
// budget (raft.Config.EntryCacheNodeBytes, logstore.CacheBudget): a
// cache that grows while they hold more drops its own oldest entries,
// which are then read from the engine when needed. Idle replicas keep
// what they hold until they next append or truncate, so the caches may
// stay over the share by what those hold until then.
//
// Not covered (bounded elsewhere or not at all): the requests gRPC has
// read but not yet handed to a handler (bounded by the clients'
// concurrency and --max-write-bytes), the appends queued for followers
// (bounded per range and follower by Raft's in-flight window: 256
// messages of up to 1 MiB), reads and scans, and the engine's C memory.

// DefaultMemoryBudget is the budget of a node started without GOMEMLIMIT
// or --memory-budget.
const DefaultMemoryBudget = 2 << 30

// snapshotMemoryShare is the share of the budget that incoming
// snapshots, staged in memory until applied, may hold together
// (raft.Config.SnapshotMemoryBytes); one larger goes on alone.
const snapshotMemoryShare = 4

// entryCacheShare is the share of the budget the Raft entry caches of
// all the node's replicas may hold together.
const entryCacheShare = 16

// writeInflightShare is the share of the budget that client writes in
// flight may hold (their payload, counted once; the copies make up the
// rest).
const writeInflightShare = 8

// minWriteInflight is the smallest allowance for writes in flight.
const minWriteInflight = 8 << 20

// writeBudget admits client writes against the allowance.
type writeBudget struct {
	budget   int64 // the node's memory budget
	limit    int64 // the allowance for writes in flight
	sem      *semaphore.Weighted
	inflight atomic.Int64
	waits    prometheus.Counter
	refused  prometheus.Counter
}

// memoryBudget is the node's budget in bytes (see above).
func (c *Config) memoryBudget() int64 {
	if c.MemoryBudgetBytes > 0 {
		return c.MemoryBudgetBytes
	}
	if lim := debug.SetMemoryLimit(-1); lim > 0 && lim < math.MaxInt64 {
		return lim
	}
	return DefaultMemoryBudget
}

// newWriteBudget sizes the allowance for a budget; maxWrite is the
// largest write the limits admit.
func newWriteBudget(budget int64, maxWrite int) *writeBudget {
	limit := max(budget/writeInflightShare, minWriteInflight, int64(maxWrite)+1024)
	return &writeBudget{
		budget: budget,
		limit:  limit,
		sem:    semaphore.NewWeighted(limit),
		waits: prometheus.NewCounter(prometheus.CounterOpts{Name: "shale_write_admission_waits_total",
			Help: "Client writes that waited for the memory allowance of writes in flight before being proposed."}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{Name: "shale_write_admission_refused_total",
			Help: "Client writes refused (Unavailable, not applied) because the memory allowance of writes in flight stayed full."}),
	}
}

// applyMemoryLimit makes the budget the Go runtime's soft limit unless
// GOMEMLIMIT set one.
func applyMemoryLimit(budget int64) {
	if lim := debug.SetMemoryLimit(-1); lim == math.MaxInt64 {
		debug.SetMemoryLimit(budget)
	}
}

// writeWeight is what a command holds of the allowance: its keys and
// values, plus a little for the rest of it.
func writeWeight(cmd *command.Command) int64 {
	n := 64 + len(cmd.CAS.Key) + len(cmd.CAS.Expected) + len(cmd.CAS.NewValue)
	for _, m := range cmd.Mutations {
		n += 16 + len(m.Key) + len(m.Value)
	}
	return int64(n)
}

// admitWrite takes cmd's weight from the allowance, waiting for at most
// half of the time left before ctx's deadline, and returns the function
// that gives it back. The error is a status for the client.
func (n *Node) admitWrite(ctx context.Context, op string, cmd *command.Command) (func(), error) {
	b := n.writes
	w := min(writeWeight(cmd), b.limit)
	if !b.sem.TryAcquire(w) {
		b.waits.Inc()
		wctx, cancel := ctx, context.CancelFunc(func() {})
		if dl, ok := ctx.Deadline(); ok {
			wctx, cancel = context.WithTimeout(ctx, time.Until(dl)/2)
		}
		err := b.sem.Acquire(wctx, w)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil, writeError(op, ctx.Err())
			}
			b.refused.Inc()
			return nil, unavailable(200*time.Millisecond,
				"%s: node %d: the writes in flight hold its memory allowance for them (%d of %d MiB, an eighth of --memory-budget %d MiB); the write was not applied",
				op, n.ident.NodeID, b.inflight.Load()>>20, b.limit>>20, b.budget>>20)
		}
	}
	b.inflight.Add(w)
	return func() {
		b.inflight.Add(-w)
		b.sem.Release(w)
	}, nil
}

// memoryCollector exports the budget and the writes in flight.
type memoryCollector struct{ n *Node }

var (
	memBudgetDesc     = prometheus.NewDesc("shale_memory_budget_bytes", "The node's memory budget for its Go process (--memory-budget, or GOMEMLIMIT).", nil, nil)
	writeLimitDesc    = prometheus.NewDesc("shale_write_inflight_limit_bytes", "The allowance of client write bytes in flight (admitted, not yet applied): an eighth of the memory budget.", nil, nil)
	writeInflightDesc = prometheus.NewDesc("shale_write_inflight_bytes", "Client write bytes admitted and not yet applied or failed.", nil, nil)
)

func (c *memoryCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- memBudgetDesc
	ch <- writeLimitDesc
	ch <- writeInflightDesc
	c.n.writes.waits.Describe(ch)
	c.n.writes.refused.Describe(ch)
}

func (c *memoryCollector) Collect(ch chan<- prometheus.Metric) {
	b := c.n.writes
	ch <- prometheus.MustNewConstMetric(memBudgetDesc, prometheus.GaugeValue, float64(b.budget))
	ch <- prometheus.MustNewConstMetric(writeLimitDesc, prometheus.GaugeValue, float64(b.limit))
	ch <- prometheus.MustNewConstMetric(writeInflightDesc, prometheus.GaugeValue, float64(b.inflight.Load()))
	b.waits.Collect(ch)
	b.refused.Collect(ch)
}

// String describes the budget for the startup log.
func (b *writeBudget) String() string {
	return fmt.Sprintf("memory budget %d MiB, writes in flight up to %d MiB", b.budget>>20, b.limit>>20)
}
