package mvcc

import (
	"errors"
	"fmt"
	"testing"

	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/storage"
)

func ts(wall int64) hlc.Timestamp { return hlc.Timestamp{WallTime: wall} }

// apply runs f with a Writer over db, writes its batch, and checks that
// the Writer's Stats delta is the change ComputeStats sees.
func apply(t *testing.T, db *storage.DB, f func(w *Writer) error) error {
	t.Helper()
	before, err := testKeyspace.ComputeStats(db, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := storage.NewBatch(0)
	w := testKeyspace.NewWriter(db, b)
	if err := f(w); err != nil {
		return err
	}
	if err := db.Write(b, storage.NoSync); err != nil {
		t.Fatal(err)
	}
	after, err := testKeyspace.ComputeStats(db, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	sum := before
	if sum.Add(w.Delta()); sum != after {
		t.Fatalf("stats %+v before the batch plus its delta %+v != %+v after", before, w.Delta(), after)
	}
	return nil
}

func mustGet(t *testing.T, db *storage.DB, key string, at hlc.Timestamp) (KeyValue, bool) {
	t.Helper()
	kv, found, err := testKeyspace.Get(db, []byte(key), at)
	if err != nil {
		t.Fatal(err)
	}
	return kv, found
}

func TestCreatedVersionFollowsDeletions(t *testing.T) {
	db := openModelDB(t)
	steps := []func(w *Writer) error{
		func(w *Writer) error { return w.Put([]byte("k"), ts(10), []byte("a")) },
		func(w *Writer) error { return w.Put([]byte("k"), ts(20), []byte("b")) },
		func(w *Writer) error { _, err := w.Delete([]byte("k"), ts(30)); return err },
		func(w *Writer) error { return w.Put([]byte("k"), ts(40), []byte("c")) },
	}
	for _, s := range steps {
		if err := apply(t, db, s); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		at             int64
		found          bool
		value          string
		version, creat int64
	}{
		{5, false, "", 0, 0},
		{10, true, "a", 10, 10},
		{25, true, "b", 20, 10},
		{30, false, "", 0, 0},
		{45, true, "c", 40, 40},
	} {
		kv, found := mustGet(t, db, "k", ts(c.at))
		if found != c.found || (found && (string(kv.Value) != c.value || kv.Version != ts(c.version) || kv.Created != ts(c.creat))) {
			t.Errorf("Get(k@%d) = %q v%s c%s %v, want %q v%d c%d %v", c.at, kv.Value, kv.Version, kv.Created, found, c.value, c.version, c.creat, c.found)
		}
	}
}

func TestWriteTooOld(t *testing.T) {
	db := openModelDB(t)
	if err := apply(t, db, func(w *Writer) error { return w.Put([]byte("k"), ts(10), []byte("a")) }); err != nil {
		t.Fatal(err)
	}
	for _, at := range []int64{5, 10} {
		err := apply(t, db, func(w *Writer) error { return w.Put([]byte("k"), ts(at), []byte("x")) })
		var wto *WriteTooOldError
		if !errors.As(err, &wto) || !errors.Is(err, ErrWriteTooOld) || wto.Existing != ts(10) || wto.Timestamp != ts(at) || string(wto.Key) != "k" {
			t.Fatalf("Put at %d over a version at 10 = %v", at, err)
		}
		if _, err := testKeyspace.NewWriter(db, storage.NewBatch(0)).Delete([]byte("k"), ts(at)); !errors.Is(err, ErrWriteTooOld) {
			t.Fatalf("Delete at %d over a version at 10 = %v", at, err)
		}
	}
	// Nothing changed.
	if kv, found := mustGet(t, db, "k", hlc.MaxTimestamp); !found || string(kv.Value) != "a" {
		t.Fatalf("after refused writes: %q %v", kv.Value, found)
	}
	for _, bad := range []hlc.Timestamp{{}, {WallTime: -1}, {WallTime: 1, Logical: -1}} {
		if err := testKeyspace.NewWriter(db, storage.NewBatch(0)).Put([]byte("z"), bad, nil); !errors.Is(err, ErrInvalidTimestamp) {
			t.Errorf("Put at %s = %v, want ErrInvalidTimestamp", bad, err)
		}
	}
}

// TestWritesInOneBatchSeeEachOther: several writes of one key in one batch
// at one timestamp: the last one is the version, with the created version
// batch semantics give.
func TestWritesInOneBatchSeeEachOther(t *testing.T) {
	db := openModelDB(t)
	if err := apply(t, db, func(w *Writer) error { return w.Put([]byte("old"), ts(10), []byte("a")) }); err != nil {
		t.Fatal(err)
	}
	err := apply(t, db, func(w *Writer) error {
		// A new key put twice: created at 20.
		if err := w.Put([]byte("new"), ts(20), []byte("1")); err != nil {
			return err
		}
		if err := w.Put([]byte("new"), ts(20), []byte("2")); err != nil {
			return err
		}
		// An old key put: keeps its creation at 10.
		if err := w.Put([]byte("old"), ts(20), []byte("b")); err != nil {
			return err
		}
		// Put then delete: gone.
		if err := w.Put([]byte("gone"), ts(20), []byte("x")); err != nil {
			return err
		}
		if deleted, err := w.Delete([]byte("gone"), ts(20)); err != nil || !deleted {
			t.Errorf("Delete after Put in the batch = %v, %v", deleted, err)
		}
		// Delete then put: created again at 20.
		if err := w.Put([]byte("again"), ts(20), []byte("y")); err != nil {
			return err
		}
		if _, err := w.Delete([]byte("again"), ts(20)); err != nil {
			return err
		}
		return w.Put([]byte("again"), ts(20), []byte("z"))
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		key, value string
		found      bool
		created    int64
	}{
		{"new", "2", true, 20},
		{"old", "b", true, 10},
		{"gone", "", false, 0},
		{"again", "z", true, 20},
	} {
		kv, found := mustGet(t, db, c.key, ts(20))
		if found != c.found || (found && (string(kv.Value) != c.value || kv.Created != ts(c.created))) {
			t.Errorf("%s: %q c%s %v, want %q c%d %v", c.key, kv.Value, kv.Created, found, c.value, c.created, c.found)
		}
	}
}

func TestDeleteOfAbsentKeyWritesNothing(t *testing.T) {
	db := openModelDB(t)
	b := storage.NewBatch(0)
	w := testKeyspace.NewWriter(db, b)
	if deleted, err := w.Delete([]byte("nothing"), ts(5)); err != nil || deleted {
		t.Fatalf("Delete of an absent key = %v, %v", deleted, err)
	}
	if n, err := w.DeleteRange(nil, nil, ts(5)); err != nil || n != 0 {
		t.Fatalf("DeleteRange of nothing = %d, %v", n, err)
	}
	if !b.Empty() {
		t.Fatalf("the batch holds %d records", b.Count())
	}
}

func TestReadsRejectBadInput(t *testing.T) {
	db := openModelDB(t)
	if _, _, err := testKeyspace.Scan(db, []byte("b"), []byte("a"), hlc.MaxTimestamp, ScanOptions{}); err == nil {
		t.Error("Scan with start above end succeeded")
	}
	if _, _, err := testKeyspace.Scan(db, nil, nil, hlc.MaxTimestamp, ScanOptions{Limit: -1}); err == nil {
		t.Error("Scan with a negative limit succeeded")
	}
	if _, err := testKeyspace.GC(db, storage.NewBatch(0), []byte("b"), []byte("a"), ts(1), GCOptions{}); err == nil {
		t.Error("GC with start above end succeeded")
	}
	// A key in the keyspace that is not a versioned key is corruption, not
	// a silently skipped entry.
	if err := db.Put([]byte("\x03bogus"), []byte("x"), storage.NoSync); err != nil {
		t.Fatal(err)
	}
	if _, _, err := testKeyspace.Scan(db, nil, nil, hlc.MaxTimestamp, ScanOptions{}); !errors.Is(err, ErrMalformedKey) {
		t.Errorf("Scan over a malformed key = %v, want ErrMalformedKey", err)
	}
	// A malformed value likewise.
	if err := db.Put(testKeyspace.engineKey(nil, []byte("v"), ts(1)), []byte{0x09}, storage.NoSync); err != nil {
		t.Fatal(err)
	}
	if _, _, err := testKeyspace.Get(db, []byte("v"), ts(1)); !errors.Is(err, ErrMalformedValue) {
		t.Errorf("Get of a malformed value = %v, want ErrMalformedValue", err)
	}
}

// A reset Writer is a new one over the new batch: it forgets the earlier
// batch's writes (a write at the same version is refused once they are
// in the engine, not taken for a replacement within the batch) and starts
// its delta at zero, and it allocates less per batch than a new Writer.
func TestWriterReset(t *testing.T) {
	db := openModelDB(t)
	b := storage.NewBatch(0)
	w := testKeyspace.NewWriter(db, b)
	if err := w.Put([]byte("k"), ts(10), []byte("a")); err != nil {
		t.Fatal(err)
	}
	if err := db.Write(b, storage.NoSync); err != nil {
		t.Fatal(err)
	}
	b2 := storage.NewBatch(0)
	w.Reset(db, b2)
	if d := w.Delta(); d != (Stats{}) {
		t.Fatalf("delta after Reset = %+v, want zero", d)
	}
	if err := w.Put([]byte("k"), ts(10), []byte("b")); !errors.Is(err, ErrWriteTooOld) {
		t.Fatalf("a put at the engine's version after Reset = %v, want ErrWriteTooOld", err)
	}
	if err := w.Put([]byte("k"), ts(20), []byte("b")); err != nil {
		t.Fatal(err)
	}
	if d := w.Delta(); d.Keys != 0 || d.Versions != 1 || d.LiveKeys != 0 {
		t.Fatalf("delta of a second version = %+v, want one version, no new key", d)
	}
	if err := db.Write(b2, storage.NoSync); err != nil {
		t.Fatal(err)
	}
	kv, found := mustGet(t, db, "k", ts(20))
	if !found || string(kv.Value) != "b" || kv.Created != ts(10) {
		t.Fatalf("k at 20 = %+v, %v; want b created at 10", kv, found)
	}

	value := make([]byte, 100)
	keys := make([][]byte, 16)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "round%02d", i)
	}
	at := int64(100)
	round := func(w *Writer) {
		at++
		for _, k := range keys {
			if err := w.Put(k, ts(at), value); err != nil {
				t.Fatal(err)
			}
		}
	}
	scratch := storage.NewBatch(1 << 16)
	fresh := testing.AllocsPerRun(20, func() {
		scratch.Reset()
		round(testKeyspace.NewWriter(db, scratch))
	})
	reused := testKeyspace.NewWriter(db, scratch)
	reset := testing.AllocsPerRun(20, func() {
		scratch.Reset()
		reused.Reset(db, scratch)
		round(reused)
	})
	if reset >= fresh {
		t.Fatalf("a round of %d puts allocates %.0f times with Reset, %.0f with a new Writer", len(keys), reset, fresh)
	}
	t.Logf("a round of %d puts: %.0f allocations with a new Writer, %.0f with Reset", len(keys), fresh, reset)
}
