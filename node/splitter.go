package node

import (
	"bytes"
	"context"
	"time"

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
//     over the last window splits at the median of its sampled request
//     keys, which divides its traffic in two.
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

// splitPass checks every user range this node leads once; it returns the
// number of splits made.
func (n *Node) splitPass(ctx context.Context) int {
	o := &n.cfg.Sharding
	now := time.Now()
	splits := 0
	for _, r := range n.store.Replicas() {
		d := r.Descriptor()
		if d == nil || keys.IsMetaRange(d) {
			continue
		}
		qps, sample := n.load.roll(r.RangeID(), now)
		if o.DisableAutoSplit || !r.IsLeader() {
			continue
		}
		var key []byte
		reason := ""
		if o.SplitQPS > 0 && qps > o.SplitQPS && len(sample) >= 8 {
			key, reason = sample[len(sample)/2], "load"
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
		n.log.Info("automatic split", "range", r.RangeID(), "right", right.GetRangeId(), "reason", reason, "qps", qps)
		splits++
	}
	return splits
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

// startSharding starts the split checker, the placement controller and
// the peer address refresh.
func (n *Node) startSharding() {
	n.bgWG.Add(3)
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
