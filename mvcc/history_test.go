package mvcc

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/storage"
)

// TestHistoryMatchesOnChange writes random batches (puts, deletes, range
// deletes, several writes of one key in one batch) and checks that what
// the Writer reported, keeping the last report of each key and version,
// is exactly what History reads back, with previous values, for windows
// of every shape.
func TestHistoryMatchesOnChange(t *testing.T) {
	db := openModelDB(t)
	rng := rand.New(rand.NewPCG(7, 9))
	type kv struct {
		key string
		ver hlc.Timestamp
	}
	reported := map[kv]Change{}
	for v := int64(1); v <= 60; v++ {
		b := storage.NewBatch(0)
		w := testKeyspace.NewWriter(db, b)
		w.OnChange = func(c Change) { reported[kv{string(c.Key), c.Version}] = c }
		for range 1 + rng.IntN(4) {
			k := []byte(fmt.Sprintf("k%d", rng.IntN(6)))
			var err error
			switch rng.IntN(6) {
			case 0:
				_, err = w.Delete(k, ts(v))
			case 1:
				_, err = w.DeleteRange([]byte("k2"), []byte("k4"), ts(v))
			default:
				err = w.Put(k, ts(v), []byte(fmt.Sprintf("v%d-%d", v, rng.IntN(100))))
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Write(b, storage.NoSync); err != nil {
			t.Fatal(err)
		}
	}
	for _, win := range [][2]int64{{0, 60}, {0, 1}, {10, 20}, {59, 60}, {30, 30}, {5, 100}} {
		var got []Change
		err := testKeyspace.History(db, nil, nil, ts(win[0]), ts(win[1]), true, func(c Change) error {
			got = append(got, c)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		for k, c := range reported {
			if ts(win[0]).Less(k.ver) && k.ver.LessEq(ts(win[1])) {
				want++
				_ = c
			}
		}
		if len(got) != want {
			t.Fatalf("window %v: History gave %d changes, the writer reported %d", win, len(got), want)
		}
		for i, c := range got {
			r, ok := reported[kv{string(c.Key), c.Version}]
			if !ok || !reflect.DeepEqual(normalize(r), normalize(c)) {
				t.Fatalf("window %v: History gave %+v, the writer reported %+v (%v)", win, c, r, ok)
			}
			if i > 0 {
				p := got[i-1]
				if string(p.Key) > string(c.Key) || (string(p.Key) == string(c.Key) && !c.Version.Less(p.Version)) {
					t.Fatalf("window %v: %q@%s after %q@%s: not key order, newest first", win, c.Key, c.Version, p.Key, p.Version)
				}
			}
		}
	}
	// Without previous values, and within a span.
	n := 0
	err := testKeyspace.History(db, []byte("k1"), []byte("k3"), ts(0), ts(60), false, func(c Change) error {
		if c.PrevFound || c.PrevValue != nil {
			t.Fatalf("%q@%s carries a previous value without withPrev", c.Key, c.Version)
		}
		if string(c.Key) < "k1" || string(c.Key) >= "k3" {
			t.Fatalf("%q is outside [k1, k3)", c.Key)
		}
		n++
		return nil
	})
	if err != nil || n == 0 {
		t.Fatalf("span history: %d changes, %v", n, err)
	}
	if err := testKeyspace.History(db, []byte("b"), []byte("a"), ts(0), ts(1), false, func(Change) error { return nil }); err == nil {
		t.Fatal("an inverted span was accepted")
	}
}

func normalize(c Change) Change {
	if len(c.Value) == 0 {
		c.Value = nil
	}
	if len(c.PrevValue) == 0 {
		c.PrevValue = nil
	}
	return c
}
