package node

import (
	"sync"
	"time"

	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/mvcc"
	"github.com/shaledb/shale/raft"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/storage"
)

// Range sizes (docs/sharding.md, "Size accounting").
//
// The engine's estimate (ApproximateSize) reads only its table files: data
// still in the memtables is not counted (a range loaded with 20k keys
// showed 0 bytes), and deleted keys count until a compaction drops them
// (an emptied range still showed thousands of keys). Automatic merges read
// these figures, so a loaded range could merge and an emptied one never.
//
// So a range's size is measured by scanning its live data: the iterator
// sees memtables and tables alike and skips deleted keys, so the sum of
// key and value bytes and the count of keys are exact. The scan stops
// after rangeScanCap bytes: a range that large is reported as the larger
// of what the scan saw and the engine's estimate (a lower bound, enough to
// say "not small"). A range's figures are kept until its applied index
// changes, and re-measured at most every rangeSizeMaxAge, so a cold range
// is scanned once and a hot one at most that often (hot ranges are not
// merge candidates, so their figures only need to be roughly current).
// Only a leader scans (merges read the leaders' figures); a follower
// reports the engine's estimate.

// rangeScanCap bounds one range's size scan.
const rangeScanCap = 32 << 20

// rangeSizeMaxAge is how long a measurement of a range that keeps changing
// is reused.
const rangeSizeMaxAge = 30 * time.Second

type rangeSize struct {
	applied   uint64
	start     []byte // the span measured (a split or merge changes it)
	end       []byte
	at        time.Time
	bytes     uint64
	keys      uint64
	truncated bool // the scan stopped at rangeScanCap
}

// rangeSizes caches each range's last measurement.
type rangeSizes struct {
	mu sync.Mutex
	m  map[uint64]rangeSize
}

// rangeSize returns the live bytes and keys of r's user data (see above).
func (n *Node) rangeSize(r *raft.Replica, sp keys.Span) (bytes, nkeys uint64, err error) {
	if !r.IsLeader() {
		return n.db.ApproximateSize(sp.Start, sp.End)
	}
	id, applied := r.RangeID(), r.AppliedIndex()
	now := time.Now()
	n.sizes.mu.Lock()
	c, ok := n.sizes.m[id]
	n.sizes.mu.Unlock()
	if ok && string(c.start) == string(sp.Start) && string(c.end) == string(sp.End) &&
		(c.applied == applied || now.Sub(c.at) < rangeSizeMaxAge) {
		return c.bytes, c.keys, nil
	}
	b, k, truncated, err := scanLiveSize(n.db, sp, rangeScanCap)
	if err != nil {
		return 0, 0, err
	}
	if truncated {
		if eb, ek, err := n.db.ApproximateSize(sp.Start, sp.End); err == nil {
			b, k = max(b, eb), max(k, ek)
		}
	}
	n.sizes.mu.Lock()
	if n.sizes.m == nil {
		n.sizes.m = map[uint64]rangeSize{}
	}
	n.sizes.m[id] = rangeSize{applied: applied, start: sp.Start, end: sp.End, at: now, bytes: b, keys: k, truncated: truncated}
	n.sizes.mu.Unlock()
	return b, k, nil
}

// scanLiveSize sums the key and value bytes and counts the live keys in
// sp, stopping once the bytes pass limit (truncated). In the versioned
// user keyspace a key counts by its newest version, and not at all when
// that is a deletion: older versions and deletions are history, which GC
// removes, not live data.
func scanLiveSize(db *storage.DB, sp keys.Span, limit uint64) (bytes, nkeys uint64, truncated bool, err error) {
	versioned := len(sp.Start) > 0 && sp.Start[0] == keys.UserPrefix
	opts := &storage.IterOptions{LowerBound: sp.Start, UpperBound: sp.End}
	if versioned {
		opts.VersionFloor = mvcc.VersionFloor(hlc.MaxTimestamp)
	}
	it, err := db.NewIter(opts)
	if err != nil {
		return 0, 0, false, err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		if versioned {
			e, err := keys.UserKeyspace.DecodeEntry(nil, it.UnsafeKey(), it.UnsafeValue())
			if err != nil {
				return 0, 0, false, err
			}
			if !e.Live {
				continue
			}
		}
		bytes += uint64(len(it.UnsafeKey()) + len(it.UnsafeValue()))
		nkeys++
		if bytes > limit {
			return bytes, nkeys, true, it.Error()
		}
	}
	return bytes, nkeys, false, it.Error()
}
