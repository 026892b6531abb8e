package node

import (
	"bytes"
	"context"
	"log/slog"
	"time"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/raft"
	"github.com/shaledb/shale/raft/keys"
)

// Automatic splits (docs/sharding.md, "Automatic splits"). Every
// SplitCheckInterval each node looks at the user ranges it leads:
//
//   - by size: a range whose live data (its MVCC stats' live bytes,
//     range_size.go) exceeds SplitSizeBytes splits at the key that
//     halves its bytes on disk by the engine's estimate (split_key.go;
//     data still in the memtable is not in the estimate, so a range
//     whose data is all there waits for a flush);
//   - by load: a range that served more than SplitQPS requests per second,
//     and more than loadSplitShare times its fair share of this node's
//     load, in loadSplitWindows windows in a row splits at the median of
//     its sampled request keys, which divides its traffic in two, if the
//     host of one of its voters had CPU to spare (below).
//
// The fair share is the QPS of the settled user ranges this node leads
// divided by their number; a range is settled when this node led it for
// the whole window and did not split it at the window's start, so its
// QPS is a whole window's of traffic clients already route to it. Two
// windows in a row, as TiKV asks a range to stay hot for several checks,
// keep one busy window (a client's burst, a leader just moved) from
// splitting a range. A split helps when one range carries more than the others
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

// loadSplitWindows is how many check windows in a row a range must want a
// load split before it splits (see above).
const loadSplitWindows = 2

// splitMemory is what one split pass leaves for the next.
type splitMemory struct {
	// settled are the user ranges this node led at the pass and did not
	// split by it: at the next pass, their window covers a whole
	// interval of traffic that clients already routed to them.
	settled map[uint64]bool
	// hot counts, per range, the settled windows in a row in which it
	// wanted a load split.
	hot map[uint64]int
	// held are the ranges whose load split the pass held back for want
	// of CPU.
	held map[uint64]bool
}

// rangeWindow is one led user range's finished load window.
type rangeWindow struct {
	r      *raft.Replica
	id     uint64
	d      *kvpb.RangeDescriptor
	qps    float64
	sample [][]byte
}

// hotRanges decides, from the windows of the user ranges this node leads
// and what the last pass remembered, which of them want a load split now
// (hot[i] for led[i]), and returns what this pass leaves for the next one
// (without held, which the caller fills in; a caller that splits a range
// must also drop it from settled and hot).
//
// The fair share is taken over the settled ranges only. A range split,
// or first led here, since the last pass has a partial window, often near
// zero while clients learn of it: counted, such ranges pulled the mean
// down until every settled range looked hot, each split made another
// such range, and a uniform load on a loaded machine split without end
// (282 ranges in 15 s in TestShardingLoadSplitUniform).
func hotRanges(prev splitMemory, led []rangeWindow, splitQPS float64) (hot []bool, next splitMemory) {
	next = splitMemory{settled: map[uint64]bool{}, hot: map[uint64]int{}, held: map[uint64]bool{}}
	total, nSettled := 0.0, 0
	for _, w := range led {
		next.settled[w.id] = true
		if prev.settled[w.id] {
			total += w.qps
			nSettled++
		}
	}
	hot = make([]bool, len(led))
	for i, w := range led {
		if prev.settled[w.id] && len(w.sample) >= 8 && loadSplitWanted(splitQPS, w.qps, total, nSettled) {
			next.hot[w.id] = prev.hot[w.id] + 1
			hot[i] = next.hot[w.id] >= loadSplitWindows
		}
	}
	return hot, next
}

// splitPass checks every user range this node leads once; it returns the
// number of splits made.
func (n *Node) splitPass(ctx context.Context) int {
	o := &n.cfg.Sharding
	now := time.Now()
	var led []rangeWindow
	for _, r := range n.store.Replicas() {
		d := r.Descriptor()
		if d == nil || keys.IsMetaRange(d) {
			continue
		}
		qps, sample := n.load.roll(r.RangeID(), now)
		if o.DisableAutoSplit || !r.IsLeader() {
			continue
		}
		led = append(led, rangeWindow{r: r, id: r.RangeID(), d: d, qps: qps, sample: sample})
	}
	prev := n.splitMem
	hot, next := hotRanges(prev, led, o.SplitQPS)
	splits := 0
	cpus := map[uint64]*kvpb.NodeCPU{} // this pass's answers, by node
	for i, w := range led {
		d, id := w.d, w.id
		var key []byte
		reason := ""
		if hot[i] {
			if peer, busy, ok := n.spareCPU(ctx, d, cpus); ok {
				key, reason = w.sample[len(w.sample)/2], "load"
				n.log.Debug("load split: a voter's host has CPU to spare", "range", id, "node", peer, "host_busy", busy)
			} else {
				n.metrics.loadSplitsHeld.Inc()
				next.held[id] = true
				// Logged when a range starts waiting, not at every check
				// of a cluster that stays saturated (the counter counts
				// every check).
				lvl := slog.LevelInfo
				if prev.held[id] {
					lvl = slog.LevelDebug
				}
				n.log.Log(ctx, lvl, "load split held back: every voter's host is busy", "range", id,
					"qps", w.qps, "split_host_cpu", o.SplitHostCPU)
			}
		}
		if key == nil {
			// By live data (range_size.go); the split key halves the
			// range's bytes on disk by the engine's estimate.
			sp := keys.DataSpan(d)
			if liveBytes(w.r) > o.SplitSizeBytes {
				if size, _, err := n.db.ApproximateSize(sp.Start, sp.End); err == nil && size > 0 {
					k, err := sizeMiddleKey(n.db, sp, size)
					if err != nil {
						n.log.Warn("finding the middle of an oversized range", "range", id, "err", err)
					}
					key, reason = k, "size"
				}
			}
		}
		if key == nil || bytes.Compare(key, d.GetStartKey()) <= 0 || !keys.ContainsUserKey(d, key) {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, right, err := n.store.Split(sctx, id, key)
		cancel()
		if err != nil {
			n.log.Info("automatic split failed", "range", id, "reason", reason, "err", err)
			continue
		}
		n.log.Info("automatic split", "range", id, "right", right.GetRangeId(), "reason", reason, "qps", w.qps)
		splits++
		// The left half's next window still holds requests for the
		// right half's keys, sent before clients learnt of the split.
		delete(next.settled, id)
		delete(next.hot, id)
	}
	n.splitMem = next
	return splits
}

// loadSplitWanted reports whether a range serving qps should split by
// load under splitQPS, on a node whose settled led user ranges, nLed of
// them, serve total.
func loadSplitWanted(splitQPS, qps, total float64, nLed int) bool {
	if splitQPS <= 0 || qps <= splitQPS {
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

// startSharding starts the split checker, the placement controller, the
// peer address refresh, the CPU sampler and the GC queue.
func (n *Node) startSharding() {
	if !n.cfg.GC.Disable {
		n.bgWG.Add(1)
		go func() {
			defer n.bgWG.Done()
			n.gcLoop(n.bgCtx)
		}()
	}
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
