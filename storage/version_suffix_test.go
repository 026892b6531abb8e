package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"testing"
)

// versionedKey builds a key the way the mvcc package lays one out: the
// user-key prefix 0x03, the key, a 12-byte version and the suffix length
// byte (13).
func versionedKey(key string, version uint64) []byte {
	k := append([]byte{0x03}, key...)
	k = binary.BigEndian.AppendUint64(k, ^version)
	k = binary.BigEndian.AppendUint32(k, 0)
	return append(k, 13)
}

// TestSplitVersionSuffixFiltersOnTheUnversionedKey checks that with
// SplitVersionSuffix a point read of any version of an absent key is
// answered by the filter, and that another version of a present key never
// is (the filter was built on the key without its version). Present keys
// are the even ones, absent the odd ones, so that every probe falls inside
// the table's key range and reaches its filter.
func TestSplitVersionSuffixFiltersOnTheUnversionedKey(t *testing.T) {
	db := openTestDB(t, &Options{SplitVersionSuffix: true, VersionedKeyPrefix: []byte{0x03}})
	const n = 200
	key := func(i int) string { return fmt.Sprintf("key%04d", i) }
	for i := 0; i < 2*n; i += 2 {
		for v := uint64(10); v <= 30; v += 10 {
			if err := db.Put(versionedKey(key(i), v), []byte{byte(v)}, NoSync); err != nil {
				t.Fatal(err)
			}
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

	before := stats()
	for i := 0; i < 2*n; i += 2 {
		if v, err := db.Get(versionedKey(key(i), 20)); err != nil || len(v) != 1 || v[0] != 20 {
			t.Fatalf("Get(%s@20) = %v, %v", key(i), v, err)
		}
		// A version between two that exist.
		if _, err := db.Get(versionedKey(key(i), 15)); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get(%s@15) = %v, want ErrNotFound", key(i), err)
		}
	}
	mid := stats()
	if got := mid.BloomFilterUseful - before.BloomFilterUseful; got != 0 {
		t.Errorf("the filter answered %d reads of present keys; want 0", got)
	}
	if got := mid.BloomFilterChecked - before.BloomFilterChecked; got != 2*n {
		t.Errorf("filter checked %d times, want %d", got, 2*n)
	}

	for i := 1; i < 2*n-1; i += 2 {
		if _, err := db.Get(versionedKey(key(i), 20)); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get(%s@20) = %v, want ErrNotFound", key(i), err)
		}
	}
	end := stats()
	if got := end.BloomFilterChecked - mid.BloomFilterChecked; got != n-1 {
		t.Errorf("filter checked %d times, want %d", got, n-1)
	}
	if got := end.BloomFilterUseful - mid.BloomFilterUseful; got < (n-1)*9/10 {
		t.Errorf("the filter answered %d of %d reads of absent keys; want nearly all", got, n-1)
	}
}

func TestVersionedKeyPrefixValidation(t *testing.T) {
	dir := t.TempDir()
	for _, bad := range []Options{
		{SplitVersionSuffix: true, VersionedKeyPrefix: make([]byte, MaxVersionedKeyPrefix+1)},
		{VersionedKeyPrefix: []byte{0x03}},
	} {
		if _, err := Open(dir, &bad); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("Open(%+v) = %v, want ErrInvalidArgument", bad, err)
		}
	}
}

// TestVersionFloor: an iterator with a VersionFloor yields each key's first
// version at or above the floor (its newest at or below the read version),
// across window refills and seeks; it reads forward only, and needs
// SplitVersionSuffix.
func TestVersionFloor(t *testing.T) {
	db := openTestDB(t, &Options{SplitVersionSuffix: true, VersionedKeyPrefix: []byte{0x03}})
	var want []string
	const floorTS = 50
	for i := 0; i < 300; i++ {
		k := fmt.Sprintf("key%04d", i)
		n := uint64(i % 70) // versions 1..n
		for v := uint64(1); v <= n; v++ {
			if err := db.Put(versionedKey(k, v), []byte("v"), NoSync); err != nil {
				t.Fatal(err)
			}
		}
		if n > 0 {
			want = append(want, string(versionedKey(k, min(n, floorTS))))
		}
	}
	floor := versionedKey("", floorTS)[1:] // the suffix alone
	it, err := db.NewIter(&IterOptions{VersionFloor: floor})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var got []string
	for ok := it.First(); ok; ok = it.Next() {
		got = append(got, string(it.Key()))
	}
	if err := it.Error(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %d entries, want %d; first difference at %d", len(got), len(want), firstDiff(got, want))
	}
	// A seek to a key lands on its visible version.
	if !it.SeekGE([]byte(want[100][:8])) || string(it.Key()) != want[100] {
		t.Fatalf("SeekGE(%q) = %q, want %q", want[100][:8], it.Key(), want[100])
	}
	if it.Prev() || !errors.Is(it.Error(), ErrInvalidArgument) {
		t.Fatalf("Prev with a floor: %v", it.Error())
	}

	plain := openTestDB(t, nil)
	if _, err := plain.NewIter(&IterOptions{VersionFloor: floor}); !errors.Is(err, ErrNotSupported) {
		t.Fatalf("NewIter with a floor on a database without SplitVersionSuffix = %v", err)
	}
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
