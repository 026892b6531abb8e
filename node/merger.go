package node

import (
	"bytes"
	"context"
	"sort"
	"sync"
	"time"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/rangesm"
)

// Automatic merges (docs/sharding.md, "Merges"). The placement controller
// (on meta's leader) looks, after its other steps, for two adjacent user
// ranges that are both small (each under MergeSizeBytes, together under
// half SplitSizeBytes) and cold (each under MergeQPS, together under half
// SplitQPS), as their leaders report them in their heartbeats. The
// thresholds sit well below the split thresholds, so a merged range does
// not split again; and a pair must stay small and cold for MergeDelay
// before it merges, so a split that has just happened (by hand, or by
// load that has paused) is not undone at once. At most one merge per pass;
// Admin.Merge colocates the two ranges first if needed.

// mergeCandidates remembers since when each pair (keyed by its left-hand
// range) has qualified; a pair that stops qualifying starts over.
type mergeCandidates struct {
	mu    sync.Mutex
	since map[[2]uint64]time.Time
}

// mergePass merges at most one qualifying pair and returns how many
// merges it made.
// REQUIRES: the caller is the placement controller (meta's leader).
func (n *Node) mergePass(ctx context.Context, s *adminServer, descs []*kvpb.RangeDescriptor, hb map[uint64]*nodeStatsEntry, now time.Time) int {
	o := &n.cfg.Sharding
	stats := leaderStats(hb)
	var user []*kvpb.RangeDescriptor
	for _, d := range descs {
		if !keys.IsMetaRange(d) {
			user = append(user, d)
		}
	}
	sort.Slice(user, func(i, j int) bool { return bytes.Compare(user[i].GetStartKey(), user[j].GetStartKey()) < 0 })
	// A merged range keeps the higher of the two GC thresholds, which
	// would undo a protection on the other half (docs/versions.md,
	// "Protected timestamps"): protected spans are not merged. This node
	// leads meta, so its copy holds every acknowledged protection.
	protections, err := rangesm.ReadProtections(n.db)
	if err != nil {
		n.log.Info("merges skipped: reading the protected timestamps", "err", err)
		return 0
	}
	protected := func(l, r *kvpb.RangeDescriptor) bool {
		for _, p := range protections {
			if !p.ExpiredAt(now.UnixNano()) && p.Overlaps(l.GetStartKey(), r.GetEndKey()) {
				return true
			}
		}
		return false
	}
	mc := &n.merger
	mc.mu.Lock()
	seen := map[[2]uint64]time.Time{}
	var pick *kvpb.RangeDescriptor
	for i := 0; i+1 < len(user); i++ {
		l, r := user[i], user[i+1]
		ls, rs := stats[l.GetRangeId()], stats[r.GetRangeId()]
		if !bytes.Equal(l.GetEndKey(), r.GetStartKey()) || ls == nil || rs == nil {
			continue
		}
		small := ls.GetApproximateBytes() < o.MergeSizeBytes && rs.GetApproximateBytes() < o.MergeSizeBytes &&
			ls.GetApproximateBytes()+rs.GetApproximateBytes() < o.SplitSizeBytes/2
		cold := ls.GetQps() < o.MergeQPS && rs.GetQps() < o.MergeQPS &&
			(o.SplitQPS <= 0 || ls.GetQps()+rs.GetQps() < o.SplitQPS/2)
		if !small || !cold || protected(l, r) {
			continue
		}
		pair := [2]uint64{l.GetRangeId(), r.GetRangeId()}
		since, ok := mc.since[pair]
		if !ok {
			since = now
		}
		seen[pair] = since
		if pick == nil && now.Sub(since) >= o.MergeDelay {
			pick = l
			delete(seen, pair)
			i++ // r is taken
		}
	}
	mc.since = seen
	mc.mu.Unlock()
	if pick == nil {
		return 0
	}
	mctx, cancel := context.WithTimeout(ctx, 2*moveTimeout)
	defer cancel()
	resp, err := s.Merge(mctx, &kvpb.MergeRequest{Key: pick.GetStartKey()})
	if err != nil {
		n.log.Info("automatic merge failed", "range", pick.GetRangeId(), "err", err)
		return 0
	}
	n.log.Info("automatic merge", "range", pick.GetRangeId(), "span_end", string(clip(resp.GetMerged().GetEndKey())))
	return 1
}

// leaderStats returns each range's status as its leader reported it.
func leaderStats(hb map[uint64]*nodeStatsEntry) map[uint64]*kvpb.RangeStatus {
	out := map[uint64]*kvpb.RangeStatus{}
	for _, e := range hb {
		for _, r := range e.status.GetRanges() {
			if r.GetRaft().GetState() == "leader" {
				out[r.GetRaft().GetRangeId()] = r
			}
		}
	}
	return out
}
