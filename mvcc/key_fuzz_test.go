package mvcc

import (
	"bytes"
	"testing"

	"github.com/shaledb/shale/hlc"
)

// FuzzKeyOrder: for any two user keys and versions, encoded keys compare
// as (user key ascending, version descending), and decode to what was
// encoded.
func FuzzKeyOrder(f *testing.F) {
	f.Add([]byte("a"), int64(1), int32(0), []byte("a\x00"), int64(2), int32(1))
	f.Add([]byte{}, int64(0), int32(0), []byte{0x00}, int64(1<<62), int32(7))
	f.Add([]byte{0x00, 0xFF}, int64(5), int32(5), []byte{0x00, 0x01}, int64(5), int32(6))
	f.Fuzz(func(t *testing.T, ka []byte, wa int64, la int32, kb []byte, wb int64, lb int32) {
		ta := hlc.Timestamp{WallTime: wa & (1<<63 - 1), Logical: la & (1<<31 - 1)}
		tb := hlc.Timestamp{WallTime: wb & (1<<63 - 1), Logical: lb & (1<<31 - 1)}
		checkOrder(t, ka, ta, kb, tb)
	})
}

// FuzzDecodeKey: arbitrary bytes decode to an error or to a key and
// version that encode back to exactly those bytes.
func FuzzDecodeKey(f *testing.F) {
	f.Add(EncodeKey([]byte("k\x00"), hlc.Timestamp{WallTime: 3}))
	f.Add([]byte{0x00, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		k, ts, err := DecodeKey(nil, b)
		if err != nil {
			return
		}
		if re := EncodeKey(k, ts); !bytes.Equal(re, b) {
			t.Fatalf("DecodeKey(% x) = %q@%s, which encodes to % x", b, k, ts, re)
		}
	})
}
