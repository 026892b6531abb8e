package keys

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestStoreIdentLayoutIsFrozen(t *testing.T) {
	want := []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 'i', 'd', 'e', 'n', 't'}
	if !bytes.Equal(StoreIdentKey, want) {
		t.Fatalf("StoreIdentKey = %x, want %x", StoreIdentKey, want)
	}
	if !bytes.Equal(StoreIdent{NodeID: 300, ClusterID: "c"}.Encode(), []byte{2, 0xac, 0x02, 1, 'c'}) {
		t.Fatal("StoreIdent encoding changed")
	}
	// The identity sorts before every per-range node-local key.
	if bytes.Compare(StoreIdentKey, HardStateKey(1)) >= 0 {
		t.Fatalf("StoreIdentKey %x does not sort before range 1's keys %x", StoreIdentKey, HardStateKey(1))
	}
	if _, err := DecodeUserKey(StoreIdentKey); err == nil {
		t.Fatal("the store identity decoded as a user key")
	}
}

func TestStoreIdentRoundTrip(t *testing.T) {
	for _, s := range []StoreIdent{{1, ""}, {1 << 60, "3f2a9c"}} {
		got, err := DecodeStoreIdent(s.Encode())
		if err != nil || got != s {
			t.Errorf("round trip of %+v = %+v, %v", s, got, err)
		}
	}
	for _, bad := range [][]byte{nil, {3, 1, 0}, {2}, {2, 1, 5, 'x'}, {2, 1, 0, 'x'}} {
		if _, err := DecodeStoreIdent(bad); err == nil {
			t.Errorf("DecodeStoreIdent(%x) succeeded", bad)
		}
	}
}

func TestStoreIdentRefusesOtherFormats(t *testing.T) {
	old := []byte{1, 0xac, 0x02, 1, 'c'} // a format 1 store's identity
	if _, err := DecodeStoreIdent(old); !errors.Is(err, ErrStoreFormat) || !strings.Contains(err.Error(), "format 1") {
		t.Fatalf("DecodeStoreIdent(format 1) = %v, want ErrStoreFormat naming format 1", err)
	}
	if _, err := DecodeStoreIdent([]byte{9, 1, 0}); !errors.Is(err, ErrStoreFormat) {
		t.Fatalf("DecodeStoreIdent(format 9) = %v, want ErrStoreFormat", err)
	}
}
