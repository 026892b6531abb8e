package mvcc

import (
	"bytes"
	"errors"
	"testing"

	"github.com/shaledb/shale/hlc"
)

func TestValueRoundTrip(t *testing.T) {
	created := hlc.Timestamp{WallTime: 77, Logical: 1}
	for _, v := range [][]byte{nil, {}, []byte("v"), {0x00, 0x02}} {
		live, c, got, err := decodeValue(appendLiveValue(nil, created, v))
		if err != nil || !live || c != created || !bytes.Equal(got, v) {
			t.Errorf("live value %q: %v %s %q %v", v, live, c, got, err)
		}
	}
	live, _, got, err := decodeValue(appendTombstone(nil))
	if err != nil || live || got != nil {
		t.Errorf("tombstone: %v %q %v", live, got, err)
	}
}

func TestDecodeValueRejectsMalformed(t *testing.T) {
	for _, b := range [][]byte{
		nil,
		{0x03},
		{tagTombstone, 0x00},
		{tagValue, 0x00},
		append([]byte{tagValue, 0x80}, make([]byte, 11)...), // negative created
	} {
		if _, _, _, err := decodeValue(b); !errors.Is(err, ErrMalformedValue) {
			t.Errorf("decodeValue(% x) = %v, want ErrMalformedValue", b, err)
		}
	}
}

// TestValueGrammarExample is the example in docs/formats.md.
func TestValueGrammarExample(t *testing.T) {
	got := appendLiveValue(nil, hlc.Timestamp{WallTime: 1}, []byte("v"))
	want := []byte{0x01, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 'v'}
	if !bytes.Equal(got, want) {
		t.Fatalf("appendLiveValue = % x, want % x", got, want)
	}
}
