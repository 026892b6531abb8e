package storage

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

// seekPrefixKey is key i's unversioned part in these tests: terminated
// like mvcc's escaped keys, so that no unversioned part is a prefix of
// another.
func seekPrefixKey(i int) string { return fmt.Sprintf("key%04d\x00\x01", i) }

func openVersionedDB(t testing.TB) *DB {
	return openTestDB(t, &Options{SplitVersionSuffix: true, VersionedKeyPrefix: []byte{0x03}})
}

// TestSeekPrefixGEFindsTheNewestVersionAtOrBelow reads versions 10, 20 and
// 30 of each key from the memtable and then from an SST.
func TestSeekPrefixGEFindsTheNewestVersionAtOrBelow(t *testing.T) {
	db := openVersionedDB(t)
	for i := 0; i < 20; i++ {
		for v := uint64(10); v <= 30; v += 10 {
			if err := db.Put(versionedKey(seekPrefixKey(i), v), []byte{byte(v)}, NoSync); err != nil {
				t.Fatal(err)
			}
		}
	}
	cases := []struct {
		at, want uint64 // want 0: not found
	}{{99, 30}, {30, 30}, {29, 20}, {11, 10}, {10, 10}, {9, 0}}
	for _, where := range []string{"memtable", "sst"} {
		if where == "sst" {
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		for i := 0; i < 20; i++ {
			for _, c := range cases {
				k, v, found, err := db.SeekPrefixGE(versionedKey(seekPrefixKey(i), c.at))
				if err != nil {
					t.Fatalf("%s: SeekPrefixGE(%d@%d): %v", where, i, c.at, err)
				}
				if c.want == 0 {
					if found || k != nil || v != nil {
						t.Fatalf("%s: SeekPrefixGE(%d@%d) = %x, %x, %v; want nothing", where, i, c.at, k, v, found)
					}
					continue
				}
				if !found || !bytes.Equal(k, versionedKey(seekPrefixKey(i), c.want)) || !bytes.Equal(v, []byte{byte(c.want)}) {
					t.Fatalf("%s: SeekPrefixGE(%d@%d) = %x, %x, %v; want version %d", where, i, c.at, k, v, found, c.want)
				}
			}
		}
		// A key with no versions at all.
		if _, _, found, err := db.SeekPrefixGE(versionedKey(seekPrefixKey(1000), 99)); err != nil || found {
			t.Fatalf("%s: SeekPrefixGE(absent) = %v, %v", where, found, err)
		}
	}
}

// TestSeekPrefixGEAbsentKeysAreAnsweredByTheFilter checks the point of the
// call: reads of absent keys are answered by the tables' filters (no data
// block read), where an iterator's seek reads a block of each table.
func TestSeekPrefixGEAbsentKeysAreAnsweredByTheFilter(t *testing.T) {
	db := openVersionedDB(t)
	const n = 300
	for i := 0; i < 2*n; i += 2 {
		if err := db.Put(versionedKey(seekPrefixKey(i), 10), make([]byte, 100), NoSync); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	stats := func() Stats {
		s, err := db.Stats()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	var targets [][]byte
	for i := 1; i < 2*n; i += 2 {
		targets = append(targets, versionedKey(seekPrefixKey(i), 99))
	}
	before := stats()
	keys, values, err := db.MultiSeekPrefixGE(targets)
	if err != nil {
		t.Fatal(err)
	}
	after := stats()
	for i := range targets {
		if keys[i] != nil || values[i] != nil {
			t.Fatalf("absent target %d found %x", i, keys[i])
		}
	}
	checked := after.BloomFilterChecked - before.BloomFilterChecked
	useful := after.BloomFilterUseful - before.BloomFilterUseful
	// Every target but the last (past the table's last key) meets the
	// table.
	if checked != n-1 || useful < n*9/10 {
		t.Errorf("filter checked %d, useful %d, for %d absent keys; want %d and nearly all", checked, useful, n, n-1)
	}
	blocks := (after.BlockCacheHits + after.BlockCacheMisses) - (before.BlockCacheHits + before.BlockCacheMisses)
	if blocks > 2*(checked-useful) {
		t.Errorf("%d block reads for %d filter false positives", blocks, checked-useful)
	}
}

// TestMultiSeekPrefixGEMatchesAnIterator compares many reads, in random
// order with repeats, against iterator seeks over histories with
// deletions, range deletions, flushes and compactions, at the latest state
// and at a snapshot.
func TestMultiSeekPrefixGEMatchesAnIterator(t *testing.T) {
	db := openTestDB(t, &Options{SplitVersionSuffix: true, VersionedKeyPrefix: []byte{0x03},
		WriteBufferSize: 64 << 10})
	rng := rand.New(rand.NewPCG(7, 11))
	const keys = 200
	var snap *Snapshot
	for round := 0; round < 4; round++ {
		for op := 0; op < 4000; op++ {
			k := seekPrefixKey(rng.IntN(keys))
			v := 1 + rng.Uint64N(40)
			var err error
			switch rng.IntN(12) {
			case 0:
				err = db.Delete(versionedKey(k, v), NoSync)
			case 1:
				var b Batch
				b.DeleteRange(versionedKey(k, 1+rng.Uint64N(40)), versionedKey(k, 0))
				err = db.Write(&b, NoSync)
			default:
				err = db.Put(versionedKey(k, v), []byte(fmt.Sprintf("%d/%d", round, op)), NoSync)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if round == 1 {
			var err error
			if snap, err = db.NewSnapshot(); err != nil {
				t.Fatal(err)
			}
			defer snap.Close()
		}
		if round == 2 {
			if err := db.CompactRange(nil, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(name string, r interface {
		NewIter(*IterOptions) (*Iterator, error)
		MultiSeekPrefixGE([][]byte) ([][]byte, [][]byte, error)
	}) {
		targets := make([][]byte, 500)
		for i := range targets {
			targets[i] = versionedKey(seekPrefixKey(rng.IntN(keys+10)), 1+rng.Uint64N(45))
		}
		gotKeys, gotValues, err := r.MultiSeekPrefixGE(targets)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		it, err := r.NewIter(nil)
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		for i, target := range targets {
			prefix := target[:len(target)-13]
			var wantKey, wantValue []byte
			if it.SeekGE(target) && bytes.HasPrefix(it.UnsafeKey(), prefix) {
				wantKey, wantValue = it.Key(), it.Value()
			}
			if !bytes.Equal(gotKeys[i], wantKey) || !bytes.Equal(gotValues[i], wantValue) || (gotKeys[i] == nil) != (wantKey == nil) {
				t.Fatalf("%s: target %d (%x): got %x=%q, iterator %x=%q", name, i, target, gotKeys[i], gotValues[i], wantKey, wantValue)
			}
		}
		if err := it.Error(); err != nil {
			t.Fatal(err)
		}
	}
	check("latest", db)
	check("snapshot", snap)
}

// TestSeekPrefixGEBadInput: targets that are not versioned keys, and a
// database without SplitVersionSuffix, fail clearly.
func TestSeekPrefixGEBadInput(t *testing.T) {
	db := openVersionedDB(t)
	for _, target := range [][]byte{{}, {0x03}, []byte("\x01raft"), []byte("\x03k\x00")} {
		if _, _, _, err := db.SeekPrefixGE(target); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("SeekPrefixGE(%x) = %v, want ErrInvalidArgument", target, err)
		}
	}
	if _, _, err := db.MultiSeekPrefixGE([][]byte{versionedKey("a", 1), []byte("\x01raft")}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("MultiSeekPrefixGE with one bad target = %v, want ErrInvalidArgument", err)
	}
	if keys, values, err := db.MultiSeekPrefixGE(nil); err != nil || len(keys) != 0 || len(values) != 0 {
		t.Errorf("MultiSeekPrefixGE(nil) = %v, %v, %v", keys, values, err)
	}

	plain := openTestDB(t, nil)
	if _, _, _, err := plain.SeekPrefixGE(versionedKey("a", 1)); !errors.Is(err, ErrNotSupported) {
		t.Errorf("SeekPrefixGE without SplitVersionSuffix = %v, want ErrNotSupported", err)
	}

	snap, err := db.NewSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := snap.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := snap.SeekPrefixGE(versionedKey("a", 1)); !errors.Is(err, ErrClosed) {
		t.Errorf("SeekPrefixGE on a closed snapshot = %v, want ErrClosed", err)
	}
}

// TestMultiSeekPrefixGELargeEntries reads entries far larger than the
// first attempt's buffer: the call retries under a snapshot and returns
// every entry whole.
func TestMultiSeekPrefixGELargeEntries(t *testing.T) {
	db := openVersionedDB(t)
	var targets [][]byte
	for i := 0; i < 10; i++ {
		v := bytes.Repeat([]byte{byte('a' + i)}, 10000*(i+1))
		if err := db.Put(versionedKey(seekPrefixKey(i), 5), v, NoSync); err != nil {
			t.Fatal(err)
		}
		targets = append(targets, versionedKey(seekPrefixKey(i), 9))
	}
	keys, values, err := db.MultiSeekPrefixGE(targets)
	if err != nil {
		t.Fatal(err)
	}
	for i := range targets {
		if !bytes.Equal(keys[i], versionedKey(seekPrefixKey(i), 5)) || len(values[i]) != 10000*(i+1) || values[i][0] != byte('a'+i) {
			t.Fatalf("entry %d: key %x, %d value bytes", i, keys[i], len(values[i]))
		}
	}
}

// TestSeekPrefixGEEntriesOfEverySize reads entries below, at and above
// the size read on the stack (seekPrefixOneStack), small and large ones
// in turn so that the size estimate swings: every result is whole, its
// own (kept across later reads), and capped (appending to the key does
// not overwrite the value).
func TestSeekPrefixGEEntriesOfEverySize(t *testing.T) {
	db := openVersionedDB(t)
	sizes := []int{0, 1, 100, seekPrefixOneStack - 40, seekPrefixOneStack, seekPrefixOneStack + 1, 5000, 3, 20000, 10}
	for i, n := range sizes {
		if err := db.Put(versionedKey(seekPrefixKey(i), 5), bytes.Repeat([]byte{byte('a' + i)}, n), NoSync); err != nil {
			t.Fatal(err)
		}
	}
	var keys, values [][]byte
	for round := 0; round < 2; round++ {
		for i := range sizes {
			k, v, found, err := db.SeekPrefixGE(versionedKey(seekPrefixKey(i), 9))
			if err != nil || !found {
				t.Fatalf("SeekPrefixGE(%d) = %v, %v", i, found, err)
			}
			_ = append(k, 'x')
			keys, values = append(keys, k), append(values, v)
		}
	}
	for j := range keys {
		i := j % len(sizes)
		if !bytes.Equal(keys[j], versionedKey(seekPrefixKey(i), 5)) || !bytes.Equal(values[j], bytes.Repeat([]byte{byte('a' + i)}, sizes[i])) {
			t.Fatalf("read %d (entry %d): key %x, value of %d bytes %.8q", j, i, keys[j], len(values[j]), values[j])
		}
	}
}
