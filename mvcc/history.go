package mvcc

import (
	"bytes"
	"fmt"

	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/storage"
)

// Change is one stored version seen as a change to its key: what a watch
// delivers (docs/watch.md). It is produced both from history (History)
// and as a Writer writes (Writer.OnChange), the same for the same version.
type Change struct {
	Key     []byte
	Version hlc.Timestamp
	// Deleted: the version is a deletion; Value is then empty.
	Deleted bool
	Value   []byte
	// PrevFound and PrevValue: the key's value just below Version (the
	// newest version below it, when that one is live).
	PrevFound bool
	PrevValue []byte
}

// Size is what a Change costs to hold, for memory bounds.
func (c *Change) Size() int { return len(c.Key) + len(c.Value) + len(c.PrevValue) + 64 }

// History calls fn with every version of the user keys in [start, end)
// whose version is in (after, upTo], in key order and, per key, newest
// first (nil start or end: the keyspace's beginning or end). With
// withPrev, each Change carries the key's value just below its version.
//
// The caller must hold a threshold G <= after under which versions may
// have been collected (GC keeps every version a read at or above G can
// see), so each key's value just below any version above after is
// present. The Change and its slices are fn's to keep.
func (ks Keyspace) History(r Reader, start, end []byte, after, upTo hlc.Timestamp, withPrev bool, fn func(Change) error) (err error) {
	if start != nil && end != nil && bytes.Compare(start, end) >= 0 {
		return fmt.Errorf("mvcc: history: start %q is not below end %q", start, end)
	}
	if upTo.LessEq(after) {
		return nil
	}
	lower, upper := ks.bounds(start, end)
	it, err := r.NewIter(&storage.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return fmt.Errorf("mvcc: history: %w", err)
	}
	defer closeIter(it, &err)
	// pending is the newest in-window version of the current key not yet
	// handed to fn: it waits for the next older version (its previous
	// value) when withPrev.
	var pending *Change
	var pendingEnc []byte
	flush := func() error {
		if pending == nil {
			return nil
		}
		c := *pending
		pending = nil
		return fn(c)
	}
	// givePrevious hands fn the pending Change of e's key, if one waits,
	// with e as its previous value, and returns e's user key.
	givePrevious := func(sameKey bool, e entry) ([]byte, error) {
		if sameKey {
			pending.PrevFound = e.live
			if e.live {
				pending.PrevValue = bytes.Clone(e.value)
			}
			if err := flush(); err != nil {
				return nil, err
			}
		}
		return decodeKeyPrefix(nil, e.keyEnc)
	}
	ok := it.SeekGE(lower)
	for ok {
		e, err := ks.decodeEntry(it)
		if err != nil {
			return err
		}
		sameKey := pending != nil && bytes.Equal(e.keyEnc, pendingEnc)
		if !sameKey {
			if err := flush(); err != nil {
				return err
			}
		}
		switch {
		case upTo.Less(e.ts):
			// Newer than the window: seek to the key's newest version at
			// or below upTo.
			target := append(append([]byte{}, ks.Prefix...), e.keyEnc...)
			target = appendSuffix(target, upTo)
			ok = it.SeekGE(target)
			continue
		case after.Less(e.ts):
			key, err := givePrevious(sameKey, e)
			if err != nil {
				return err
			}
			c := Change{Key: key, Version: e.ts, Deleted: !e.live}
			if e.live {
				c.Value = bytes.Clone(e.value)
			}
			if withPrev {
				pending = &c
				pendingEnc = append(pendingEnc[:0], e.keyEnc...)
			} else if err := fn(c); err != nil {
				return err
			}
		default:
			// At or below after: the previous value of the oldest
			// in-window version, if one waits; then on to the next key.
			key, err := givePrevious(sameKey, e)
			if err != nil {
				return err
			}
			ok = it.SeekGE(ks.keyEnd(nil, key))
			continue
		}
		ok = it.Next()
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("mvcc: history: %w", err)
	}
	return flush()
}
