package storage

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// model is the reference the engine is compared with: a Go map.
type model map[string]string

func (m model) apply(b *Batch) {
	r := b.Reader()
	for {
		kind, k, v, ok := r.Next()
		if !ok {
			break
		}
		switch kind {
		case RecordPut:
			m[string(k)] = string(v)
		case RecordDelete:
			delete(m, string(k))
		case RecordDeleteRange:
			for mk := range m {
				if mk >= string(k) && mk < string(v) {
					delete(m, mk)
				}
			}
		}
	}
}

func (m model) sortedKeys(lo, hi string) []string {
	var ks []string
	for k := range m {
		if k >= lo && (hi == "" || k < hi) {
			ks = append(ks, k)
		}
	}
	slices.Sort(ks)
	return ks
}

// TestRandomizedAgainstModel applies random batches (puts, deletes, range
// deletes over a small key space so that they collide), reopens the
// database now and then, and checks point reads, MultiGet and scans in both
// directions against the model after every step.
func TestRandomizedAgainstModel(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed>>1))
	db := openTestDB(t, &Options{WriteBufferSize: 256 << 10})
	m := model{}
	randKey := func() []byte {
		// 300 keys of varying length share prefixes: "k", "k1", "k12", ...
		n := rng.IntN(300)
		return []byte("k" + string(rune('a'+n%26)) + string(bytes.Repeat([]byte{'0' + byte(n%10)}, n/26)))
	}
	steps := 400
	if testing.Short() {
		steps = 100
	}
	for step := 0; step < steps; step++ {
		var b Batch
		for n := 1 + rng.IntN(8); n > 0; n-- {
			switch p := rng.IntN(100); {
			case p < 65:
				v := bytes.Repeat([]byte{byte('a' + rng.IntN(26))}, rng.IntN(200))
				b.Put(randKey(), v)
			case p < 90:
				b.Delete(randKey())
			default:
				lo, hi := randKey(), randKey()
				if bytes.Compare(lo, hi) > 0 {
					lo, hi = hi, lo
				}
				b.DeleteRange(lo, hi)
			}
		}
		if err := db.Write(&b, WriteOptions{Sync: step%20 == 0}); err != nil {
			t.Fatalf("step %d: Write: %v", step, err)
		}
		m.apply(&b)
		if rng.IntN(40) == 0 {
			db = reopen(t, db, &Options{WriteBufferSize: 256 << 10})
		}
		checkAgainstModel(t, step, db, m, randKey, rng)
	}
}

func checkAgainstModel(t *testing.T, step int, db *DB, m model, randKey func() []byte, rng *rand.Rand) {
	t.Helper()
	// Point reads and one MultiGet of the same keys.
	keys := make([][]byte, 20)
	for i := range keys {
		keys[i] = randKey()
	}
	vals, err := db.MultiGet(keys)
	if err != nil {
		t.Fatalf("step %d: MultiGet: %v", step, err)
	}
	for i, k := range keys {
		want, present := m[string(k)]
		got, err := db.Get(k)
		switch {
		case present && (err != nil || string(got) != want):
			t.Fatalf("step %d: Get(%q) = %q, %v; want %q", step, k, got, err, want)
		case !present && !errors.Is(err, ErrNotFound):
			t.Fatalf("step %d: Get(%q) = %q, %v; want not found", step, k, got, err)
		case present != (vals[i] != nil) || string(vals[i]) != want:
			t.Fatalf("step %d: MultiGet[%q] = %q; want %q (present %v)", step, k, vals[i], want, present)
		}
	}
	// A bounded scan in both directions, and a seek in the middle.
	lo, hi := string(randKey()), string(randKey())
	if lo > hi {
		lo, hi = hi, lo
	}
	want := m.sortedKeys(lo, hi)
	it, err := db.NewIter(&IterOptions{LowerBound: []byte(lo), UpperBound: []byte(hi)})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var got []string
	for ok := it.First(); ok; ok = it.Next() {
		if string(it.UnsafeValue()) != m[string(it.UnsafeKey())] {
			t.Fatalf("step %d: scan value of %q differs", step, it.UnsafeKey())
		}
		got = append(got, string(it.UnsafeKey()))
	}
	if it.Error() != nil || !slices.Equal(got, want) {
		t.Fatalf("step %d: scan [%q,%q) = %q, want %q (err %v)", step, lo, hi, got, want, it.Error())
	}
	got = got[:0]
	for ok := it.Last(); ok; ok = it.Prev() {
		got = append(got, string(it.UnsafeKey()))
	}
	slices.Reverse(got)
	if !slices.Equal(got, want) {
		t.Fatalf("step %d: reverse scan [%q,%q) = %q, want %q", step, lo, hi, got, want)
	}
	target := string(randKey())
	all := m.sortedKeys("", "")
	i, _ := slices.BinarySearch(all, target)
	full, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer full.Close()
	ok := full.SeekGE([]byte(target))
	if ok != (i < len(all)) || (ok && string(full.UnsafeKey()) != all[i]) {
		t.Fatalf("step %d: SeekGE(%q) = %v %q", step, target, ok, full.UnsafeKey())
	}
	if ok && rng.IntN(2) == 0 {
		ok = full.Prev()
		if ok != (i > 0) || (ok && string(full.UnsafeKey()) != all[i-1]) {
			t.Fatalf("step %d: Prev after SeekGE(%q) = %v %q", step, target, ok, full.UnsafeKey())
		}
	}
}
