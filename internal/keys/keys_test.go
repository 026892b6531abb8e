package keys

import (
	"bytes"
	"errors"
	"testing"
)

func TestUserKeysSortInsideTheUserSpan(t *testing.T) {
	for _, k := range [][]byte{{}, {0x00}, []byte("a"), bytes.Repeat([]byte{0xff}, 100)} {
		ek := UserKey(k)
		if bytes.Compare(ek, UserSpanStart) < 0 || bytes.Compare(ek, UserSpanEnd) >= 0 {
			t.Errorf("UserKey(%q) = %x is outside the user span", k, ek)
		}
		back, err := DecodeUserKey(ek)
		if err != nil || !bytes.Equal(back, k) {
			t.Errorf("DecodeUserKey(UserKey(%q)) = %q, %v", k, back, err)
		}
	}
	if bytes.Compare(UserKey([]byte("a")), UserKey([]byte("b"))) >= 0 {
		t.Error("encoding does not preserve order")
	}
	if _, err := DecodeUserKey(StoreIdentKey); !errors.Is(err, ErrNotUserKey) {
		t.Errorf("DecodeUserKey(store ident key) = %v", err)
	}
}

func TestLayoutIsFrozen(t *testing.T) {
	want := []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 'i', 'd', 'e', 'n', 't'}
	if !bytes.Equal(StoreIdentKey, want) {
		t.Fatalf("StoreIdentKey = %x, want %x", StoreIdentKey, want)
	}
	if got := RangeIDPrefix(RangeLocalPrefix, 0x0102); !bytes.Equal(got, []byte{1, 0, 0, 0, 0, 0, 0, 1, 2}) {
		t.Fatalf("RangeIDPrefix = %x", got)
	}
	if !bytes.Equal(StoreIdent{NodeID: 300, ClusterID: "c"}.Encode(), []byte{1, 0xac, 0x02, 1, 'c'}) {
		t.Fatal("StoreIdent encoding changed")
	}
}

func TestUserSpan(t *testing.T) {
	lo, hi := UserSpan(nil, nil)
	if !bytes.Equal(lo, []byte{3}) || !bytes.Equal(hi, []byte{4}) {
		t.Fatalf("UserSpan(nil, nil) = %x, %x", lo, hi)
	}
	lo, hi = UserSpan([]byte("a"), []byte("b"))
	if string(lo) != "\x03a" || string(hi) != "\x03b" {
		t.Fatalf("UserSpan(a, b) = %q, %q", lo, hi)
	}
}

func TestStoreIdentRoundTrip(t *testing.T) {
	for _, s := range []StoreIdent{{1, ""}, {1 << 60, "3f2a9c"}} {
		got, err := DecodeStoreIdent(s.Encode())
		if err != nil || got != s {
			t.Errorf("round trip of %+v = %+v, %v", s, got, err)
		}
	}
	for _, bad := range [][]byte{nil, {2, 1, 0}, {1}, {1, 1, 5, 'x'}, {1, 1, 0, 'x'}} {
		if _, err := DecodeStoreIdent(bad); err == nil {
			t.Errorf("DecodeStoreIdent(%x) succeeded", bad)
		}
	}
}
