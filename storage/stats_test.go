package storage

import (
	"errors"
	"path/filepath"
	"testing"
)

func TestStatsCountWrites(t *testing.T) {
	db := openTestDB(t, nil)
	before, err := db.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if len(before.LevelFiles) == 0 || len(before.LevelFiles) != len(before.LevelBytes) {
		t.Fatalf("levels: %d files, %d bytes", len(before.LevelFiles), len(before.LevelBytes))
	}
	if before.BackgroundError != nil {
		t.Fatalf("fresh database has a background error: %v", before.BackgroundError)
	}
	fill(t, db, 500)
	if err := db.Put([]byte("synced"), []byte("v"), Sync); err != nil {
		t.Fatal(err)
	}
	after, err := db.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if got := after.UserKeysWritten - before.UserKeysWritten; got != 501 {
		t.Errorf("UserKeysWritten grew by %d, want 501", got)
	}
	if after.UserBytesWritten <= before.UserBytesWritten || after.WALBytesWritten <= before.WALBytesWritten {
		t.Errorf("byte counters did not grow: %+v", after)
	}
	if after.WALSyncs == before.WALSyncs {
		t.Error("a synced write did not count a WAL sync")
	}
	if after.LastSequence < before.LastSequence+501 {
		t.Errorf("LastSequence %d -> %d", before.LastSequence, after.LastSequence)
	}
	if wa := after.WriteAmplification(); wa < 1 {
		t.Errorf("write amplification %.2f < 1: the WAL alone writes every user byte", wa)
	}
	if _, ok := db.Property("shale.stats"); !ok {
		t.Error(`Property("shale.stats") unknown`)
	}
	if v, ok := db.Property("no.such.property"); ok {
		t.Errorf("unknown property returned %q", v)
	}
}

func TestWriteAmplificationArithmetic(t *testing.T) {
	s := Stats{UserBytesWritten: 100, WALBytesWritten: 110, FlushBytesWritten: 90, CompactionBytesWritten: 300}
	if wa := s.WriteAmplification(); wa != 5 {
		t.Fatalf("WriteAmplification = %v, want 5", wa)
	}
	if wa := (&Stats{}).WriteAmplification(); wa != 0 {
		t.Fatalf("WriteAmplification with no writes = %v", wa)
	}
}

// skipIfNotSupported skips a test of an engine feature that arrives with a
// later engine milestone, saying so.
func skipIfNotSupported(t *testing.T, err error) {
	t.Helper()
	if errors.Is(err, ErrNotSupported) {
		t.Skipf("engine does not support this yet: %v", err)
	}
}

func TestFlushCompactAndApproximateSize(t *testing.T) {
	db := openTestDB(t, nil)
	fill(t, db, 5000)
	err := db.Flush()
	skipIfNotSupported(t, err)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.CompactRange(nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := db.WaitForCompaction(); err != nil {
		t.Fatal(err)
	}
	st, err := db.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.FlushCount == 0 || st.LiveSSTBytes == 0 {
		t.Fatalf("after Flush: %d flushes, %d SST bytes", st.FlushCount, st.LiveSSTBytes)
	}
	all, _, err := db.ApproximateSize(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	half, _, err := db.ApproximateSize(key(0), key(2500))
	if err != nil {
		t.Fatal(err)
	}
	if all == 0 || half == 0 || half >= all {
		t.Fatalf("ApproximateSize: all %d, half %d", all, half)
	}
	// Data read back from SSTs.
	if v, err := db.Get(key(4321)); err != nil || string(v) != "v4321" {
		t.Fatalf("Get after compaction = %q, %v", v, err)
	}
}

func TestSSTWriterIngestCheckpoint(t *testing.T) {
	db := openTestDB(t, nil)
	mustPut(t, db, "a0", "old")
	mustPut(t, db, "b5", "hidden by the file's tombstone")
	path := filepath.Join(t.TempDir(), "ingest.sst")
	w, err := NewSSTWriter(path, nil)
	skipIfNotSupported(t, err)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.DeleteRange([]byte("b"), []byte("c")); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		if err := w.Put([]byte{'b', byte('0' + i/10), byte('0' + i%10)}, []byte("sst")); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Put([]byte("a"), []byte("out of order")); err == nil {
		t.Fatal("SSTWriter accepted a key out of order")
	}
	size, err := w.Finish()
	if err != nil || size == 0 {
		t.Fatalf("Finish = %d, %v", size, err)
	}
	if err := w.Put([]byte("z"), nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Put after Finish = %v", err)
	}
	if err := db.Ingest(path); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"a0": "old", "b00": "sst", "b99": "sst"} {
		if v, err := db.Get([]byte(k)); err != nil || string(v) != want {
			t.Errorf("after Ingest Get(%s) = %q, %v", k, v, err)
		}
	}
	if _, err := db.Get([]byte("b5")); !errors.Is(err, ErrNotFound) {
		t.Errorf("the file's range tombstone did not hide b5: %v", err)
	}
	cp := filepath.Join(t.TempDir(), "checkpoint")
	if err := db.Checkpoint(cp); err != nil {
		t.Fatal(err)
	}
	mustPut(t, db, "after", "checkpoint")
	cdb, err := Open(cp, &Options{ErrorIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cdb.Close()
	if v, err := cdb.Get([]byte("b42")); err != nil || string(v) != "sst" {
		t.Errorf("checkpoint Get(b42) = %q, %v", v, err)
	}
	if _, err := cdb.Get([]byte("after")); !errors.Is(err, ErrNotFound) {
		t.Errorf("checkpoint sees a later write: %v", err)
	}
}
