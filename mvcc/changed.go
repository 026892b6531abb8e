package mvcc

import (
	"bytes"
	"fmt"

	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/storage"
)

// Changed is a key found with a version above a timestamp.
type Changed struct {
	Key     []byte
	Version hlc.Timestamp
}

// ChangedAbove reports a user key in [start, end) whose newest version
// (a deletion included) is above ts, as this writer sees the keyspace:
// its own earlier writes, else the reader's state. With point set, only
// the key start is looked at (end is ignored); otherwise a nil start or
// end is the keyspace's beginning or end. found is false when no key
// there changed after ts.
//
// This is a transaction's read validation (docs/transactions.md): a read
// at ts of those keys would see something else at any later timestamp.
func (w *Writer) ChangedAbove(start, end []byte, point bool, ts hlc.Timestamp) (ch Changed, found bool, err error) {
	if point {
		newest, ok, _, err := w.newest(start)
		if err != nil || !ok || !ts.Less(newest.ts) {
			return Changed{}, false, err
		}
		return Changed{Key: append([]byte{}, start...), Version: newest.ts}, true, nil
	}
	// Writes of this writer's batch first: they are newer than anything
	// the reader holds. The lowest such key is reported, so that every
	// replica reports the same one.
	for k, p := range w.pending {
		kb := []byte(k)
		if (start == nil || bytes.Compare(kb, start) >= 0) && (end == nil || bytes.Compare(kb, end) < 0) && ts.Less(p.ts) &&
			(!found || bytes.Compare(kb, ch.Key) < 0) {
			ch, found = Changed{Key: kb, Version: p.ts}, true
		}
	}
	if found {
		return ch, true, nil
	}
	return w.ks.changedAbove(w.r, start, end, ts)
}

// changedAbove finds a user key in [start, end) of r whose newest version
// is above ts. The engine hands over each key's newest version only
// (a version floor at the largest timestamp), so the cost is one entry
// per key, whatever its history.
func (ks Keyspace) changedAbove(r Reader, start, end []byte, ts hlc.Timestamp) (ch Changed, found bool, err error) {
	if start != nil && end != nil && bytes.Compare(start, end) > 0 {
		return Changed{}, false, fmt.Errorf("mvcc: changed above: start %q is above end %q", start, end)
	}
	lower, upper := ks.bounds(start, end)
	it, err := r.NewIter(&storage.IterOptions{
		LowerBound:   lower,
		UpperBound:   upper,
		VersionFloor: appendSuffix(nil, hlc.MaxTimestamp),
	})
	if err != nil {
		return Changed{}, false, fmt.Errorf("mvcc: changed above: %w", err)
	}
	defer closeIter(it, &err)
	for ok := it.SeekGE(lower); ok; ok = it.Next() {
		e, err := ks.decodeEntry(it)
		if err != nil {
			return Changed{}, false, err
		}
		if !ts.Less(e.ts) {
			continue
		}
		key, err := decodeKeyPrefix(nil, e.keyEnc)
		if err != nil {
			return Changed{}, false, err
		}
		return Changed{Key: key, Version: e.ts}, true, nil
	}
	if err := it.Error(); err != nil {
		return Changed{}, false, fmt.Errorf("mvcc: changed above: %w", err)
	}
	return Changed{}, false, nil
}
