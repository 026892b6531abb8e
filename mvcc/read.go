package mvcc

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/storage"
)

// ErrHistoryCompacted is returned (wrapped) for a read below the GC
// threshold: the versions it would need may be gone. The range state
// machine checks a read's timestamp against its threshold before reading.
var ErrHistoryCompacted = errors.New("mvcc: history compacted: the read timestamp is below the GC threshold")

// CheckReadTimestamp returns an error wrapping ErrHistoryCompacted if ts is
// below threshold, the timestamp at and above which every version is kept.
func CheckReadTimestamp(ts, threshold hlc.Timestamp) error {
	if ts.Less(threshold) {
		return fmt.Errorf("%w (read at %s, threshold %s)", ErrHistoryCompacted, ts, threshold)
	}
	return nil
}

// KeyValue is a user key's value as a read at some timestamp sees it.
type KeyValue struct {
	Key   []byte
	Value []byte
	// Version is the version read: the newest at or below the read
	// timestamp.
	Version hlc.Timestamp
	// Created is the version that created the key: the first version after
	// its last deletion at or below Version.
	Created hlc.Timestamp
	// Lease is the lease the value is attached to (0: none): the value
	// is deleted when the lease expires or is revoked (docs/leases.md).
	Lease uint64
}

// Get returns key's value as of ts: its newest version at or below ts, or
// found == false if there is none or that version is a deletion. The
// result's slices are the caller's.
func (ks Keyspace) Get(r Reader, key []byte, ts hlc.Timestamp) (kv KeyValue, found bool, err error) {
	e, ok, err := ks.newestAtOrBelow(r, key, ts)
	if err != nil || !ok || !e.live {
		return KeyValue{}, false, err
	}
	return KeyValue{
		Key:     append([]byte{}, key...),
		Value:   e.value,
		Version: e.ts,
		Created: e.created,
		Lease:   e.lease,
	}, true, nil
}

// newestAtOrBelow returns key's newest version at or below ts, tombstones
// included. The entry's slices are copies.
func (ks Keyspace) newestAtOrBelow(r Reader, key []byte, ts hlc.Timestamp) (e entry, ok bool, err error) {
	if pr, isPR := r.(prefixReader); isPR {
		k, v, found, err := pr.SeekPrefixGE(ks.engineKey(nil, key, ts))
		if err == nil {
			if !found {
				return entry{}, false, nil
			}
			// k and v are ours: no copy needed.
			e, err := ks.decodeKV(k, v)
			if err != nil {
				return entry{}, false, err
			}
			e.keyEnc = nil
			return e, true, nil
		}
		if !prefixReadUnavailable(err) {
			return entry{}, false, fmt.Errorf("mvcc: get %q: %w", key, err)
		}
	}
	it, err := r.NewIter(&storage.IterOptions{
		LowerBound: ks.keyStart(nil, key),
		UpperBound: ks.keyEnd(nil, key),
	})
	if err != nil {
		return entry{}, false, fmt.Errorf("mvcc: get %q: %w", key, err)
	}
	defer closeIter(it, &err)
	if !it.SeekGE(ks.engineKey(nil, key, ts)) {
		if err := it.Error(); err != nil {
			return entry{}, false, fmt.Errorf("mvcc: get %q: %w", key, err)
		}
		return entry{}, false, nil
	}
	e, err = ks.decodeEntry(it)
	if err != nil {
		return entry{}, false, err
	}
	e.keyEnc = nil
	e.value = append([]byte{}, e.value...)
	return e, true, nil
}

// ScanOptions bound a Scan.
type ScanOptions struct {
	// Limit is the most key-values to return; 0 means no limit.
	Limit int
}

// Scan returns the live key-values of user keys in [start, end) as of ts,
// in key order (nil start or end: the keyspace's beginning or end). With
// a limit, it stops after Limit key-values and returns in resume the key
// to scan from next; resume is nil when the span is done.
//
// The engine picks each key's newest version at or below ts and steps over
// the rest (storage.IterOptions.VersionFloor), so older history costs the
// scan engine work but no copies: r's database must be opened with
// SplitVersionSuffix over a prefix of the Keyspace's.
func (ks Keyspace) Scan(r Reader, start, end []byte, ts hlc.Timestamp, opts ScanOptions) (kvs []KeyValue, resume []byte, err error) {
	if start != nil && end != nil && bytes.Compare(start, end) > 0 {
		return nil, nil, fmt.Errorf("mvcc: scan: start %q is above end %q", start, end)
	}
	if opts.Limit < 0 {
		return nil, nil, fmt.Errorf("mvcc: scan: negative limit %d", opts.Limit)
	}
	lower, upper := ks.bounds(start, end)
	it, err := r.NewIter(&storage.IterOptions{
		LowerBound:   lower,
		UpperBound:   upper,
		VersionFloor: appendSuffix(nil, ts),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("mvcc: scan: %w", err)
	}
	defer closeIter(it, &err)
	for ok := it.SeekGE(lower); ok; ok = it.Next() {
		// Each entry is a key's newest version at or below ts.
		e, err := ks.decodeEntry(it)
		if err != nil {
			return nil, nil, err
		}
		key, err := decodeKeyPrefix(nil, e.keyEnc)
		if err != nil {
			return nil, nil, err
		}
		if opts.Limit > 0 && len(kvs) == opts.Limit {
			return kvs, key, nil
		}
		if e.live {
			kvs = append(kvs, KeyValue{
				Key:     key,
				Value:   append([]byte{}, e.value...),
				Version: e.ts,
				Created: e.created,
				Lease:   e.lease,
			})
		}
	}
	if err := it.Error(); err != nil {
		return nil, nil, fmt.Errorf("mvcc: scan: %w", err)
	}
	return kvs, nil, nil
}

// GetMany reads keys as of ts at one consistent point (BatchGet): found[i]
// and kvs[i] are Get's answer for keys[i]. Keys may come in any order and
// repeat.
func (ks Keyspace) GetMany(r Reader, keys [][]byte, ts hlc.Timestamp) (kvs []KeyValue, found []bool, err error) {
	kvs, found = make([]KeyValue, len(keys)), make([]bool, len(keys))
	if len(keys) == 0 {
		return kvs, found, nil
	}
	if pr, isPR := r.(prefixReader); isPR {
		targets := make([][]byte, len(keys))
		for i, key := range keys {
			targets[i] = ks.engineKey(nil, key, ts)
		}
		ek, ev, err := pr.MultiSeekPrefixGE(targets)
		if err == nil {
			for i, key := range keys {
				if ek[i] == nil {
					continue
				}
				e, err := ks.decodeKV(ek[i], ev[i])
				if err != nil {
					return nil, nil, err
				}
				if !e.live {
					continue
				}
				kvs[i] = KeyValue{
					Key:     append([]byte{}, key...),
					Value:   e.value, // a slice of its own (MultiSeekPrefixGE)
					Version: e.ts,
					Created: e.created,
					Lease:   e.lease,
				}
				found[i] = true
			}
			return kvs, found, nil
		}
		if !prefixReadUnavailable(err) {
			return nil, nil, fmt.Errorf("mvcc: get many: %w", err)
		}
	}
	return ks.getManyByIter(r, keys, ts, kvs, found)
}

// getManyByIter is GetMany through one engine iterator, for a Reader
// without versioned point reads.
func (ks Keyspace) getManyByIter(r Reader, keys [][]byte, ts hlc.Timestamp, kvs []KeyValue, found []bool) (_ []KeyValue, _ []bool, err error) {
	// Visit keys in order so that the iterator only moves forward (and
	// mostly within its window).
	order := make([]int, len(keys))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return bytes.Compare(keys[a], keys[b]) })
	first, last := keys[order[0]], keys[order[len(order)-1]]
	it, err := r.NewIter(&storage.IterOptions{
		LowerBound: ks.keyStart(nil, first),
		UpperBound: ks.keyEnd(nil, last),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("mvcc: get many: %w", err)
	}
	defer closeIter(it, &err)
	var target, want []byte
	for _, i := range order {
		key := keys[i]
		target = ks.engineKey(target[:0], key, ts)
		if !it.SeekGE(target) {
			if err := it.Error(); err != nil {
				return nil, nil, fmt.Errorf("mvcc: get many %q: %w", key, err)
			}
			continue
		}
		e, err := ks.decodeEntry(it)
		if err != nil {
			return nil, nil, err
		}
		want = AppendKeyPrefix(want[:0], key)
		if !bytes.Equal(e.keyEnc, want) || !e.live {
			continue // the next key's version, or a deletion
		}
		kvs[i] = KeyValue{
			Key:     append([]byte{}, key...),
			Value:   append([]byte{}, e.value...),
			Version: e.ts,
			Created: e.created,
			Lease:   e.lease,
		}
		found[i] = true
	}
	return kvs, found, nil
}
