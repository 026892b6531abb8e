package node

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/tso"
)

// The node's clock and its guard (docs/versions.md, "Clock readings and
// the maximum offset").
//
// Every node keeps an hlc.Clock over its physical clock. The guard
// decides whether that clock may serve: not while the offset monitor
// finds it beyond 80% of the maximum offset from a majority of its peers
// (measured on the liveness probes every node sends every other, see
// liveness.go), nor for refusalHold after the clock refused a reading
// (an oracle reply, a peer's timestamp) for being too far ahead. While it
// may not, the node serves nothing that needs a timestamp (Unavailable +
// ClockOffset), does not serve as the timestamp oracle, hands the meta
// range's leadership to another node, and says so at error level and in
// shale_clock_offset_exceeded. It resumes by itself.

// ClockOptions configures the node's clock.
type ClockOptions struct {
	// MaxOffset is the maximum clock offset tolerated between nodes
	// (0: hlc.DefaultMaxOffset, 500 ms). Every node of a cluster must use
	// the same value.
	MaxOffset time.Duration
	// TestingOffset shifts this node's clock by the given amount (either
	// sign). FOR TESTS ONLY: it makes one real node's clock wrong, to
	// check that the node stops serving beyond the maximum offset (the
	// fault suite's clock-skew nemesis). Never set it in production.
	TestingOffset time.Duration
}

// offsetClock is the machine's clock shifted by a fixed amount (the
// test-only ClockOptions.TestingOffset; 0 in production).
type offsetClock struct{ offset atomic.Int64 }

func (c *offsetClock) Now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

// wallAt is what hlc.Clock.PhysicalNow over c returns when the machine's
// clock reads t: one reading of the machine's clock can then serve as
// both the monotonic and the physical reading (a reading costs about
// 0.3 µs on a virtual machine's clock source, and every request that
// needs a timestamp passes the guard's check).
func (c *offsetClock) wallAt(t time.Time) int64 {
	return max(t.Add(time.Duration(c.offset.Load())).UnixNano(), 0)
}

// clockHeader is the gRPC response header in which a node answers a
// liveness probe with its physical clock reading (Unix nanoseconds).
const clockHeader = "shale-clock-nanos"

// healthCheckMethod is the liveness probe's method.
const healthCheckMethod = "/grpc.health.v1.Health/Check"

// offsetTTL is how long a peer's offset measurement counts: a few probe
// intervals, so that a peer that stops answering stops counting.
const offsetTTL = 5 * probeInterval

// refusalHold is how long a refused reading keeps the clock from
// serving: until the next probes have measured the peers again.
const refusalHold = 2 * probeInterval

// clockGuard decides whether the node's clock may serve.
type clockGuard struct {
	n       *Node
	monitor *hlc.OffsetMonitor

	refusals atomic.Uint64
	// exceeded is the verdict of the last evaluation (the gauge).
	exceeded atomic.Bool

	mu          sync.Mutex
	refusedAt   time.Time // the last refusal (monotonic)
	lastRefused *hlc.OffsetError
	// The last look at the clock, for noticing steps: the physical
	// clock's reading and the monotonic time it was read at.
	lookedWall int64
	lookedAt   time.Time
	// The last step noticed: how far, and when (monotonic).
	step   time.Duration
	stepAt time.Time
}

func newClockGuard(n *Node) *clockGuard {
	return &clockGuard{n: n, monitor: hlc.NewOffsetMonitor(n.clock.MaxOffset(), offsetTTL)}
}

// clockOffsetError is why the clock may not serve.
type clockOffsetError struct {
	offset, max time.Duration
	why         string
}

func (e *clockOffsetError) Error() string {
	return fmt.Sprintf("%v: %s (offset %v, maximum %v)", hlc.ErrClockOffset, e.why, e.offset, e.max)
}

func (e *clockOffsetError) Unwrap() error { return hlc.ErrClockOffset }

// check returns nil if the clock may serve now, or a *clockOffsetError.
func (g *clockGuard) check() error {
	max := g.n.clock.MaxOffset()
	// One reading: the monotonic and wall parts of now are read together,
	// so a step shows as their drift and nothing else does.
	now := time.Now()
	wall := g.n.physClock.wallAt(now)
	g.mu.Lock()
	g.noteStepLocked(now, wall, max)
	refusedAt, oe := g.refusedAt, g.lastRefused
	step, stepAt := g.step, g.stepAt
	g.mu.Unlock()
	if oe != nil && now.Sub(refusedAt) < refusalHold {
		return &clockOffsetError{offset: -oe.Offset(), max: max,
			why: fmt.Sprintf("this node's clock refused a reading %v ahead of it", oe.Offset())}
	}
	if step != 0 && now.Sub(stepAt) < refusalHold {
		return &clockOffsetError{offset: step, max: max,
			why: fmt.Sprintf("this node's clock stepped by %v; waiting for its peers to measure it again", step)}
	}
	st := g.monitor.Status(wall)
	if !st.Healthy() {
		return &clockOffsetError{offset: -st.Median, max: max,
			why: fmt.Sprintf("%d of %d peers measure this node's clock beyond %v of theirs", st.Beyond, st.Fresh, time.Duration(float64(max)*hlc.ToleratedFraction))}
	}
	return nil
}

// noteStepLocked notices a step of the physical clock since the last look:
// its wall reading moved farther from the monotonic clock than the
// tolerated offset. An oracle whose clock jumped ahead would otherwise
// issue timestamps from the future until the next probes measured it (up
// to a probe interval): every node would refuse them. A step in either
// direction keeps the clock from serving for the refusal hold, after
// which the offset monitor, with fresh measurements, decides.
// REQUIRES: g.mu.
func (g *clockGuard) noteStepLocked(now time.Time, wall int64, max time.Duration) {
	if !g.lookedAt.IsZero() {
		drift := time.Duration(wall-g.lookedWall) - now.Sub(g.lookedAt)
		if drift > time.Duration(float64(max)*hlc.ToleratedFraction) || -drift > time.Duration(float64(max)*hlc.ToleratedFraction) {
			g.step, g.stepAt = drift, now
		}
	}
	g.lookedWall, g.lookedAt = wall, now
}

// checkCounted is check, counting a refusal (a request refused).
func (g *clockGuard) checkCounted() error {
	err := g.check()
	if err != nil {
		g.refusals.Add(1)
	}
	return err
}

// refused records a reading the clock refused.
func (g *clockGuard) refused(oe *hlc.OffsetError) {
	g.refusals.Add(1)
	g.mu.Lock()
	g.refusedAt, g.lastRefused = time.Now(), oe
	g.mu.Unlock()
}

// update moves the clock forward to a reading received from another node;
// a refused reading is recorded and returned (an error wrapping
// hlc.ErrClockOffset).
func (g *clockGuard) update(ts hlc.Timestamp) error {
	err := g.n.clock.Update(ts)
	if err == nil {
		// Before oe: errors.As's pointer moves it to the heap, and every
		// applied version passes here.
		return nil
	}
	var oe *hlc.OffsetError
	if errors.As(err, &oe) {
		g.refused(oe)
	}
	return err
}

// loop re-evaluates the clock every interval: it logs each change of
// verdict and, while the clock may not serve, hands the meta range's
// leadership to another voter (the oracle moves with it).
func (g *clockGuard) loop(ctx context.Context) {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := g.check()
		was := g.exceeded.Swap(err != nil)
		switch {
		case err != nil && !was:
			g.n.log.Error("clock offset: this node stops serving requests that need a timestamp, and gives up the timestamp oracle", "err", err)
		case err == nil && was:
			g.n.log.Info("clock offset: this node's clock is within bounds again; serving resumes")
		}
		if err != nil {
			g.giveUpMeta(ctx)
		}
	}
}

// giveUpMeta moves the meta range's leadership off this node, if it
// holds it, to another voter that answers probes.
func (g *clockGuard) giveUpMeta(ctx context.Context) {
	r, err := g.n.store.Replica(keys.MetaRangeID)
	if err != nil || !r.IsLeader() {
		return
	}
	for _, rd := range r.Descriptor().GetReplicas() {
		id := rd.GetNodeId()
		if id == g.n.ident.NodeID || rd.GetType() != kvpb.ReplicaType_REPLICA_TYPE_VOTER ||
			time.Since(g.n.lastSeen(id)) > 2*probeInterval+time.Second {
			continue
		}
		tctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := g.n.store.TransferLeader(tctx, keys.MetaRangeID, id)
		cancel()
		if err == nil {
			g.n.log.Warn("clock offset: handed the meta range (and the timestamp oracle) to another node", "to", id)
			return
		}
	}
}

// clockHeaderInterceptor answers a liveness probe with this node's
// physical clock, for the prober's offset monitor.
func (n *Node) clockHeaderInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if info.FullMethod == healthCheckMethod {
		// Fails only outside a gRPC stream (a multiplexed call): no
		// probe arrives that way.
		_ = grpc.SetHeader(ctx, metadata.Pairs(clockHeader, strconv.FormatInt(n.clock.PhysicalNow(), 10)))
	}
	return handler(ctx, req)
}

// recordProbeOffset records a peer's offset from one probe: sent and
// received are this node's physical readings around it, hdr the probe's
// response header.
func (n *Node) recordProbeOffset(peer uint64, sent, received int64, hdr metadata.MD) {
	v := hdr.Get(clockHeader)
	if len(v) == 0 {
		return
	}
	remote, err := strconv.ParseInt(v[0], 10, 64)
	if err != nil {
		return
	}
	n.clockGuard.monitor.Record(peer, hlc.MeasureOffset(sent, remote, received))
}

// clockOffsetStatus is the status of a request refused for the clock:
// Unavailable (not applied; another node can serve it) with a ClockOffset
// detail.
func (n *Node) clockOffsetStatus(op string, err error) error {
	d := &kvpb.ClockOffset{NodeId: n.ident.NodeID, MaxOffsetNanos: int64(n.clock.MaxOffset())}
	var ce *clockOffsetError
	var oe *hlc.OffsetError
	switch {
	case errors.As(err, &ce):
		d.OffsetNanos = int64(ce.offset)
	case errors.As(err, &oe):
		d.OffsetNanos = int64(oe.Offset())
	}
	st := status.Newf(codes.Unavailable, "%s: node %d: %v; not applied, another node can serve it", op, n.ident.NodeID, err)
	return withDetails(st, d)
}

// checkClock refuses a request that needs a timestamp while the clock may
// not serve (Unavailable + ClockOffset), counting the refusal.
func (n *Node) checkClock(op string) error {
	if err := n.clockGuard.checkCounted(); err != nil {
		return n.clockOffsetStatus(op, err)
	}
	return nil
}

// initClock creates the node's clock, its guard, the oracle and the
// oracle client.
func (n *Node) initClock() {
	phys := &offsetClock{}
	phys.offset.Store(int64(n.cfg.Clock.TestingOffset))
	n.physClock = phys
	if n.cfg.Clock.TestingOffset != 0 {
		n.log.Warn("TESTING: this node's clock is shifted (--testing-clock-offset); never do this in production", "offset", n.cfg.Clock.TestingOffset)
	}
	maxOffset := n.cfg.Clock.MaxOffset
	if maxOffset <= 0 {
		maxOffset = hlc.DefaultMaxOffset
	}
	n.clock = hlc.NewClock(phys, maxOffset)
	n.clockGuard = newClockGuard(n)
	n.oracle = tso.NewOracle(tso.Config{
		Clock:   n.clock,
		Meta:    oracleMeta{n: n},
		Healthy: n.clockGuard.checkCounted,
		Refused: n.clockGuard.refused,
	})
	n.tsoClient = tso.NewClient(&oracleTransport{n: n}, n.clock, n.clockGuard.refused)
}

// clockCollector exports the clock guard's verdict and the oracle
// client's calls, read at scrape time.
type clockCollector struct{ n *Node }

var (
	clockExceeded = prometheus.NewDesc("shale_clock_offset_exceeded",
		"1 while this node's clock is beyond the maximum offset (it serves nothing that needs a timestamp), else 0.", nil, nil)
	clockRefusals = prometheus.NewDesc("shale_clock_offset_refusals_total",
		"Clock readings this node's clock refused as too far ahead, and requests it refused because its clock is beyond the maximum offset.", nil, nil)
	tsoCalls = prometheus.NewDesc("shale_tso_calls_total",
		"Calls this node made to the timestamp oracle, by kind (timestamps: one per batch of waiting requests; observe).", []string{"kind"}, nil)
)

func (c *clockCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- clockExceeded
	ch <- clockRefusals
	ch <- tsoCalls
}

func (c *clockCollector) Collect(ch chan<- prometheus.Metric) {
	var exceeded float64
	if c.n.clockGuard.check() != nil {
		exceeded = 1
	}
	ch <- prometheus.MustNewConstMetric(clockExceeded, prometheus.GaugeValue, exceeded)
	ch <- prometheus.MustNewConstMetric(clockRefusals, prometheus.CounterValue, float64(c.n.clockGuard.refusals.Load()))
	ts, obs := c.n.tsoClient.Calls()
	ch <- prometheus.MustNewConstMetric(tsoCalls, prometheus.CounterValue, float64(ts), "timestamps")
	ch <- prometheus.MustNewConstMetric(tsoCalls, prometheus.CounterValue, float64(obs), "observe")
}
