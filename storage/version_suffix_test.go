package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
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
