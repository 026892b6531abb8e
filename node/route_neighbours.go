package node

import (
	"bytes"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/raft/keys"
)

// localNeighbours returns the descriptors of the local user ranges adjacent
// to desc (ending where it starts, or starting where it ends).
func (n *Node) localNeighbours(desc *kvpb.RangeDescriptor) []*kvpb.RangeDescriptor {
	if keys.IsMetaRange(desc) {
		return nil
	}
	var out []*kvpb.RangeDescriptor
	for _, r := range n.store.Replicas() {
		d := r.Descriptor()
		if d == nil || keys.IsMetaRange(d) || d.GetRangeId() == desc.GetRangeId() {
			continue
		}
		if (len(desc.GetEndKey()) > 0 && bytes.Equal(d.GetStartKey(), desc.GetEndKey())) ||
			(len(desc.GetStartKey()) > 0 && len(d.GetEndKey()) > 0 && bytes.Equal(d.GetEndKey(), desc.GetStartKey())) {
			out = append(out, d)
		}
	}
	return out
}

// rangeBoundaryResume says whether a scan of [start, end) served by desc
// continues past desc's boundary, and where: desc's end key forward, its
// start key in reverse (an empty end or start means unbounded).
func rangeBoundaryResume(desc *kvpb.RangeDescriptor, start, end []byte, reverse bool) ([]byte, bool) {
	if !reverse {
		de := desc.GetEndKey()
		if len(de) == 0 || (len(end) != 0 && bytes.Compare(end, de) <= 0) {
			return nil, false
		}
		return bytes.Clone(de), true
	}
	ds := desc.GetStartKey()
	if len(ds) == 0 || bytes.Compare(start, ds) >= 0 {
		return nil, false
	}
	return bytes.Clone(ds), true
}
