package mvcc

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/storage"
)

// TestPointReadsUseTheFilter checks that Get, GetMany and the Writer's
// read of a key's newest version are answered by the tables' Bloom
// filters when the key is absent (the filter-negative counter moves by
// nearly one per read), and that the answers are right for present keys.
func TestPointReadsUseTheFilter(t *testing.T) {
	db, err := storage.Open(filepath.Join(t.TempDir(), "db"), &storage.Options{
		SplitVersionSuffix: true, VersionedKeyPrefix: testKeyspace.Prefix,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const n = 200
	key := func(i int) []byte { return []byte(fmt.Sprintf("key%05d", i)) }
	for v := int64(1); v <= 3; v++ {
		if err := apply(t, db, func(w *Writer) error {
			for i := 0; i < 2*n; i += 2 {
				if err := w.Put(key(i), ts(10*v), []byte{byte(v)}); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	useful := func() uint64 {
		s, err := db.Stats()
		if err != nil {
			t.Fatal(err)
		}
		return s.BloomFilterUseful
	}

	before := useful()
	for i := 1; i < 2*n-1; i += 2 {
		if _, found, err := testKeyspace.Get(db, key(i), hlc.MaxTimestamp); err != nil || found {
			t.Fatalf("Get(absent %d) = %v, %v", i, found, err)
		}
	}
	if got := useful() - before; got < (n-1)*9/10 {
		t.Errorf("Get: the filter answered %d of %d reads of absent keys", got, n-1)
	}

	var many [][]byte
	for i := 0; i < 2*n-1; i++ {
		many = append(many, key(i))
	}
	before = useful()
	kvs, found, err := testKeyspace.GetMany(db, many, ts(25))
	if err != nil {
		t.Fatal(err)
	}
	for i := range many {
		if found[i] != (i%2 == 0) {
			t.Fatalf("GetMany: key %d found %v", i, found[i])
		}
		if found[i] && (kvs[i].Version != ts(20) || kvs[i].Created != ts(10) || string(kvs[i].Key) != string(key(i)) || kvs[i].Value[0] != 2) {
			t.Fatalf("GetMany: key %d = %+v", i, kvs[i])
		}
	}
	if got := useful() - before; got < (n-1)*9/10 {
		t.Errorf("GetMany: the filter answered %d of %d reads of absent keys", got, n-1)
	}

	// Writes of new keys check for versions through the filter too.
	before = useful()
	if err := apply(t, db, func(w *Writer) error {
		for i := 1; i < 2*n-1; i += 2 {
			if err := w.Put(key(i), ts(40), []byte{4}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := useful() - before; got < (n-1)*9/10 {
		t.Errorf("Writer: the filter answered %d of %d reads of new keys", got, n-1)
	}
}

// TestPointReadsWithoutSplitVersionSuffix: on a database whose filters do
// not split versions (opened without SplitVersionSuffix, or over another
// prefix), Get and GetMany read through iterators and give the same
// answers.
func TestPointReadsWithoutSplitVersionSuffix(t *testing.T) {
	for _, opts := range []*storage.Options{
		nil,
		{SplitVersionSuffix: true, VersionedKeyPrefix: []byte{0x09}},
	} {
		db, err := storage.Open(filepath.Join(t.TempDir(), "db"), opts)
		if err != nil {
			t.Fatal(err)
		}
		for v := int64(1); v <= 2; v++ {
			if err := apply(t, db, func(w *Writer) error {
				return w.Put([]byte("a"), ts(10*v), []byte{byte(v)})
			}); err != nil {
				t.Fatal(err)
			}
		}
		if kv, found := mustGet(t, db, "a", ts(15)); !found || kv.Version != ts(10) || kv.Value[0] != 1 {
			t.Errorf("%+v: Get(a@15) = %+v, %v", opts, kv, found)
		}
		kvs, found, err := testKeyspace.GetMany(db, [][]byte{[]byte("b"), []byte("a")}, ts(25))
		if err != nil || found[0] || !found[1] || kvs[1].Version != ts(20) {
			t.Errorf("%+v: GetMany = %+v, %v, %v", opts, kvs, found, err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
