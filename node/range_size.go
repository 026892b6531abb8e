package node

import (
	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/raft"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/rangesm"
)

// Range sizes (docs/sharding.md, "Size accounting").
//
// A user range's size is its live data as its replicated MVCC stats count
// it (rangesm's mvcc_state.go): the bytes of its keys' newest live
// versions and the number of those keys. Every replica applies the same
// stats with every command, so the figures are exact at the replica's
// applied index, cost nothing to read, count data still in the memtables,
// and count neither deleted keys nor old versions (which GC removes).
// Splits and merges go by them.
//
// The meta range holds no versions and never splits or merges: its size
// is the engine's estimate, for status only.

// fillRangeSize sets rs's sizes, MVCC stats and GC threshold from this
// node's replica r of the range d.
func (n *Node) fillRangeSize(rs *kvpb.RangeStatus, r *raft.Replica, d *kvpb.RangeDescriptor) {
	if keys.IsMetaRange(d) {
		sp := keys.DataSpan(d)
		if b, k, err := n.db.ApproximateSize(sp.Start, sp.End); err == nil {
			rs.ApproximateBytes, rs.ApproximateKeys = b, k
		}
		return
	}
	ms := mvccState(r)
	s := ms.Stats
	rs.ApproximateBytes, rs.ApproximateKeys = uint64(max(s.LiveBytes, 0)), uint64(max(s.LiveKeys, 0))
	rs.Mvcc = &kvpb.MVCCStats{Keys: s.Keys, Versions: s.Versions, Bytes: s.Bytes, LiveKeys: s.LiveKeys, LiveBytes: s.LiveBytes}
	rs.GcThreshold = rangesm.TimestampProto(ms.GCThreshold)
}

// liveBytes returns the live bytes of user range r.
func liveBytes(r *raft.Replica) uint64 {
	return uint64(max(mvccState(r).Stats.LiveBytes, 0))
}
