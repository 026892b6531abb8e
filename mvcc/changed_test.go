package mvcc

import (
	"testing"

	"github.com/shaledb/shale/storage"
)

// TestChangedAbove: a key counts as changed after ts when its newest
// version, a deletion included, is above ts; older history and keys
// outside the span do not count, and the writer's own batch does.
func TestChangedAbove(t *testing.T) {
	db := openModelDB(t)
	for _, s := range []func(w *Writer) error{
		func(w *Writer) error { return w.Put([]byte("a"), ts(10), []byte("1")) },
		func(w *Writer) error { return w.Put([]byte("b"), ts(10), []byte("1")) },
		func(w *Writer) error { return w.Put([]byte("b"), ts(20), []byte("2")) },
		func(w *Writer) error { return w.Put([]byte("c"), ts(10), []byte("1")) },
		func(w *Writer) error { _, err := w.Delete([]byte("c"), ts(30)); return err },
	} {
		if err := apply(t, db, s); err != nil {
			t.Fatal(err)
		}
	}
	w := testKeyspace.NewWriter(db, storage.NewBatch(0))
	check := func(start, end string, point bool, at int64, wantKey string) {
		t.Helper()
		var s, e []byte
		if start != "" {
			s = []byte(start)
		}
		if end != "" {
			e = []byte(end)
		}
		ch, found, err := w.ChangedAbove(s, e, point, ts(at))
		if err != nil {
			t.Fatal(err)
		}
		if got := map[bool]string{true: string(ch.Key)}[found]; got != wantKey {
			t.Fatalf("ChangedAbove(%q, %q, point %v, %d) = %q (found %v), want %q", start, end, point, at, ch.Key, found, wantKey)
		}
	}
	check("a", "", true, 10, "")
	check("a", "", true, 5, "a")
	check("b", "", true, 10, "b")
	check("b", "", true, 20, "")
	check("c", "", true, 25, "c") // a deletion is a change
	check("zz", "", true, 0, "")  // never written
	check("a", "c", false, 15, "b")
	check("a", "b", false, 15, "")
	check("", "", false, 25, "c")
	check("", "", false, 30, "")
	if err := w.Put([]byte("d"), ts(40), []byte("1")); err != nil {
		t.Fatal(err)
	}
	check("d", "", false, 35, "d") // the writer's own batch
	check("", "", false, 30, "d")
	check("d", "", true, 35, "d")
}
