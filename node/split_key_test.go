package node

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/mvcc"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/storage"
)

func TestKeyBetween(t *testing.T) {
	for _, tc := range [][2]string{
		{"a", "c"}, {"a", "b"}, {"key-000", "key-999"}, {"", "\x01"}, {"ab\x00", "ab\x01"},
		{"x", "x\x00\x01"}, {"\xff", "\xff\xff"}, {"k\x00", "k\x00\x00\x01"},
	} {
		a, b := []byte(tc[0]), []byte(tc[1])
		m := keyBetween(a, b)
		if m == nil || bytes.Compare(a, m) >= 0 || bytes.Compare(m, b) >= 0 {
			t.Errorf("keyBetween(%q, %q) = %q: not strictly between", a, b, m)
		}
	}
	if m := keyBetween([]byte("a"), []byte("a\x00")); m != nil {
		t.Errorf("keyBetween(a, a\\x00) = %q; nothing lies between them", m)
	}
}

// sizeMiddleKey finds, from the engine's estimate alone, a key that
// halves a range's bytes on disk, also when the keys are unevenly spread
// over the key space, and a real key of the range.
func TestSizeMiddleKey(t *testing.T) {
	db, err := storage.Open(t.TempDir(), keys.WithUserVersions(&storage.Options{WriteBufferSize: 256 << 10}))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// 20,000 keys "a/..." and 20,000 keys "z/..." (a gap between them in
	// the key space), values of 100 random bytes, flushed to tables; each
	// key has two versions (and a split key must never fall between them).
	value := make([]byte, 100)
	b := storage.NewBatch(1 << 20)
	var all [][]byte
	for _, prefix := range []string{"a/", "z/"} {
		for i := 0; i < 20000; i++ {
			k := []byte(fmt.Sprintf("%s%08d", prefix, i*7))
			for j := range value {
				value[j] = byte(rand.Uint32())
			}
			for v := int64(1); v <= 2; v++ {
				b.Put(append([]byte{keys.UserPrefix}, mvcc.EncodeKey(k, hlc.Timestamp{WallTime: v})...), value[:50*v])
			}
			all = append(all, k)
			if b.Len() >= 1000 {
				if err := db.Write(b, storage.WriteOptions{}); err != nil {
					t.Fatal(err)
				}
				b = storage.NewBatch(1 << 20)
			}
		}
	}
	if err := db.Write(b, storage.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	sp := keys.UserSpan(nil, nil)
	size, _, err := db.ApproximateSize(sp.Start, sp.End)
	if err != nil || size < 2<<20 {
		t.Fatalf("ApproximateSize = %d, %v; want the 4 MB written", size, err)
	}
	mid, err := sizeMiddleKey(db, sp, size)
	if err != nil || mid == nil {
		t.Fatalf("sizeMiddleKey = %q, %v", mid, err)
	}
	i := 0
	for i < len(all) && !bytes.Equal(all[i], mid) {
		i++
	}
	if i == len(all) {
		t.Fatalf("split key %q is no key of the range", mid)
	}
	// Within 5% of the middle by bytes (equal-sized entries: by count).
	if d := i - len(all)/2; d < -len(all)/20 || d > len(all)/20 {
		t.Fatalf("split key %q is key %d of %d", mid, i, len(all))
	}
	// A span of one key has no middle; a bounded span finds its own.
	one := keys.UserSpan([]byte("a/00000000"), []byte("a/00000001"))
	if k, err := sizeMiddleKey(db, one, 100); err != nil || k != nil {
		t.Fatalf("one-key span: %q, %v", k, err)
	}
	zs := keys.UserSpan([]byte("z/"), nil)
	zsize, _, _ := db.ApproximateSize(zs.Start, zs.End)
	k, err := sizeMiddleKey(db, zs, zsize)
	if err != nil || !bytes.HasPrefix(k, []byte("z/")) || bytes.Compare(k, []byte("z/00050000")) < 0 || bytes.Compare(k, []byte("z/00090000")) > 0 {
		t.Fatalf("middle of z/: %q, %v; want near z/00070000", k, err)
	}
}
