package mvcc

import (
	"testing"

	"github.com/shaledb/shale/hlc"
)

// TestDeleteIfLeased: the end of a lease deletes a key only while its
// newest version is that lease's; a later plain put, or a put attached to
// another lease, stays. Stats stay equal to a recount.
func TestDeleteIfLeased(t *testing.T) {
	db := openModelDB(t)
	put := func(key string, at int64, lease uint64) {
		t.Helper()
		if err := apply(t, db, func(w *Writer) error { return w.PutLeased([]byte(key), ts(at), []byte("v"), lease) }); err != nil {
			t.Fatal(err)
		}
	}
	put("a", 10, 7) // stays leased: deleted
	put("b", 10, 7) // then a plain put: kept
	put("b", 20, 0)
	put("c", 10, 7) // then another lease: kept
	put("c", 20, 8)
	if kv, found := mustGet(t, db, "a", hlc.MaxTimestamp); !found || kv.Lease != 7 {
		t.Fatalf("a: %+v %v, want lease 7", kv, found)
	}
	deleted := map[string]bool{}
	if err := apply(t, db, func(w *Writer) error {
		for _, k := range []string{"a", "b", "c", "absent"} {
			ok, err := w.DeleteIfLeased([]byte(k), ts(30), 7)
			if err != nil {
				return err
			}
			deleted[k] = ok
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !deleted["a"] || deleted["b"] || deleted["c"] || deleted["absent"] {
		t.Fatalf("deleted %v, want only a", deleted)
	}
	if _, found := mustGet(t, db, "a", hlc.MaxTimestamp); found {
		t.Fatal("a survived its lease")
	}
	if kv, found := mustGet(t, db, "b", hlc.MaxTimestamp); !found || kv.Lease != 0 {
		t.Fatalf("b: %+v %v, want the plain put", kv, found)
	}
	if kv, found := mustGet(t, db, "c", hlc.MaxTimestamp); !found || kv.Lease != 8 {
		t.Fatalf("c: %+v %v, want lease 8", kv, found)
	}
	// History keeps the leased version of a.
	if kv, found := mustGet(t, db, "a", ts(15)); !found || kv.Lease != 7 {
		t.Fatalf("a@15: %+v %v", kv, found)
	}
}
