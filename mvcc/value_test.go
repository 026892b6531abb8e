package mvcc

import (
	"bytes"
	"errors"
	"testing"

	"github.com/shaledb/shale/hlc"
)

func TestValueRoundTrip(t *testing.T) {
	created := hlc.Timestamp{WallTime: 77, Logical: 1}
	for _, lease := range []uint64{0, 1, 1 << 63} {
		for _, v := range [][]byte{nil, {}, []byte("v"), {0x00, 0x02}} {
			sv, err := decodeValue(appendLiveValue(nil, created, lease, v))
			if err != nil || !sv.live || sv.created != created || sv.lease != lease || !bytes.Equal(sv.value, v) {
				t.Errorf("live value %q lease %d: %+v %v", v, lease, sv, err)
			}
			if n := len(appendLiveValue(nil, created, lease, v)); n != liveValueLen(lease, len(v)) {
				t.Errorf("lease %d value %q: stored %d bytes, liveValueLen says %d", lease, v, n, liveValueLen(lease, len(v)))
			}
		}
	}
	sv, err := decodeValue(appendTombstone(nil))
	if err != nil || sv.live || sv.value != nil {
		t.Errorf("tombstone: %+v %v", sv, err)
	}
}

func TestDecodeValueRejectsMalformed(t *testing.T) {
	for _, b := range [][]byte{
		nil,
		{0x04},
		{tagTombstone, 0x00},
		append([]byte{tagLeasedValue}, make([]byte, 12)...),   // no lease
		append([]byte{tagLeasedValue}, make([]byte, 12+8)...), // lease 0
		{tagValue, 0x00},
		append([]byte{tagValue, 0x80}, make([]byte, 11)...), // negative created
	} {
		if _, err := decodeValue(b); !errors.Is(err, ErrMalformedValue) {
			t.Errorf("decodeValue(% x) = %v, want ErrMalformedValue", b, err)
		}
	}
}

// TestValueGrammarExample is the example in docs/formats.md.
func TestValueGrammarExample(t *testing.T) {
	got := appendLiveValue(nil, hlc.Timestamp{WallTime: 1}, 0, []byte("v"))
	want := []byte{0x01, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 'v'}
	if !bytes.Equal(got, want) {
		t.Fatalf("appendLiveValue = % x, want % x", got, want)
	}
	got = appendLiveValue(nil, hlc.Timestamp{WallTime: 1}, 7, []byte("v"))
	want = []byte{0x03, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7, 'v'}
	if !bytes.Equal(got, want) {
		t.Fatalf("leased appendLiveValue = % x, want % x", got, want)
	}
}
