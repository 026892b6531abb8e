package keys

import (
	"bytes"
	"testing"
)

func TestStoreIdentLayoutIsFrozen(t *testing.T) {
	want := []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 'i', 'd', 'e', 'n', 't'}
	if !bytes.Equal(StoreIdentKey, want) {
		t.Fatalf("StoreIdentKey = %x, want %x", StoreIdentKey, want)
	}
	if !bytes.Equal(StoreIdent{NodeID: 300, ClusterID: "c"}.Encode(), []byte{1, 0xac, 0x02, 1, 'c'}) {
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
	for _, bad := range [][]byte{nil, {2, 1, 0}, {1}, {1, 1, 5, 'x'}, {1, 1, 0, 'x'}} {
		if _, err := DecodeStoreIdent(bad); err == nil {
			t.Errorf("DecodeStoreIdent(%x) succeeded", bad)
		}
	}
}
