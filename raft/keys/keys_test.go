package keys

import (
	"bytes"
	"sort"
	"testing"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/mvcc"
)

// TestKindsAreDisjointSpans checks the property the layout exists for: every
// kind of key sorts inside its own span, and per-range keys of one range
// sort together, away from every other range's.
func TestKindsAreDisjointSpans(t *testing.T) {
	for _, id := range []uint64{1, 2, 255, 256, 1 << 40, ^uint64(0) - 1} {
		local := NodeLocalRangeSpan(id)
		for _, k := range [][]byte{HardStateKey(id), ReplicaIDKey(id), TruncatedStateKey(id), TombstoneKey(id), LogKey(id, 0), LogKey(id, ^uint64(0))} {
			if !local.Contains(k) {
				t.Errorf("range %d: node-local key %x outside %v", id, k, local)
			}
			if NodeLocalRangeSpan(id + 1).Contains(k) {
				t.Errorf("range %d: key %x inside the next range's span", id, k)
			}
		}
		rl := RangeLocalSpan(id)
		for _, k := range [][]byte{AppliedStateKey(id), ConfStateKey(id), DescriptorKey(id), DedupFloorKey(id, 7), DedupRecordKey(id, ^uint64(0), ^uint64(0)),
			LockKey(id, nil), LockKey(id, []byte("\xff\xff\xff")), LockSpan(id, nil, nil).End,
			TxnRecordKey(id, make([]byte, 16)), TxnRecordSpan(id).End} {
			if !rl.Contains(k) {
				t.Errorf("range %d: range-local key %x outside %v", id, k, rl)
			}
			if k[0] != RangeLocalPrefix {
				t.Errorf("range-local key %x has prefix %#x", k, k[0])
			}
		}
	}
	if bytes.Compare(RangeLocalSpan(^uint64(0)).End, MetaSpan().Start) > 0 {
		t.Error("range-local span of the last range ID overlaps meta")
	}
	if bytes.Compare(MetaSpan().End, UserSpan(nil, nil).Start) > 0 {
		t.Error("meta span overlaps the user span")
	}
}

func TestLogKeysSortByIndex(t *testing.T) {
	idx := []uint64{0, 1, 9, 10, 255, 256, 1 << 32, ^uint64(0)}
	var ks [][]byte
	for _, i := range idx {
		ks = append(ks, LogKey(42, i))
	}
	if !sort.SliceIsSorted(ks, func(i, j int) bool { return bytes.Compare(ks[i], ks[j]) < 0 }) {
		t.Fatal("log keys do not sort by index")
	}
	for _, i := range idx {
		got, err := LogIndex(LogKey(42, i))
		if err != nil || got != i {
			t.Fatalf("LogIndex(LogKey(%d)) = %d, %v", i, got, err)
		}
		if !LogSpanAll(42).Contains(LogKey(42, i)) {
			t.Fatalf("LogKey(%d) outside LogSpanAll", i)
		}
	}
	if _, err := LogIndex(HardStateKey(42)); err == nil {
		t.Fatal("LogIndex accepted a HardState key")
	}
	if LogSpanAll(42).Contains(HardStateKey(42)) || LogSpanAll(42).Contains(TruncatedStateKey(42)) || LogSpanAll(42).Contains(ReplicaIDKey(42)) {
		t.Fatal("LogSpanAll covers a state key")
	}
	s := LogSpan(42, 10, 20)
	if !s.Contains(LogKey(42, 10)) || !s.Contains(LogKey(42, 19)) || s.Contains(LogKey(42, 20)) {
		t.Fatal("LogSpan is not [lo, hi)")
	}
}

// TestMetaLookupOrder: seeking to the first descriptor key > MetaLookupKey(k)
// finds the range whose [start, end) holds k, including the last range
// (end = +inf).
func TestMetaLookupOrder(t *testing.T) {
	ends := [][]byte{[]byte("b"), []byte("m"), []byte("m\x00"), nil}
	var descKeys [][]byte
	for _, e := range ends {
		descKeys = append(descKeys, MetaDescriptorKey(e))
	}
	if !sort.SliceIsSorted(descKeys, func(i, j int) bool { return bytes.Compare(descKeys[i], descKeys[j]) < 0 }) {
		t.Fatal("descriptor keys do not sort by end key with +inf last")
	}
	lookup := func(k string) int {
		lk := MetaLookupKey([]byte(k))
		for i, dk := range descKeys {
			if bytes.Compare(dk, lk) > 0 {
				return i
			}
		}
		return -1
	}
	for k, want := range map[string]int{"": 0, "a": 0, "b": 1, "l": 1, "m": 2, "m\x00": 3, "z": 3, "\xff\xff": 3} {
		if got := lookup(k); got != want {
			t.Errorf("lookup(%q) = range %d, want %d", k, got, want)
		}
	}
	for _, dk := range descKeys {
		if !MetaDescriptorSpan().Contains(dk) || !MetaSpan().Contains(dk) {
			t.Errorf("descriptor key %x outside the meta descriptor span", dk)
		}
	}
	if MetaDescriptorSpan().Contains(NodeKey(1)) || MetaDescriptorSpan().Contains(MetaRangeDescriptorKey()) {
		t.Error("meta descriptor span covers other meta keys")
	}
}

func TestDecoders(t *testing.T) {
	c, s, err := DecodeDedupRecordKey(DedupRecordKey(3, 77, 99))
	if err != nil || c != 77 || s != 99 {
		t.Fatalf("DecodeDedupRecordKey = %d %d %v", c, s, err)
	}
	if _, _, err := DecodeDedupRecordKey(DedupFloorKey(3, 77)); err == nil {
		t.Fatal("DecodeDedupRecordKey accepted a floor key")
	}
	lk, err := DecodeLockKey(LockKey(3, []byte("a\x00")))
	if err != nil || string(lk) != "a\x00" {
		t.Fatalf("DecodeLockKey = %q %v", lk, err)
	}
	if _, err := DecodeLockKey(DedupFloorKey(3, 77)); err == nil {
		t.Fatal("DecodeLockKey accepted a floor key")
	}
	if sp := LockSpan(3, []byte("b"), []byte("d")); !sp.Contains(LockKey(3, []byte("c"))) || sp.Contains(LockKey(3, []byte("d"))) ||
		!LockSpan(3, nil, nil).Contains(LockKey(3, []byte("\xff"))) {
		t.Fatal("LockSpan does not hold exactly its keys")
	}
	id := []byte("0123456789abcdef")
	if got, err := DecodeTxnRecordKey(TxnRecordKey(3, id)); err != nil || string(got) != string(id) || !TxnRecordSpan(3).Contains(TxnRecordKey(3, id)) {
		t.Fatalf("DecodeTxnRecordKey = %q %v", got, err)
	}
	n, err := DecodeNodeKey(NodeKey(12))
	if err != nil || n != 12 {
		t.Fatalf("DecodeNodeKey = %d %v", n, err)
	}
	u, err := DecodeUserKey(append([]byte{UserPrefix}, mvcc.EncodeKey([]byte("a\x00c"), hlc.Timestamp{WallTime: 5})...))
	if err != nil || string(u) != "a\x00c" {
		t.Fatalf("DecodeUserKey = %q %v", u, err)
	}
	if _, err := DecodeUserKey([]byte("\x03abc")); err == nil {
		t.Fatal("DecodeUserKey accepted a plain (format 1) user key")
	}
	if _, err := DecodeUserKey(NodeKey(1)); err == nil {
		t.Fatal("DecodeUserKey accepted a meta key")
	}
}

func TestRangeContainment(t *testing.T) {
	whole := &kvpb.RangeDescriptor{RangeId: 2}
	left := &kvpb.RangeDescriptor{RangeId: 3, EndKey: []byte("m")}
	right := &kvpb.RangeDescriptor{RangeId: 4, StartKey: []byte("m")}
	meta := &kvpb.RangeDescriptor{RangeId: MetaRangeID}
	for _, tc := range []struct {
		d    *kvpb.RangeDescriptor
		k    string
		want bool
	}{
		{whole, "", true}, {whole, "zzz", true},
		{left, "a", true}, {left, "m", false}, {left, "", true},
		{right, "m", true}, {right, "l", false}, {right, "\xff", true},
		{meta, "a", false},
	} {
		if got := ContainsUserKey(tc.d, []byte(tc.k)); got != tc.want {
			t.Errorf("ContainsUserKey(%v, %q) = %v", tc.d.GetRangeId(), tc.k, got)
		}
	}
	if !ContainsUserSpan(left, []byte("a"), []byte("m")) || ContainsUserSpan(left, []byte("a"), nil) ||
		!ContainsUserSpan(right, []byte("m"), nil) || ContainsUserSpan(right, []byte("a"), []byte("n")) {
		t.Error("ContainsUserSpan")
	}
	if got := DataSpan(meta); !bytes.Equal(got.Start, MetaSpan().Start) {
		t.Errorf("DataSpan(meta) = %v", got)
	}
	ds := DataSpan(left)
	ver := func(k string) []byte {
		return append([]byte{UserPrefix}, mvcc.EncodeKey([]byte(k), hlc.Timestamp{WallTime: 1})...)
	}
	if !ds.Contains(ver("a")) || ds.Contains(ver("m")) || !ds.Contains(ver("l\xff\xff")) {
		t.Errorf("DataSpan(left) = %v", ds)
	}
	if !DataSpan(right).Contains(ver("m")) || DataSpan(right).Contains(ver("l\xff")) {
		t.Errorf("DataSpan(right) = %v", DataSpan(right))
	}
	if !DataSpan(right).Contains(ver("\xff\xff")) {
		t.Error("DataSpan(right) misses the end of the key space")
	}
}
