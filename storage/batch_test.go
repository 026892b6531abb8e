package storage

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"
)

// TestBatchEncodingIsFrozen pins the bytes of a batch: the format is stored
// in Raft logs, so any change here breaks old logs.
func TestBatchEncodingIsFrozen(t *testing.T) {
	var b Batch
	b.Put([]byte("k1"), []byte("v1"))
	b.Delete([]byte("k2"))
	b.DeleteRange([]byte("a"), []byte("b"))
	b.Put([]byte{}, []byte{})
	want := "0000000000000000" + "04000000" + // sequence, count
		"01" + "026b31" + "027631" + // Put k1 v1
		"00" + "026b32" + // Delete k2
		"02" + "0161" + "0162" + // DeleteRange a b
		"01" + "00" + "00" // Put "" ""
	if got := hex.EncodeToString(b.Repr()); got != want {
		t.Fatalf("batch bytes changed:\n got %s\nwant %s", got, want)
	}
	if b.Count() != 4 || b.Len() != len(want)/2 {
		t.Fatalf("Count=%d Len=%d, want 4 and %d", b.Count(), b.Len(), len(want)/2)
	}
}

func TestBatchLongLengthsUseMultiByteVarints(t *testing.T) {
	var b Batch
	key := bytes.Repeat([]byte("k"), 300) // 300 = 0xac 0x02
	b.Delete(key)
	repr := b.Repr()
	if got := hex.EncodeToString(repr[12:15]); got != "00ac02" {
		t.Fatalf("record prefix = %s, want 00ac02", got)
	}
	r := b.Reader()
	kind, k, v, ok := r.Next()
	if !ok || kind != RecordDelete || !bytes.Equal(k, key) || v != nil {
		t.Fatalf("Next = %v %d bytes %v %v", kind, len(k), v, ok)
	}
}

func TestBatchRoundTrip(t *testing.T) {
	type rec struct {
		kind RecordKind
		k, v string
	}
	recs := []rec{
		{RecordPut, "alpha", "1"},
		{RecordDelete, "beta", ""},
		{RecordDeleteRange, "c", "d"},
		{RecordPut, "", "empty key is encodable"},
		{RecordPut, "big", string(bytes.Repeat([]byte{0xff}, 70000))},
	}
	b := NewBatch(64)
	for _, r := range recs {
		switch r.kind {
		case RecordPut:
			b.Put([]byte(r.k), []byte(r.v))
		case RecordDelete:
			b.Delete([]byte(r.k))
		case RecordDeleteRange:
			b.DeleteRange([]byte(r.k), []byte(r.v))
		}
	}
	var copyB Batch
	if err := copyB.SetRepr(b.Repr()); err != nil {
		t.Fatal(err)
	}
	for _, bb := range []*Batch{b, &copyB} {
		r := bb.Reader()
		if r.Count() != uint32(len(recs)) {
			t.Fatalf("Count = %d, want %d", r.Count(), len(recs))
		}
		for i, want := range recs {
			kind, k, v, ok := r.Next()
			if !ok {
				t.Fatalf("record %d: Next failed: %v", i, r.Err())
			}
			if kind != want.kind || string(k) != want.k || string(v) != want.v {
				t.Fatalf("record %d = %v %q (%d bytes), want %v %q", i, kind, k, len(v), want.kind, want.k)
			}
		}
		if _, _, _, ok := r.Next(); ok || r.Err() != nil {
			t.Fatalf("after the last record: ok=%v err=%v", ok, r.Err())
		}
	}
}

func TestBatchResetAndReuse(t *testing.T) {
	var b Batch
	if !b.Empty() || b.Len() != 12 || len(b.Repr()) != 12 {
		t.Fatalf("zero batch: Empty=%v Len=%d", b.Empty(), b.Len())
	}
	b.Put([]byte("a"), []byte("b"))
	b.Reset()
	if !b.Empty() || b.Count() != 0 || !bytes.Equal(b.Repr(), make([]byte, 12)) {
		t.Fatalf("after Reset: count %d repr %x", b.Count(), b.Repr())
	}
	b.Delete([]byte("x"))
	if b.Count() != 1 || hex.EncodeToString(b.Repr()) != "000000000000000001000000"+"000178" {
		t.Fatalf("after reuse: %x", b.Repr())
	}
}

// TestBatchReleaseAndReuse: a released batch is empty, holds no buffer,
// and takes records again.
func TestBatchReleaseAndReuse(t *testing.T) {
	b := NewBatch(4 << 10)
	b.Put([]byte("a"), []byte("b"))
	b.Release()
	if !b.Empty() || b.Count() != 0 || b.repr != nil || b.Len() != 12 {
		t.Fatalf("after Release: count %d, buffer of %d bytes, Len %d", b.Count(), cap(b.repr), b.Len())
	}
	b.Delete([]byte("x"))
	if b.Count() != 1 || hex.EncodeToString(b.Repr()) != "000000000000000001000000"+"000178" {
		t.Fatalf("after reuse: %x", b.Repr())
	}
}

func TestBatchSetReprRejectsDamage(t *testing.T) {
	var good Batch
	good.Put([]byte("key"), []byte("value"))
	good.Delete([]byte("gone"))
	repr := good.Repr()

	cases := map[string][]byte{
		"short header":    repr[:11],
		"truncated":       repr[:len(repr)-1],
		"count too large": withCount(repr, 3),
		"count too small": withCount(repr, 1),
		"unknown tag":     append(withCount(repr, 3), 0x07, 0x00),
		"huge length":     append(withCount(repr, 3), 0x00, 0xff, 0xff, 0xff, 0xff, 0x7f),
		"trailing bytes":  append(bytes.Clone(repr), 0x00),
	}
	for name, bad := range cases {
		t.Run(name, func(t *testing.T) {
			var b Batch
			b.Put([]byte("keep"), []byte("me"))
			before := bytes.Clone(b.Repr())
			err := b.SetRepr(bad)
			if !errors.Is(err, ErrCorruption) {
				t.Fatalf("SetRepr = %v, want ErrCorruption", err)
			}
			if !bytes.Equal(b.Repr(), before) {
				t.Fatal("a failed SetRepr changed the batch")
			}
		})
	}
}

func TestBatchSetReprCopiesAndClearsSequence(t *testing.T) {
	var src Batch
	src.Put([]byte("k"), []byte("v"))
	repr := bytes.Clone(src.Repr())
	repr[0] = 42 // a sequence number assigned by some engine
	var b Batch
	if err := b.SetRepr(repr); err != nil {
		t.Fatal(err)
	}
	repr[len(repr)-1] = 'X'
	r := b.Reader()
	if r.Sequence() != 0 {
		t.Fatalf("sequence = %d, want 0", r.Sequence())
	}
	if _, _, v, _ := r.Next(); string(v) != "v" {
		t.Fatalf("value = %q: SetRepr aliased its argument", v)
	}
	b.Put([]byte("k2"), []byte("v2"))
	if b.Count() != 2 {
		t.Fatalf("Count after append = %d", b.Count())
	}
}

func withCount(repr []byte, n byte) []byte {
	c := bytes.Clone(repr)
	c[8], c[9], c[10], c[11] = n, 0, 0, 0
	return c
}

// FuzzBatchReader: no input makes the reader panic or read out of bounds,
// and whatever it accepts re-encodes to the same bytes.
func FuzzBatchReader(f *testing.F) {
	var b Batch
	b.Put([]byte("k"), []byte("v"))
	b.DeleteRange([]byte("a"), []byte("z"))
	f.Add(b.Repr())
	f.Add([]byte{})
	f.Add(make([]byte, 12))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := NewBatchReader(data)
		if err != nil {
			return
		}
		var re Batch
		for {
			kind, k, v, ok := r.Next()
			if !ok {
				break
			}
			switch kind {
			case RecordPut:
				re.Put(k, v)
			case RecordDelete:
				re.Delete(k)
			case RecordDeleteRange:
				re.DeleteRange(k, v)
			}
		}
		if r.Err() != nil {
			return
		}
		// Canonical varints only: a non-minimal length re-encodes shorter.
		if got := re.Repr(); !bytes.Equal(got[8:], data[8:]) && len(got) == len(data) {
			t.Fatalf("re-encoding differs:\n%x\n%x", got, data)
		}
	})
}

// TestBatchAppend: appending one batch to another gives the bytes of one
// batch built with both's records in order, and writing it applies them in
// that order (a later record wins).
func TestBatchAppend(t *testing.T) {
	var a, b, want Batch
	a.Put([]byte("k1"), []byte("a"))
	a.Delete([]byte("k2"))
	b.Put([]byte("k1"), []byte("b"))
	b.DeleteRange([]byte("x"), []byte("y"))
	want.Put([]byte("k1"), []byte("a"))
	want.Delete([]byte("k2"))
	want.Put([]byte("k1"), []byte("b"))
	want.DeleteRange([]byte("x"), []byte("y"))
	a.Append(&b)
	a.Append(&Batch{}) // an empty batch adds nothing
	if !bytes.Equal(a.Repr(), want.Repr()) || a.Count() != 4 {
		t.Fatalf("appended batch:\n got %x (count %d)\nwant %x", a.Repr(), a.Count(), want.Repr())
	}
	if b.Count() != 2 {
		t.Fatalf("the appended batch changed: count %d", b.Count())
	}
	var empty Batch
	empty.Append(&b)
	if !bytes.Equal(empty.Repr(), b.Repr()) {
		t.Fatalf("appending to an empty batch:\n got %x\nwant %x", empty.Repr(), b.Repr())
	}

	db := openTestDB(t, nil)
	if err := db.Write(&a, WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if v, err := db.Get([]byte("k1")); err != nil || string(v) != "b" {
		t.Fatalf("k1 = %q, %v; want the appended batch's later put", v, err)
	}

	var bad Batch
	bad.err = errors.New("boom")
	a.Append(&bad)
	if a.Err() == nil {
		t.Fatal("appending a failed batch did not fail the batch")
	}
}
