package mvcc

import (
	"bytes"
	"fmt"

	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/storage"
)

// GCOptions bound one GC call.
type GCOptions struct {
	// MaxDeletes is the most versions one call deletes (0: no limit), so
	// that a GC queue can cut a range's collection into batches that do
	// not hold up foreground writes. A call that reaches it returns a
	// Resume key (possibly in the middle of a key's versions).
	MaxDeletes int
	// MaxKeys is the most user keys one call looks at (0: no limit):
	// a span of keys with nothing to collect costs a scan too, and a GC
	// applied on a range's apply path must not hold it up for long. A
	// call that reaches it returns a Resume key at a key boundary.
	MaxKeys int
}

// GCResult says what a GC call did.
type GCResult struct {
	KeysSeen        int // user keys looked at
	VersionsDeleted int // engine deletes added to the batch
	// Delta is how the deletes change the keyspace's Stats (never its
	// live data: GC keeps every key's newest live version).
	Delta Stats
	// Resume is the user key to continue from, or nil when the span is
	// done.
	Resume []byte
	// Collectible is the lowest threshold at which a version this call
	// kept would be collected (zero: none would, whatever the threshold):
	// a kept version goes once its successor, the key's next newer
	// version, is at or below the threshold, a deletion once it is
	// itself. A GC queue need not scan the span again below it until a
	// write supersedes a version (node/gc_queue.go). It may be lower
	// than exact (never higher): past gcStepsAbove versions of a key
	// above threshold, the call seeks past them and takes
	// threshold.Next().
	Collectible hlc.Timestamp
}

// gcStepsAbove is how many of a key's versions above the threshold GC
// steps through, to find which would be collected at what threshold,
// before it seeks past the rest.
const gcStepsAbove = 8

// GC adds to b the deletes that remove, for user keys in [start, end) (nil:
// the keyspace's beginning or end), every version that no read at or above
// threshold can see: all versions older than a key's newest version at or
// below threshold, and that version too when it is a deletion. Versions
// above threshold are kept. Once b is applied, reads below threshold may
// see a history with holes and must be refused (CheckReadTimestamp); the
// caller records the new threshold before, or in the same batch as, the
// deletes.
//
// r is read as it is; versions at or below threshold never change (writes
// there are refused), so the deletes stay right if newer versions arrive
// before b is applied.
func (ks Keyspace) GC(r Reader, b *storage.Batch, start, end []byte, threshold hlc.Timestamp, opts GCOptions) (res GCResult, err error) {
	if start != nil && end != nil && bytes.Compare(start, end) > 0 {
		return GCResult{}, fmt.Errorf("mvcc: gc: start %q is above end %q", start, end)
	}
	lower, upper := ks.bounds(start, end)
	it, err := r.NewIter(&storage.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return GCResult{}, fmt.Errorf("mvcc: gc: %w", err)
	}
	defer closeIter(it, &err)

	var (
		cur     []byte // key_enc of the current key
		visible bool   // cur's newest version at or below threshold was seen
		// tombstone is the engine key of cur's visible version when it is
		// a deletion. It is deleted only once every older version has
		// been: deleted first, it would let an older live version show
		// through to reads at threshold, resurrecting the key.
		tombstone []byte
		kept      bool // some version of cur stays
		target    []byte
		// prev is the timestamp of cur's version before the current one
		// (its successor) when havePrev; above counts cur's versions
		// above threshold stepped through.
		prev     hlc.Timestamp
		havePrev bool
		above    int
	)
	// collectibleAt notes that a kept version goes at threshold ts.
	collectibleAt := func(ts hlc.Timestamp) {
		if res.Collectible.IsZero() || ts.Less(res.Collectible) {
			res.Collectible = ts
		}
	}
	remove := func(key []byte, size int64) {
		b.Delete(key)
		res.VersionsDeleted++
		res.Delta.Versions--
		res.Delta.Bytes -= size
	}
	finishKey := func() {
		if tombstone != nil {
			remove(tombstone, int64(len(tombstone)+1))
			if !kept {
				res.Delta.Keys--
			}
			tombstone = nil
		}
	}
	valid := it.SeekGE(lower)
	for valid {
		e, err := ks.decodeEntry(it)
		if err != nil {
			return GCResult{}, err
		}
		if cur == nil || !bytes.Equal(e.keyEnc, cur) {
			finishKey()
			if opts.MaxKeys > 0 && res.KeysSeen >= opts.MaxKeys {
				res.Resume, err = decodeKeyPrefix(nil, e.keyEnc)
				return res, err
			}
			cur, visible, kept = append(cur[:0], e.keyEnc...), false, false
			havePrev, above = false, 0
			res.KeysSeen++
		}
		switch {
		case threshold.Less(e.ts):
			// Versions above threshold stay. A deletion goes at its own
			// timestamp, any other version at its successor's.
			kept = true
			if !e.live {
				collectibleAt(e.ts)
			} else if havePrev {
				collectibleAt(prev)
			}
			prev, havePrev = e.ts, true
			if above++; above < gcStepsAbove {
				valid = it.Next()
				continue
			}
			// Many versions above threshold: seek to the first at or
			// below it. The versions skipped and the one found go at a
			// threshold above this one at the earliest.
			collectibleAt(threshold.Next())
			havePrev = false
			target = appendSuffix(append(append(target[:0], ks.Prefix...), cur...), threshold)
			valid = it.SeekGE(target)
			continue
		case !visible:
			// What a read at threshold sees: kept if live (going once its
			// successor is at or below the threshold), deleted last if a
			// deletion.
			visible = true
			if e.live {
				kept = true
				if havePrev {
					collectibleAt(prev)
				}
			} else {
				tombstone = append([]byte{}, it.UnsafeKey()...)
			}
			valid = it.Next()
			continue
		}
		// Older than what a read at threshold sees.
		if opts.MaxDeletes > 0 && res.VersionsDeleted >= opts.MaxDeletes {
			// A later call starts over at this key and finds what is left
			// of it the same way; its tombstone stays until then.
			res.Resume, err = decodeKeyPrefix(nil, cur)
			return res, err
		}
		remove(it.UnsafeKey(), int64(len(it.UnsafeKey())+len(it.UnsafeValue())))
		valid = it.Next()
	}
	if it.Error() == nil {
		finishKey()
	}
	if err := it.Error(); err != nil {
		return GCResult{}, fmt.Errorf("mvcc: gc: %w", err)
	}
	return res, nil
}
