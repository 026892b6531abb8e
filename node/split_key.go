package node

import (
	"bytes"
	"math/big"

	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/storage"
)

// Where a range that outgrew --split-size splits.
//
// The key that halves a range's bytes on disk is found from the engine's
// size estimate (ApproximateSize: file sizes and table index offsets,
// no data read): a bisection over the key space between the range's
// first and last keys, then one seek to the first real key at or after
// the point found. It used to be found by counting: iterating over half
// of the range's keys, about 500,000 for a 16 MiB range of small values,
// which in a 10-million-key load took 9% of all the nodes' CPU.

// splitKeyRounds bounds the bisection: each round halves the key
// interval, and the estimate's granularity (a table block) is reached
// long before.
const splitKeyRounds = 48

// sizeMiddleKey returns the user key at which span's bytes on disk, size
// of them by the engine's estimate, are divided about in half, or nil if
// span has no such key (fewer than two user keys, or nothing on disk).
// span is a span of the versioned user keyspace (keys.UserSpan).
func sizeMiddleKey(db *storage.DB, sp keys.Span, size uint64) ([]byte, error) {
	it, err := db.NewIter(&storage.IterOptions{LowerBound: sp.Start, UpperBound: sp.End, KeysOnly: true})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	if !it.First() {
		return nil, it.Error()
	}
	first := bytes.Clone(it.UnsafeKey())
	if !it.Last() {
		return nil, it.Error()
	}
	lo, hi := first, bytes.Clone(it.UnsafeKey())
	if bytes.Compare(lo, hi) >= 0 {
		return nil, nil
	}
	// Bisect: lo is below the halfway point, hi at or above it (or
	// within 1% of it).
	half := size / 2
	slack := size / 100
	for i := 0; i < splitKeyRounds; i++ {
		mid := keyBetween(lo, hi)
		if mid == nil {
			break
		}
		below, _, err := db.ApproximateSize(sp.Start, mid)
		if err != nil {
			return nil, err
		}
		if below+slack >= half && below <= half+slack {
			hi = mid // close enough
			break
		}
		if below < half {
			lo = mid
		} else {
			hi = mid
		}
	}
	// The user key of the first real key at or after hi: a split there
	// puts all of that key's versions in the right half, so it never
	// falls between two versions of one key. At the first user key, the
	// split would leave the left half empty: take the next one.
	firstKey, err := keys.DecodeUserKey(first)
	if err != nil {
		return nil, err
	}
	for ok := it.SeekGE(hi); ok; ok = it.Next() {
		k, err := keys.DecodeUserKey(it.UnsafeKey())
		if err != nil {
			return nil, err
		}
		if !bytes.Equal(k, firstKey) {
			return k, nil
		}
	}
	return nil, it.Error()
}

// keyBetween returns a key strictly between a and b (a < b), about
// halfway in the order of keys read as base-256 fractions, or nil if
// there is none at one byte more than the longer of them.
func keyBetween(a, b []byte) []byte {
	n := max(len(a), len(b)) + 1
	pad := func(k []byte) *big.Int {
		p := make([]byte, n)
		copy(p, k)
		return new(big.Int).SetBytes(p)
	}
	sum := new(big.Int).Add(pad(a), pad(b))
	raw := sum.Rsh(sum, 1).Bytes()
	mid := make([]byte, n)
	copy(mid[n-len(raw):], raw)
	// Trailing zero bytes are padding, unless dropping them falls back
	// to a (whose own trailing zeros are significant).
	trimmed := bytes.TrimRight(mid, "\x00")
	if bytes.Compare(trimmed, a) > 0 {
		mid = trimmed
	}
	if bytes.Compare(mid, a) <= 0 || bytes.Compare(mid, b) >= 0 {
		return nil
	}
	return mid
}
