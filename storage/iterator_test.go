package storage

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"
)

// fill writes keys 0..n-1 (key(i) -> "v<i>") and returns them in order.
func fill(t testing.TB, db *DB, n int) [][]byte {
	t.Helper()
	var b Batch
	keys := make([][]byte, n)
	for i := 0; i < n; i++ {
		keys[i] = key(i)
		b.Put(keys[i], []byte(fmt.Sprintf("v%d", i)))
	}
	if err := db.Write(&b, NoSync); err != nil {
		t.Fatal(err)
	}
	return keys
}

func collect(t *testing.T, it *Iterator, valid bool, step func() bool) []string {
	t.Helper()
	var got []string
	for ok := valid; ok; ok = step() {
		got = append(got, string(it.Key()))
	}
	if err := it.Error(); err != nil {
		t.Fatal(err)
	}
	return got
}

func strs(keys [][]byte) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = string(k)
	}
	return out
}

func TestIteratorForwardAndBackward(t *testing.T) {
	db := openTestDB(t, nil)
	// Enough entries for many windows, including the doubling ones.
	keys := strs(fill(t, db, 5000))
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	if got := collect(t, it, it.First(), it.Next); !slices.Equal(got, keys) {
		t.Fatalf("forward scan: %d keys, want %d", len(got), len(keys))
	}
	rev := slices.Clone(keys)
	slices.Reverse(rev)
	if got := collect(t, it, it.Last(), it.Prev); !slices.Equal(got, rev) {
		t.Fatalf("reverse scan: %d keys, want %d", len(got), len(rev))
	}
	if !it.First() || string(it.Value()) != "v0" {
		t.Fatalf("value of first = %q", it.Value())
	}
}

func TestIteratorSeeks(t *testing.T) {
	db := openTestDB(t, nil)
	for _, k := range []string{"b", "d", "f"} {
		mustPut(t, db, k, "v"+k)
	}
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	cases := []struct {
		name string
		seek func([]byte) bool
		arg  string
		want string // "" = not valid
	}{
		{"GE exact", it.SeekGE, "d", "d"},
		{"GE between", it.SeekGE, "c", "d"},
		{"GE before all", it.SeekGE, "a", "b"},
		{"GE past all", it.SeekGE, "g", ""},
		{"GT exact", it.SeekGT, "d", "f"},
		{"GT between", it.SeekGT, "c", "d"},
		{"GT last", it.SeekGT, "f", ""},
		{"LT exact", it.SeekLT, "d", "b"},
		{"LT between", it.SeekLT, "e", "d"},
		{"LT first", it.SeekLT, "b", ""},
		{"LT past all", it.SeekLT, "z", "f"},
		{"GE empty key", it.SeekGE, "", "b"},
	}
	for _, c := range cases {
		ok := c.seek([]byte(c.arg))
		got := ""
		if ok {
			got = string(it.UnsafeKey())
		}
		if ok != it.Valid() || got != c.want {
			t.Errorf("%s(%q): valid=%v key=%q, want %q", c.name, c.arg, ok, got, c.want)
		}
	}
}

func TestIteratorBounds(t *testing.T) {
	db := openTestDB(t, nil)
	keys := strs(fill(t, db, 100))
	lo, hi := key(10), key(20)
	it, err := db.NewIter(&IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	if got := collect(t, it, it.First(), it.Next); !slices.Equal(got, keys[10:20]) {
		t.Fatalf("bounded forward = %v", got)
	}
	want := slices.Clone(keys[10:20])
	slices.Reverse(want)
	if got := collect(t, it, it.Last(), it.Prev); !slices.Equal(got, want) {
		t.Fatalf("bounded reverse = %v", got)
	}
	if it.SeekGE(key(5)); !it.Valid() || !bytes.Equal(it.UnsafeKey(), lo) {
		t.Fatalf("SeekGE below the lower bound = %q", it.UnsafeKey())
	}
	if it.SeekLT(key(50)); !it.Valid() || !bytes.Equal(it.UnsafeKey(), key(19)) {
		t.Fatalf("SeekLT above the upper bound = %q", it.UnsafeKey())
	}
	if it.SeekGE(hi) {
		t.Fatalf("SeekGE(upper bound) found %q", it.UnsafeKey())
	}
	if it.SeekLT(lo) {
		t.Fatalf("SeekLT(lower bound) found %q", it.UnsafeKey())
	}
}

// TestIteratorDirectionChanges walks back and forth across window edges and
// compares every step with the sorted key list.
func TestIteratorDirectionChanges(t *testing.T) {
	db := openTestDB(t, nil)
	keys := strs(fill(t, db, 3000))
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	// A walk: forward 40, back 25, forward 100, back 70, ... Window sizes
	// start at 16 and double, so the turns land on and off window edges.
	if !it.SeekGE([]byte(keys[0])) {
		t.Fatal("empty")
	}
	pos := 0
	steps := []int{40, -25, 100, -70, 500, -499, 1, -1, 2000, -1500, 16, -16, 33, -64}
	for _, s := range steps {
		for ; s != 0; s -= sign(s) {
			var ok bool
			if s > 0 {
				ok, pos = it.Next(), pos+1
			} else {
				ok, pos = it.Prev(), pos-1
			}
			if !ok || string(it.UnsafeKey()) != keys[pos] {
				t.Fatalf("at step to %d: valid=%v key=%q, want %q (err %v)", pos, ok, it.UnsafeKey(), keys[pos], it.Error())
			}
		}
	}
	// Off both ends.
	it.First()
	if it.Prev() || it.Valid() {
		t.Fatal("Prev before the first entry is valid")
	}
	it.Last()
	if it.Next() || it.Valid() {
		t.Fatal("Next after the last entry is valid")
	}
}

func sign(n int) int {
	if n < 0 {
		return -1
	}
	return 1
}

func TestIteratorLargeEntriesAndKeysOnly(t *testing.T) {
	db := openTestDB(t, nil)
	big := bytes.Repeat([]byte("v"), iterBufSize*3) // larger than a window buffer
	mustPut(t, db, "a", "small")
	if err := db.Put([]byte("b"), big, NoSync); err != nil {
		t.Fatal(err)
	}
	mustPut(t, db, "c", "small")
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for ok := it.First(); ok; ok = it.Next() {
		got = append(got, len(it.UnsafeValue()))
	}
	if err := it.Close(); err != nil || !slices.Equal(got, []int{5, len(big), 5}) {
		t.Fatalf("value sizes = %v, err %v", got, err)
	}
	ko, err := db.NewIter(&IterOptions{KeysOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ko.Close()
	var keys []string
	for ok := ko.Last(); ok; ok = ko.Prev() {
		if len(ko.UnsafeValue()) != 0 {
			t.Fatalf("KeysOnly returned a %d-byte value", len(ko.UnsafeValue()))
		}
		keys = append(keys, string(ko.UnsafeKey()))
	}
	if !slices.Equal(keys, []string{"c", "b", "a"}) {
		t.Fatalf("keys-only reverse = %v", keys)
	}
}

func TestIteratorSeesAConsistentView(t *testing.T) {
	db := openTestDB(t, nil)
	keys := strs(fill(t, db, 200))
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	if !it.First() {
		t.Fatal("empty")
	}
	// Writes after creation must not show, even after the re-seeks that
	// direction changes cause.
	if err := db.Put([]byte("key00000050x"), []byte("new"), NoSync); err != nil {
		t.Fatal(err)
	}
	if err := db.Delete(key(100), NoSync); err != nil {
		t.Fatal(err)
	}
	got := collect(t, it, true, it.Next)
	if !slices.Equal(got, keys) {
		t.Fatalf("iterator saw later writes: %d keys", len(got))
	}
	// Seeks and direction changes after the writes re-seek the engine
	// iterator: they must still see the view of its creation.
	rev := slices.Clone(keys)
	slices.Reverse(rev)
	if got := collect(t, it, it.Last(), it.Prev); !slices.Equal(got, rev) {
		t.Fatalf("reverse scan after later writes: %d keys", len(got))
	}
	if !it.SeekGE(key(99)) || !it.Next() || string(it.UnsafeKey()) != string(key(100)) {
		t.Fatalf("the deleted key(100) vanished from the iterator's view: at %q", it.UnsafeKey())
	}
}

func TestSnapshotIsolation(t *testing.T) {
	db := openTestDB(t, nil)
	mustPut(t, db, "a", "1")
	mustPut(t, db, "b", "1")
	snap, err := db.NewSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, db, "a", "2")
	mustPut(t, db, "c", "2")
	if err := db.Delete([]byte("b"), NoSync); err != nil {
		t.Fatal(err)
	}
	if v, err := snap.Get([]byte("a")); err != nil || string(v) != "1" {
		t.Fatalf("snapshot Get(a) = %q, %v", v, err)
	}
	if _, err := snap.Get([]byte("c")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("snapshot Get(c) = %v, want ErrNotFound", err)
	}
	vals, err := snap.MultiGet([][]byte{[]byte("a"), []byte("b"), []byte("c")})
	if err != nil || string(vals[0]) != "1" || string(vals[1]) != "1" || vals[2] != nil {
		t.Fatalf("snapshot MultiGet = %q, %v", vals, err)
	}
	it, err := snap.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := collect(t, it, it.First(), it.Next); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("snapshot scan = %v", got)
	}
	if err := snap.Close(); !errors.Is(err, ErrBusy) {
		t.Fatalf("Snapshot.Close with an open iterator = %v, want ErrBusy", err)
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	if err := snap.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := snap.Get([]byte("a")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get on a closed snapshot = %v", err)
	}
	if v, _ := db.Get([]byte("a")); string(v) != "2" {
		t.Fatalf("latest Get(a) = %q", v)
	}
}

func TestIteratorClosedUse(t *testing.T) {
	db := openTestDB(t, nil)
	mustPut(t, db, "a", "1")
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	if it.First() || it.SeekGE([]byte("a")) || it.Valid() {
		t.Fatal("a closed iterator moved")
	}
	if !errors.Is(it.Error(), ErrClosed) {
		t.Fatalf("Error after use of a closed iterator = %v", it.Error())
	}
	if err := it.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
}

// TestIteratorSeekWithinTheWindow: seeks forward and backward by small and
// large steps, between Nexts, land where a sorted slice says; the ones
// whose answer is inside the current window make no engine call.
func TestIteratorSeekWithinTheWindow(t *testing.T) {
	db := openTestDB(t, nil)
	var b Batch
	var keys []string
	for i := 0; i < 3000; i += 3 { // gaps, so targets fall between keys
		k := fmt.Sprintf("k%06d", i)
		keys = append(keys, k)
		b.Put([]byte(k), []byte("v"))
	}
	if err := db.Write(&b, NoSync); err != nil {
		t.Fatal(err)
	}
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	want := func(target string) string {
		i, _ := slices.BinarySearch(keys, target)
		if i == len(keys) {
			return ""
		}
		return keys[i]
	}
	got := func(ok bool) string {
		if !ok {
			return ""
		}
		return string(it.UnsafeKey())
	}
	it.SeekGE([]byte("k000000"))
	pos := 0
	for step := 1; pos < 3100; step++ {
		// Forward by a few keys (within a window), sometimes far, sometimes
		// back; then a Next or two.
		switch {
		case step%7 == 0:
			pos += 400
		case step%11 == 0:
			pos -= 20
		default:
			pos += step % 5
		}
		target := fmt.Sprintf("k%06d", pos)
		before := it.engineSeeks
		inWindow := it.Valid() && it.dir > 0 &&
			target >= string(it.keyAt(0)) && target <= string(it.keyAt(len(it.offs)-1))
		if g, w := got(it.SeekGE([]byte(target))), want(target); g != w {
			t.Fatalf("SeekGE(%s) = %q, want %q", target, g, w)
		}
		if inWindow && it.engineSeeks != before {
			t.Fatalf("SeekGE(%s) inside the window called the engine", target)
		}
		for n := 0; n < step%3 && it.Valid(); n++ {
			cur := string(it.UnsafeKey())
			i, _ := slices.BinarySearch(keys, cur)
			w := ""
			if i+1 < len(keys) {
				w = keys[i+1]
			}
			if g := got(it.Next()); g != w {
				t.Fatalf("Next after %s = %q, want %q", cur, g, w)
			}
		}
	}
	if err := it.Error(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d engine seeks", it.engineSeeks)
	if it.engineSeeks > 120 {
		t.Errorf("%d engine seeks for a walk that mostly stays inside windows", it.engineSeeks)
	}
}
