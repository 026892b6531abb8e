package mvcc

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/storage"
)

// Reader is what reads need from the engine: a storage.DB (its current
// state) or a storage.Snapshot (a fixed one).
type Reader interface {
	NewIter(opts *storage.IterOptions) (*storage.Iterator, error)
}

var (
	_ Reader = (*storage.DB)(nil)
	_ Reader = (*storage.Snapshot)(nil)
)

// prefixReader is what storage.DB and storage.Snapshot offer besides
// iterators: versioned point reads (SeekPrefixGE), which skip every table
// whose Bloom filter rules the key out. Get, GetMany and the Writer use
// them when the Reader has them and the database was opened with
// SplitVersionSuffix over the Keyspace's prefix; otherwise they seek an
// iterator, which reads a block of every level whose files span the key.
type prefixReader interface {
	SeekPrefixGE(target []byte) (key, value []byte, found bool, err error)
	MultiSeekPrefixGE(targets [][]byte) (keys, values [][]byte, err error)
}

var (
	_ prefixReader = (*storage.DB)(nil)
	_ prefixReader = (*storage.Snapshot)(nil)
)

// prefixReadUnavailable reports whether a versioned point read failed
// only because the database does not split the Keyspace's keys (opened
// without SplitVersionSuffix, or with a VersionedKeyPrefix that does not
// cover the Keyspace's prefix): the read then goes through an iterator.
func prefixReadUnavailable(err error) bool {
	return errors.Is(err, storage.ErrNotSupported) || errors.Is(err, storage.ErrInvalidArgument)
}

// Keyspace is where versioned keys live in an engine: each engine key is
// Prefix followed by a versioned key (key.go). Keys in a Keyspace are user
// keys; the Prefix is added and removed here. The zero Keyspace uses the
// whole engine.
type Keyspace struct {
	// Prefix is the engine key prefix of every versioned key (for a Shale
	// node, the user-key prefix 0x03 of docs/formats.md). It must not be
	// modified after first use.
	Prefix []byte
}

// engineKey appends the engine key of key at ts to dst.
func (ks Keyspace) engineKey(dst, key []byte, ts hlc.Timestamp) []byte {
	dst = slices.Grow(dst, len(ks.Prefix)+len(key)+2+SuffixLen)
	return AppendKey(append(dst, ks.Prefix...), key, ts)
}

// keyStart is the engine key every version of key is at or above.
func (ks Keyspace) keyStart(dst, key []byte) []byte {
	dst = slices.Grow(dst, len(ks.Prefix)+len(key)+2)
	return AppendKeyPrefix(append(dst, ks.Prefix...), key)
}

// keyEnd is the engine key every version of key is below.
func (ks Keyspace) keyEnd(dst, key []byte) []byte {
	dst = slices.Grow(dst, len(ks.Prefix)+len(key)+4)
	return KeyEnd(append(dst, ks.Prefix...), key)
}

// bounds returns the engine bounds of the versions of user keys in
// [start, end); nil start or end means the Keyspace's beginning or end.
func (ks Keyspace) bounds(start, end []byte) (lower, upper []byte) {
	if start != nil {
		lower = ks.keyStart(nil, start)
	} else {
		lower = append([]byte{}, ks.Prefix...)
	}
	if end != nil {
		upper = ks.keyStart(nil, end)
	} else {
		upper = prefixEnd(ks.Prefix)
	}
	return lower, upper
}

// prefixEnd returns the smallest key above every key with prefix p, or nil
// (unbounded) when there is none.
func prefixEnd(p []byte) []byte {
	end := append([]byte{}, p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xFF {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// entry is one version read from the engine.
type entry struct {
	keyEnc  []byte // key_enc, aliasing the iterator
	ts      hlc.Timestamp
	live    bool
	created hlc.Timestamp
	lease   uint64 // the lease a live value is attached to (0: none)
	value   []byte // aliasing the iterator
}

// decodeEntry splits the iterator's current entry. The result aliases the
// iterator's memory until it moves.
func (ks Keyspace) decodeEntry(it *storage.Iterator) (entry, error) {
	return ks.decodeKV(it.UnsafeKey(), it.UnsafeValue())
}

// decodeKV splits an engine entry; the result aliases k and v.
func (ks Keyspace) decodeKV(k, v []byte) (entry, error) {
	ek := k
	if !bytes.HasPrefix(k, ks.Prefix) {
		return entry{}, fmt.Errorf("mvcc: engine key %x outside the keyspace %x", ek, ks.Prefix)
	}
	k = k[len(ks.Prefix):]
	n, err := SplitKey(k)
	if err != nil {
		return entry{}, fmt.Errorf("engine key %x: %w", ek, err)
	}
	e := entry{keyEnc: k[:n], ts: decodeSuffix(k[n:])}
	if !e.ts.Valid() {
		return entry{}, fmt.Errorf("engine key %x: %w: negative version", ek, ErrMalformedKey)
	}
	sv, err := decodeValue(v)
	if err != nil {
		return entry{}, fmt.Errorf("engine key %x: %w", ek, err)
	}
	e.live, e.created, e.lease, e.value = sv.live, sv.created, sv.lease, sv.value
	return e, nil
}

func closeIter(it *storage.Iterator, err *error) {
	if cerr := it.Close(); cerr != nil && *err == nil {
		*err = fmt.Errorf("mvcc: closing iterator: %w", cerr)
	}
}

// Entry is one stored version, as DecodeEntry splits it.
type Entry struct {
	Key     []byte        // the user key
	Version hlc.Timestamp // the version
	Live    bool          // false for a deletion
	Created hlc.Timestamp // the version that created the key (live only)
	Value   []byte        // the user value (live only)
	Lease   uint64        // the lease the value is attached to (0: none)
}

// DecodeEntry splits an engine key and value of the keyspace, for callers
// that walk the engine themselves (a reverse scan): the user key is
// appended to dst (nil: a new slice) and Value aliases value.
func (ks Keyspace) DecodeEntry(dst, engineKey, value []byte) (Entry, error) {
	if !bytes.HasPrefix(engineKey, ks.Prefix) {
		return Entry{}, fmt.Errorf("mvcc: engine key %x outside the keyspace %x", engineKey, ks.Prefix)
	}
	key, ts, err := DecodeKey(dst, engineKey[len(ks.Prefix):])
	if err != nil {
		return Entry{}, fmt.Errorf("engine key %x: %w", engineKey, err)
	}
	sv, err := decodeValue(value)
	if err != nil {
		return Entry{}, fmt.Errorf("engine key %x: %w", engineKey, err)
	}
	return Entry{Key: key, Version: ts, Live: sv.live, Created: sv.created, Value: sv.value, Lease: sv.lease}, nil
}

// VersionFloor returns the storage.IterOptions.VersionFloor of a read at
// ts: an iterator with it yields each key's newest version at or below ts.
func VersionFloor(ts hlc.Timestamp) []byte { return appendSuffix(nil, ts) }
