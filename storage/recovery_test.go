package storage

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// corruptWAL flips one byte a quarter of the way into the database's only
// WAL file and returns the file's name.
func corruptWAL(t *testing.T, dir string) string {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(logs) != 1 {
		t.Fatalf("WAL files in %s: %v, %v", dir, logs, err)
	}
	b, err := os.ReadFile(logs[0])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/4] ^= 0xff
	if err := os.WriteFile(logs[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	return filepath.Base(logs[0])
}

// TestCorruptWALIsReportedNotSwallowed: damage in the middle of the WAL,
// with valid records after it, fails Open with ErrCorruption naming the
// file under the default recovery mode, and PointInTime recovers the
// writes before the damage. (The WAL spans several 32 KiB blocks, and the
// damage is in an early one.)
func TestCorruptWALIsReportedNotSwallowed(t *testing.T) {
	db := openTestDB(t, nil)
	dir := db.Dir()
	const n = 200
	value := make([]byte, 1000)
	for i := 0; i < n; i++ {
		if err := db.Put(key(i), value, Sync); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	name := corruptWAL(t, dir)

	_, err := Open(dir, nil)
	if !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), name) {
		t.Fatalf("Open of a damaged WAL = %v, want ErrCorruption naming %s", err, name)
	}
	db, err = Open(dir, &Options{WALRecovery: PointInTime})
	if err != nil {
		t.Fatalf("Open with PointInTime: %v", err)
	}
	defer db.Close()
	// A prefix of the writes survives, in order, and nothing else.
	survived := 0
	for ; survived < n; survived++ {
		if _, err := db.Get(key(survived)); err != nil {
			break
		}
	}
	if survived == 0 || survived == n {
		t.Fatalf("PointInTime kept %d of %d writes; want a proper prefix", survived, n)
	}
	for i := survived; i < n; i++ {
		if _, err := db.Get(key(i)); !errors.Is(err, ErrNotFound) {
			t.Fatalf("write %d after the damage survived (%v), but %d before it did not", i, err, survived)
		}
	}
}
