package storage

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzBatchRepr feeds arbitrary bytes to the Go batch decoder and, for
// batches it accepts, to the engine. It checks that:
//   - decoding never panics and either accepts the whole batch or returns
//     an error matching ErrCorruption;
//   - an accepted batch re-encodes (Put/Delete/DeleteRange) into one that
//     decodes to the same records, no longer than the input;
//   - the engine, the other implementation of the format, accepts what Go
//     accepts (except a DeleteRange whose start sorts after its end, which
//     it refuses as an invalid argument), and then serves every key the
//     batch leaves put.
//
// Run: go test ./storage -run '^$' -fuzz FuzzBatchRepr -fuzztime 10m
// (testdata/fuzz/FuzzBatchRepr holds the corpus.)
func FuzzBatchRepr(f *testing.F) {
	seed := func(build func(b *Batch)) {
		var b Batch
		build(&b)
		f.Add(append([]byte(nil), b.Repr()...))
	}
	seed(func(b *Batch) {})
	seed(func(b *Batch) { b.Put([]byte("k"), []byte("v")) })
	seed(func(b *Batch) {
		b.Put([]byte("a"), []byte("1"))
		b.Delete([]byte("b"))
		b.DeleteRange([]byte("c"), []byte("f"))
		b.Put([]byte("a"), bytes.Repeat([]byte("x"), 200))
	})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 9, 1, 'k'})

	db := openTestDB(f, nil)
	f.Fuzz(func(t *testing.T, repr []byte) {
		type rec struct {
			kind       RecordKind
			key, value []byte
		}
		r, err := NewBatchReader(repr)
		if err != nil {
			if !errors.Is(err, ErrCorruption) {
				t.Fatalf("header error %v does not match ErrCorruption", err)
			}
			return
		}
		var recs []rec
		for {
			kind, k, v, ok := r.Next()
			if !ok {
				break
			}
			recs = append(recs, rec{kind, append([]byte(nil), k...), append([]byte(nil), v...)})
		}
		if err := r.Err(); err != nil {
			if !errors.Is(err, ErrCorruption) {
				t.Fatalf("decode error %v does not match ErrCorruption", err)
			}
			return
		}
		if uint32(len(recs)) != r.Count() {
			t.Fatalf("decoded %d records, header says %d", len(recs), r.Count())
		}

		var again Batch
		rangeInverted := false
		for _, x := range recs {
			switch x.kind {
			case RecordPut:
				again.Put(x.key, x.value)
			case RecordDelete:
				again.Delete(x.key)
			case RecordDeleteRange:
				again.DeleteRange(x.key, x.value)
				rangeInverted = rangeInverted || bytes.Compare(x.key, x.value) > 0
			default:
				t.Fatalf("accepted unknown kind %v", x.kind)
			}
		}
		if len(again.Repr()) > len(repr) {
			t.Fatalf("re-encoded batch is longer: %d > %d", len(again.Repr()), len(repr))
		}
		r2 := again.Reader()
		for i := 0; ; i++ {
			kind, k, v, ok := r2.Next()
			if !ok {
				if i != len(recs) {
					t.Fatalf("re-encoded batch has %d records, want %d", i, len(recs))
				}
				break
			}
			if i >= len(recs) || kind != recs[i].kind || !bytes.Equal(k, recs[i].key) || !bytes.Equal(v, recs[i].value) {
				t.Fatalf("re-encoded record %d differs", i)
			}
		}

		var b Batch
		if err := b.SetRepr(repr); err != nil {
			t.Fatalf("SetRepr refused what NewBatchReader accepted: %v", err)
		}
		err = db.Write(&b, WriteOptions{})
		if rangeInverted {
			if err == nil || !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("engine took an inverted DeleteRange: %v", err)
			}
			return
		}
		if err != nil {
			t.Fatalf("engine refused a batch Go accepts: %v", err)
		}
		// Keys whose last record in the batch is a Put, not covered by a
		// later DeleteRange, must read back.
		for i, x := range recs {
			if x.kind != RecordPut {
				continue
			}
			live := true
			for _, y := range recs[i+1:] {
				switch y.kind {
				case RecordPut, RecordDelete:
					live = live && !bytes.Equal(y.key, x.key)
				case RecordDeleteRange:
					live = live && !(bytes.Compare(y.key, x.key) <= 0 && bytes.Compare(x.key, y.value) < 0)
				}
			}
			if !live {
				continue
			}
			got, err := db.Get(x.key)
			if err != nil || !bytes.Equal(got, x.value) {
				t.Fatalf("Get(%q) after the batch = %q, %v; want %q", x.key, got, err, x.value)
			}
		}
	})
}
