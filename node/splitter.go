package node

import (
	"bytes"
	"context"
	"log/slog"
	"time"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/raft"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/storage"
)

// Automatic splits (docs/sharding.md, "Automatic splits"). Every
// SplitCheckInterval each node looks at the user ranges it leads:
//
//   - by size: a range whose approximate size (the engine's estimate
//     from its files, so data still in the memtable is not counted yet)
//     exceeds SplitSizeBytes splits at its middle key by key count;
//   - by load: a range that served more than SplitQPS requests per second
//     over the last window, and more than loadSplitShare times its fair
//     share of this node's load, splits at the median of its sampled
//     request keys, which divides its traffic in two, if the host of one
//     of its voters had CPU to spare (below).
//
// The fair share is the QPS of the user ranges this node leads divided by
// their number. A split helps when one range carries more than the others
// (the halves can be led from different nodes); under a uniform load every
// range carries its fair share, and splitting again only multiplies the
// ranges, each of which costs its own Raft proposals, messages and log and
// apply batches per round for the same traffic. A node leading a single
// range splits it once it passes SplitQPS, which spreads its load to the
// other nodes.
//
// A split by load is for spreading work over more CPUs: its halves can be
// led from different nodes (placement balances leaders), and even on one
// node they are processed by different workers of a round. That needs a
// CPU with time to spare. When the hosts of all the range's voters were
// busier than SplitHostCPU over the last window (cpu.go), nothing can take
// the work, and a split only adds a Raft group whose proposals, messages
// and log and apply batches are paid for from the same saturated CPUs:
// every write then costs more and throughput falls. So a load split waits
// until some voter's host has CPU to spare, which a node added to a
// saturated cluster provides once it holds replicas. (TiKV and CockroachDB
// also weigh CPU, not request rates alone, in their load-based splitting.)
// Size splits do not wait: they bound a range's size, not its load.
//
// A split copies no data (raft/split.go), so checking often is cheap.

func (n *Node) splitLoop(ctx context.Context) {
	o := &n.cfg.Sharding
	t := time.NewTicker(o.SplitCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n.splitPass(ctx)
	}
}

// loadSplitShare is how far above its fair share of the node's load a
// range must be to split by load (see above).
const loadSplitShare = 1.25

// rangeWindow is one led user range's finished load window.
type rangeWindow struct {
	r      *raft.Replica
	d      *kvpb.RangeDescriptor
	qps    float64
	sample [][]byte
}

// splitPass checks every user range this node leads once; it returns the
// number of splits made.
func (n *Node) splitPass(ctx context.Context) int {
	o := &n.cfg.Sharding
	now := time.Now()
	var led []rangeWindow
	total := 0.0
	for _, r := range n.store.Replicas() {
		d := r.Descriptor()
		if d == nil || keys.IsMetaRange(d) {
			continue
		}
		qps, sample := n.load.roll(r.RangeID(), now)
		if o.DisableAutoSplit || !r.IsLeader() {
			continue
		}
		led = append(led, rangeWindow{r: r, d: d, qps: qps, sample: sample})
		total += qps
	}
	splits := 0
	cpus := map[uint64]*kvpb.NodeCPU{} // this pass's answers, by node
	held := map[uint64]bool{}
	for _, w := range led {
		r, d := w.r, w.d
		var key []byte
		reason := ""
		if n.loadSplitWanted(w.qps, total, len(led)) && len(w.sample) >= 8 {
			if id, busy, ok := n.spareCPU(ctx, d, cpus); ok {
				key, reason = w.sample[len(w.sample)/2], "load"
				n.log.Debug("load split: a voter's host has CPU to spare", "range", r.RangeID(), "node", id, "host_busy", busy)
			} else {
				n.metrics.loadSplitsHeld.Inc()
				held[r.RangeID()] = true
				// Logged when a range starts waiting, not at every check
				// of a cluster that stays saturated (the counter counts
				// every check).
				lvl := slog.LevelInfo
				if n.heldSplits[r.RangeID()] {
					lvl = slog.LevelDebug
				}
				n.log.Log(ctx, lvl, "load split held back: every voter's host is busy", "range", r.RangeID(),
					"qps", w.qps, "split_host_cpu", o.SplitHostCPU)
			}
		}
		if key == nil {
			sp := keys.DataSpan(d)
			if size, nkeys, err := n.db.ApproximateSize(sp.Start, sp.End); err == nil && size > o.SplitSizeBytes {
				key, reason = n.middleKey(sp, nkeys), "size"
			}
		}
		if key == nil || bytes.Compare(key, d.GetStartKey()) <= 0 || !keys.ContainsUserKey(d, key) {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, right, err := n.store.Split(sctx, r.RangeID(), key)
		cancel()
		if err != nil {
			n.log.Info("automatic split failed", "range", r.RangeID(), "reason", reason, "err", err)
			continue
		}
		n.log.Info("automatic split", "range", r.RangeID(), "right", right.GetRangeId(), "reason", reason, "qps", w.qps)
		splits++
	}
	n.heldSplits = held
	return splits
}

// loadSplitWanted reports whether a range serving qps should split by
// load, on a node whose led user ranges, nLed of them, serve total.
func (n *Node) loadSplitWanted(qps, total float64, nLed int) bool {
	o := &n.cfg.Sharding
	if o.SplitQPS <= 0 || qps <= o.SplitQPS {
		return false
	}
	return nLed <= 1 || qps > loadSplitShare*total/float64(nLed)
}

// spareCPU reports whether the host of one of d's voters, this node's
// included, was busy less than SplitHostCPU of its CPU time over the last
// window, with the first such node and its host's use. Always true when
// SplitHostCPU is 1 or more (or negative). Peers are asked once per pass
// (cpus caches their answers); a peer that does not answer, or cannot
// measure its CPU, counts as busy.
func (n *Node) spareCPU(ctx context.Context, d *kvpb.RangeDescriptor, cpus map[uint64]*kvpb.NodeCPU) (uint64, float64, bool) {
	limit := n.cfg.Sharding.SplitHostCPU
	if limit >= 1 || limit < 0 {
		return 0, 0, true
	}
	for _, rd := range d.GetReplicas() {
		if rd.GetType() == kvpb.ReplicaType_REPLICA_TYPE_LEARNER {
			continue
		}
		id := rd.GetNodeId()
		cpu, seen := cpus[id]
		if !seen {
			cpu = n.nodeCPU(ctx, id)
			cpus[id] = cpu
		}
		if cpu.GetKnown() && cpu.GetHostBusy() < limit {
			return id, cpu.GetHostBusy(), true
		}
	}
	return 0, 0, false
}

// nodeCPU asks node id for its CPU use (empty, so unknown, if it does
// not answer within 2 s).
func (n *Node) nodeCPU(ctx context.Context, id uint64) *kvpb.NodeCPU {
	if id == n.ident.NodeID {
		return n.cpu.stats()
	}
	c, err := n.peers.admin(id)
	if err != nil {
		return &kvpb.NodeCPU{}
	}
	sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	st, err := c.Status(sctx, &kvpb.StatusRequest{NodeOnly: true})
	if err != nil {
		n.log.Debug("asking a peer for its CPU use", "node", id, "err", err)
		return &kvpb.NodeCPU{}
	}
	return st.GetCpu()
}

// middleKey returns the user key halfway through span by key count,
// guided by the engine's estimate of the count; when the estimate is too
// high (deleted keys) it counts and takes the true middle. nil if the span
// has fewer than two keys.
func (n *Node) middleKey(sp keys.Span, estimate uint64) []byte {
	nth := func(target uint64) (key []byte, seen uint64) {
		it, err := n.db.NewIter(&storage.IterOptions{LowerBound: sp.Start, UpperBound: sp.End, KeysOnly: true})
		if err != nil {
			return nil, 0
		}
		defer it.Close()
		for ok := it.First(); ok; ok = it.Next() {
			seen++
			if seen > target {
				k, err := keys.DecodeUserKey(it.UnsafeKey())
				if err != nil {
					return nil, seen
				}
				return bytes.Clone(k), seen
			}
		}
		return nil, seen
	}
	k, seen := nth(max(estimate/2, 1))
	if k == nil && seen >= 2 {
		k, _ = nth(seen / 2)
	}
	return k
}

// startSharding starts the split checker, the placement controller, the
// peer address refresh and the CPU sampler.
func (n *Node) startSharding() {
	n.bgWG.Add(4)
	go func() {
		defer n.bgWG.Done()
		n.cpu.run(n.bgCtx)
	}()
	go func() {
		defer n.bgWG.Done()
		n.peerRefreshLoop(n.bgCtx)
	}()
	go func() {
		defer n.bgWG.Done()
		n.splitLoop(n.bgCtx)
	}()
	go func() {
		defer n.bgWG.Done()
		n.placementLoop(n.bgCtx)
	}()
}
