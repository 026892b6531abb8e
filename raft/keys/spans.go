package keys

import (
	"bytes"

	"github.com/shaledb/shale/api/kvpb"
)

// Range IDs fixed by bootstrap (docs/replication.md, "Bootstrap").
// DO NOT CHANGE: every cluster's first two ranges have them.
const (
	// MetaRangeID is the range holding the meta span: the node registry and
	// the descriptors of every user range. Its descriptor's start and end
	// keys are empty; it never holds user keys.
	MetaRangeID uint64 = 1
	// FirstUserRangeID is the range that covers the whole user key space in
	// a freshly bootstrapped cluster.
	FirstUserRangeID uint64 = 2
)

// IsMetaRange reports whether desc describes the meta range.
func IsMetaRange(desc *kvpb.RangeDescriptor) bool { return desc.GetRangeId() == MetaRangeID }

// DataSpan returns the engine span of the replicated data of the range desc
// describes besides its range-local keys: the meta span for the meta range,
// the range's user keys otherwise.
func DataSpan(desc *kvpb.RangeDescriptor) Span {
	if IsMetaRange(desc) {
		return MetaSpan()
	}
	return UserSpan(desc.GetStartKey(), desc.GetEndKey())
}

// ReplicatedSpans returns every engine span a range's snapshot carries: its
// range-local keys, then its data. They are disjoint and in key order.
func ReplicatedSpans(desc *kvpb.RangeDescriptor) []Span {
	return []Span{RangeLocalSpan(desc.GetRangeId()), DataSpan(desc)}
}

// ContainsUserKey reports whether user key k belongs to the user range desc
// describes.
func ContainsUserKey(desc *kvpb.RangeDescriptor, k []byte) bool {
	if IsMetaRange(desc) {
		return false
	}
	if bytes.Compare(k, desc.GetStartKey()) < 0 {
		return false
	}
	end := desc.GetEndKey()
	return len(end) == 0 || bytes.Compare(k, end) < 0
}

// ContainsUserSpan reports whether the user keys [start, end) all belong to
// the user range desc describes. An empty end means the end of the key
// space.
func ContainsUserSpan(desc *kvpb.RangeDescriptor, start, end []byte) bool {
	if IsMetaRange(desc) || bytes.Compare(start, desc.GetStartKey()) < 0 {
		return false
	}
	dEnd := desc.GetEndKey()
	if len(dEnd) == 0 {
		return true
	}
	return len(end) != 0 && bytes.Compare(end, dEnd) <= 0
}

// MetaKeyFor returns where meta's copy of d lives: the meta range's own
// descriptor at its fixed key, a user range's by its end key.
func MetaKeyFor(d *kvpb.RangeDescriptor) []byte {
	if IsMetaRange(d) {
		return MetaRangeDescriptorKey()
	}
	return MetaDescriptorKey(d.GetEndKey())
}
