package rangesm_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/rangesm"
	"github.com/shaledb/shale/storage"
)

// TestReaderPointReadsUseTheFilter: the range state machine's point reads
// (Reader.Get, Reader.MultiGet) go through the engine's versioned point
// read, whose Bloom filter is built on the user key without its version
// (docs/versions.md, "Versioned keys and Bloom filters"): reads of absent
// keys are answered by the filter, without reading a data block, however
// many versions the present keys hold.
func TestReaderPointReadsUseTheFilter(t *testing.T) {
	db, err := storage.Open(filepath.Join(t.TempDir(), "db"), keys.WithUserVersions(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const n = 200
	key := func(i int) []byte { return []byte(fmt.Sprintf("key%05d", i)) }
	for v := int64(1); v <= 3; v++ {
		b := storage.NewBatch(0)
		w := keys.UserKeyspace.NewWriter(db, b)
		for i := 0; i < 2*n; i += 2 {
			if err := w.Put(key(i), hlc.Timestamp{WallTime: 10 * v}, []byte{byte(v)}); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Write(b, storage.NoSync); err != nil {
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
	r := rangesm.NewReader(db)
	before := useful()
	var absent [][]byte
	for i := 1; i < 2*n; i += 2 {
		absent = append(absent, key(i))
		if _, found, err := r.Get(key(i), hlc.MaxTimestamp); err != nil || found {
			t.Fatalf("Get(absent %s) = %v, %v", key(i), found, err)
		}
	}
	if got := useful() - before; got < n*9/10 {
		t.Errorf("Reader.Get: the filter answered %d of %d reads of absent keys", got, n)
	}
	before = useful()
	if _, found, err := r.MultiGet(absent, hlc.Timestamp{WallTime: 25}); err != nil {
		t.Fatal(err)
	} else {
		for i, f := range found {
			if f {
				t.Fatalf("MultiGet: absent %s found", absent[i])
			}
		}
	}
	if got := useful() - before; got < n*9/10 {
		t.Errorf("Reader.MultiGet: the filter answered %d of %d reads of absent keys", got, n)
	}
	if kv, found, err := r.Get(key(4), hlc.Timestamp{WallTime: 25}); err != nil || !found || kv.Value[0] != 2 {
		t.Fatalf("Get(%s) at 25 = %+v, %v, %v", key(4), kv, found, err)
	}
}
