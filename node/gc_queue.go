package node

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/rangesm"
)

// The GC queue (docs/versions.md, "Retention window and garbage
// collection"). Every GCOptions.Interval each node looks at the user
// ranges it leads. A range whose history holds anything to collect (more
// versions than live keys: older versions, or deletions) and whose GC
// threshold is more than an interval behind now - Retention gets a pass:
// GC commands, each raising the threshold to that target and collecting
// one chunk of the range, bounded by MaxDeletesPerCommand deletes and
// MaxKeysPerCommand keys looked at, one after the other, each starting
// where the last one stopped, until the range is done.
//
// Why this shape:
//   - The threshold is replicated and raised by the same command that
//     deletes, so every replica refuses reads below it before (or as) the
//     versions go (rangesm/gc.go).
//   - A GC command is applied in line with the range's writes, on every
//     replica; bounding its work bounds how long it holds the range's
//     writes up (a chunk of 1000 deletes and 10000 keys is a few
//     milliseconds), and one chunk at a time leaves the Raft log to the
//     foreground between chunks.
//   - Passes only when the threshold would move by more than an interval,
//     and only over ranges with something to collect, so an idle or
//     write-once range is not scanned again and again.
//   - A pass that completes remembers, for the range at its descriptor
//     generation, the lowest threshold at which a version it kept would
//     be collected (gcSkip); later passes skip the range until their
//     target reaches it. Without it, a range whose keys were all
//     overwritten within the window is scanned, every interval and on
//     every replica, only to collect nothing.
//   - Only leaders propose (a follower's proposal would be forwarded, and
//     several nodes would collect the same range).
//   - Protected timestamps (protect_server.go): a pass that has ranges to
//     collect first fetches the live protections from meta's leader, with
//     its target taken from a clock reading before the fetch, and keeps
//     every range's threshold below the timestamp of each protection
//     overlapping it. A pass that cannot fetch them collects nothing: a
//     GC that does not know the protections could collect what one holds.
//     docs/versions.md ("Protected timestamps") gives the argument that a
//     protection created after the fetch is above the target anyway.

// gcMetrics are the GC queue's metrics (docs/metrics.md).
type gcMetrics struct {
	versions prometheus.Counter // versions collected
	commands prometheus.Counter // GC commands applied
	failures prometheus.Counter // passes that stopped on an error
	lag      prometheus.Gauge   // the longest a range has waited for a pass
	skipped  prometheus.Counter // passes over a range skipped: nothing to collect yet

	protections     prometheus.Gauge // live protections, as of the last fetch
	protectedOldest prometheus.Gauge // age of the oldest protected timestamp
}

func newGCMetrics() gcMetrics {
	return gcMetrics{
		versions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shale_gc_versions_collected_total",
			Help: "Old versions and deletions removed by GC commands this node proposed as leader.",
		}),
		commands: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shale_gc_commands_total",
			Help: "GC commands (one chunk of a range each) this node proposed and saw applied.",
		}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shale_gc_pass_failures_total",
			Help: "GC passes over a range that stopped on an error (leadership lost, a frozen range, a timeout); the next interval tries again.",
		}),
		skipped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shale_gc_passes_skipped_total",
			Help: "GC passes over a range this node leads skipped because the range's last pass found nothing that becomes collectible by the pass's threshold.",
		}),
		lag: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "shale_gc_lag_seconds",
			Help: "The longest a user range this node leads has wanted a GC pass without one completing, as of the last pass (0: GC keeps up).",
		}),
		protections: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "shale_protected_timestamps",
			Help: "Live protected timestamps, as of this node's last GC pass that read them (the meta range's leader reads them every pass).",
		}),
		protectedOldest: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "shale_protected_timestamp_oldest_age_seconds",
			Help: "How old the oldest live protected timestamp was at this node's last GC pass that read them (0: none): the history GC is holding back.",
		}),
	}
}

// gcNow is the time GC targets are computed from: the node's clock.
func (n *Node) gcNow() hlc.Timestamp {
	return n.clock.Now()
}

// gcTarget is the threshold a pass at now raises ranges to.
func (n *Node) gcTarget(now hlc.Timestamp) hlc.Timestamp {
	t := hlc.Timestamp{WallTime: now.WallTime - n.cfg.GC.Retention.Nanoseconds()}
	if t.WallTime < 0 {
		return hlc.Timestamp{}
	}
	return t
}

// gcWanted reports whether a range in state st wants a GC pass at target:
// it has history to collect, and its threshold is more than step behind.
func gcWanted(st rangesm.MVCCState, target hlc.Timestamp, step time.Duration) bool {
	if st.Stats.Versions <= st.Stats.LiveKeys {
		return false // every version is a live key's newest: nothing to collect
	}
	return st.GCThreshold.Add(step).Less(target)
}

func (n *Node) gcLoop(ctx context.Context) {
	t := time.NewTicker(n.cfg.GC.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n.gcPass(ctx)
	}
}

// gcPass runs a GC pass over every user range this node leads that wants
// one; it returns the versions collected.
func (n *Node) gcPass(ctx context.Context) int {
	now := time.Now()
	if err := n.clockGuard.check(); err != nil {
		// A clock too far from its peers' could raise thresholds past
		// history that reads still need (docs/versions.md, "Clock
		// readings and the maximum offset").
		n.log.Debug("GC pass skipped: the clock may not serve", "err", err)
		return 0
	}
	// The clock reading is taken before the protections are fetched: the
	// safety argument needs it (docs/versions.md, "Protected timestamps").
	clockNow := n.gcNow()
	n.gcExpireProtections(ctx, clockNow)
	target := n.gcTarget(clockNow)
	if target.IsZero() {
		return 0
	}
	// The ranges that want a pass at the unprotected target (a protection
	// only lowers it).
	type candidate struct {
		id   uint64
		desc *kvpb.RangeDescriptor
		term uint64
	}
	var cands []candidate
	// What is still known: ranges led in the same term, at the same
	// generation.
	skips := map[uint64]gcSkip{}
	for _, r := range n.store.Replicas() {
		d := r.Descriptor()
		term, leader := r.Term()
		if d == nil || keys.IsMetaRange(d) || !leader {
			continue
		}
		sk, known := n.gcSkips[r.RangeID()]
		known = known && sk.generation == d.GetGeneration() && sk.term == term
		if known {
			skips[r.RangeID()] = sk
		}
		if !gcWanted(mvccState(r), target, n.cfg.GC.Interval) {
			continue
		}
		if known && target.Less(sk.until) {
			// A protection only lowers the target: nothing either.
			n.metrics.gc.skipped.Inc()
			continue
		}
		cands = append(cands, candidate{r.RangeID(), d, term})
	}
	n.gcSkips = skips
	if len(cands) == 0 {
		n.gcWaiting = map[uint64]time.Time{}
		n.metrics.gc.lag.Set(0)
		return 0
	}
	fctx, cancel := context.WithTimeout(ctx, gcFetchTimeout)
	recs, _, err := n.liveProtections(fctx)
	cancel()
	if err != nil {
		// Never collect without knowing the protections.
		n.metrics.gc.failures.Inc()
		n.log.Info("GC pass skipped: the protected timestamps could not be read", "err", err)
		waiting := map[uint64]time.Time{}
		var lag time.Duration
		for _, c := range cands {
			since, ok := n.gcWaiting[c.id]
			if !ok {
				since = now
			}
			waiting[c.id] = since
			lag = max(lag, time.Since(since))
		}
		n.gcWaiting = waiting
		n.metrics.gc.lag.Set(lag.Seconds())
		return 0
	}
	n.setProtectionMetrics(recs, clockNow)
	if n.gcIgnoresProtections() {
		recs = nil // the planted bug of a faults build (faults_on.go)
	}
	waiting := map[uint64]time.Time{}
	total := 0
	for _, c := range cands {
		r, err := n.store.Replica(c.id)
		if err != nil || !r.IsLeader() {
			continue
		}
		t := protectedTarget(target, c.desc, recs, clockNow.WallTime)
		if !gcWanted(mvccState(r), t, n.cfg.GC.Interval) {
			continue
		}
		id := c.id
		deleted, until, err := n.gcRange(ctx, id, t)
		total += deleted
		delete(n.gcSkips, id)
		if err == nil {
			n.gcSkips[id] = gcSkip{generation: c.desc.GetGeneration(), term: c.term, until: until}
		}
		if err != nil {
			since, ok := n.gcWaiting[id]
			if !ok {
				since = now
			}
			waiting[id] = since
			n.metrics.gc.failures.Inc()
			n.log.Info("GC pass stopped", "range", id, "threshold", t.String(), "collected", deleted, "err", err)
			continue
		}
		n.log.Debug("GC pass", "range", id, "threshold", t.String(), "collected", deleted)
	}
	var lag time.Duration
	for _, since := range waiting {
		lag = max(lag, time.Since(since))
	}
	n.gcWaiting = waiting
	n.metrics.gc.lag.Set(lag.Seconds())
	return total
}

// gcFetchTimeout bounds a pass's fetch of the protected timestamps.
const gcFetchTimeout = 10 * time.Second

// protectedTarget lowers target below the timestamp of every protection
// overlapping the range d that has not expired at wall time now.
func protectedTarget(target hlc.Timestamp, d *kvpb.RangeDescriptor, recs []rangesm.ProtectionRecord, now int64) hlc.Timestamp {
	for _, p := range recs {
		if p.ExpiredAt(now) || !p.Overlaps(d.GetStartKey(), d.GetEndKey()) {
			continue
		}
		if p.Timestamp.LessEq(target) {
			target = p.Timestamp.Prev()
		}
	}
	return target
}

// setProtectionMetrics publishes how many protections are live at now and
// how old the oldest protected timestamp is.
func (n *Node) setProtectionMetrics(recs []rangesm.ProtectionRecord, now hlc.Timestamp) {
	live, oldest := 0, time.Duration(0)
	for _, p := range recs {
		if p.ExpiredAt(now.WallTime) {
			continue
		}
		live++
		oldest = max(oldest, time.Duration(now.WallTime-p.Timestamp.WallTime))
	}
	n.metrics.gc.protections.Set(float64(live))
	n.metrics.gc.protectedOldest.Set(oldest.Seconds())
}

// gcExpireProtections, on meta's leader, removes the protections that
// have expired by now: each with a release that applies only if the
// record was not refreshed past now meanwhile. It reads its own copy of
// meta first, so an idle cluster without protections does no work.
func (n *Node) gcExpireProtections(ctx context.Context, now hlc.Timestamp) {
	r, err := n.store.Replica(keys.MetaRangeID)
	if err != nil || !r.IsLeader() {
		return
	}
	recs, err := rangesm.ReadProtections(n.db)
	if err != nil {
		n.log.Info("reading the protected timestamps", "err", err)
		return
	}
	n.setProtectionMetrics(recs, now)
	for _, p := range recs {
		if !p.ExpiredAt(now.WallTime) {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, gcCommandTimeout)
		res, _, err := n.store.Propose(pctx, keys.MetaRangeID, &command.Command{Kind: command.KindRelease,
			Protect: command.Protect{ID: p.ID, ExpiredBy: now.WallTime}})
		cancel()
		if err == nil {
			err = res.Err()
		}
		if err != nil && command.RejectionCode(err) != command.CodeProtectionNotFound {
			n.log.Info("removing an expired protection", "id", p.ID, "err", err)
			return
		}
		if res.Found {
			n.log.Info("expired protection removed", "id", p.ID, "timestamp", p.Timestamp.String(), "description", p.Description)
		}
	}
}

// gcCommandTimeout bounds one GC command's proposal.
const gcCommandTimeout = 30 * time.Second

// gcSkip is what a completed pass over a range leaves for the next ones:
// no pass at a target below until collects anything from the range at
// descriptor generation (a split or merge changes what it holds), while
// this node leads it in term.
type gcSkip struct {
	generation uint64
	term       uint64
	until      hlc.Timestamp
}

// gcRange raises range id's GC threshold to target and collects its
// history below it, chunk by chunk; it returns the versions deleted and,
// when it completes, the lowest target at which a later pass could
// collect anything.
//
// That is the lowest of the chunks' Collectible (the versions they kept)
// and of the range's frontier and feed frontier read before the first
// chunk. A version superseded after its key's chunk was scanned has a
// successor that is a write, applied above the frontier of the moment
// (itself at or above the one read here), or a transaction's version at
// its commit timestamp, at or above its intent's provisional version,
// which is above the feed frontier read here if the intent existed then
// and above the frontier of its write if not. Either way it is never
// below the minimum returned, so a pass below it collects nothing
// (raising the threshold alone gains nothing either: it only refuses
// reads).
func (n *Node) gcRange(ctx context.Context, id uint64, target hlc.Timestamp) (int, hlc.Timestamp, error) {
	o := &n.cfg.GC
	deleted := 0
	r, err := n.store.Replica(id)
	if err != nil {
		return 0, hlc.Timestamp{}, err
	}
	st := mvccState(r)
	until := st.Frontier.Backward(st.FeedFrontier)
	var start []byte
	for {
		if ctx.Err() != nil {
			return deleted, hlc.Timestamp{}, ctx.Err()
		}
		cmd := &command.Command{Kind: command.KindGC, GC: command.GC{
			Threshold:  target,
			Start:      start,
			MaxDeletes: uint64(o.MaxDeletesPerCommand),
			MaxKeys:    uint64(o.MaxKeysPerCommand),
		}}
		pctx, cancel := context.WithTimeout(ctx, gcCommandTimeout)
		res, _, err := n.store.Propose(pctx, id, cmd)
		cancel()
		if err == nil {
			err = res.Err()
		}
		if err != nil {
			return deleted, hlc.Timestamp{}, err
		}
		n.metrics.gc.commands.Inc()
		n.metrics.gc.versions.Add(float64(res.NodeID))
		deleted += int(res.NodeID)
		if c := res.Version; !c.IsZero() {
			until = until.Backward(c)
		}
		if !res.Found {
			return deleted, until, nil
		}
		start = append([]byte{}, res.Value...)
		if r, err := n.store.Replica(id); err != nil || !r.IsLeader() {
			return deleted, hlc.Timestamp{}, errors.New("no longer the range's leader")
		}
	}
}
