package storage

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"
)

// openTestDB opens a fresh database in a temporary directory and closes it
// when the test ends.
func openTestDB(t testing.TB, opts *Options) *DB {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "db")
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() {
		// A test that closed the DB itself gets ErrClosed here.
		if err := db.Close(); err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("Close: %v", err)
		}
	})
	return db
}

// reopen closes db and opens its directory again.
func reopen(t testing.TB, db *DB, opts *Options) *DB {
	t.Helper()
	if err := db.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	db2, err := Open(db.Dir(), opts)
	if err != nil {
		t.Fatalf("reopen %s: %v", db.Dir(), err)
	}
	t.Cleanup(func() {
		if err := db2.Close(); err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("Close: %v", err)
		}
	})
	return db2
}

func key(i int) []byte { return []byte(fmt.Sprintf("key%08d", i)) }

func mustPut(t testing.TB, db *DB, k, v string) {
	t.Helper()
	if err := db.Put([]byte(k), []byte(v), NoSync); err != nil {
		t.Fatalf("Put(%q): %v", k, err)
	}
}
