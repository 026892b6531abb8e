package mvcc

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/shaledb/shale/hlc"
)

// compareVersions is the order versioned keys must have: user key
// ascending, then version descending (newest first).
func compareVersions(ka []byte, ta hlc.Timestamp, kb []byte, tb hlc.Timestamp) int {
	if c := bytes.Compare(ka, kb); c != 0 {
		return c
	}
	return tb.Compare(ta)
}

func TestKeyGrammarExample(t *testing.T) {
	got := EncodeKey([]byte("a\x00b"), hlc.Timestamp{WallTime: 1, Logical: 2})
	want := []byte{
		'a', 0x00, 0xFF, 'b', 0x00, 0x01, // key_enc
		0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFE, // ^wall
		0xFF, 0xFF, 0xFF, 0xFD, // ^logical
		13, // suffix length
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("EncodeKey = % x\nwant        % x", got, want)
	}
}

func checkOrder(t *testing.T, ka []byte, ta hlc.Timestamp, kb []byte, tb hlc.Timestamp) {
	t.Helper()
	ea, eb := EncodeKey(ka, ta), EncodeKey(kb, tb)
	if got, want := bytes.Compare(ea, eb), compareVersions(ka, ta, kb, tb); got != want {
		t.Fatalf("order of (%q@%s, %q@%s): encoded %d, want %d", ka, ta, kb, tb, got, want)
	}
	for _, c := range []struct {
		enc []byte
		key []byte
		ts  hlc.Timestamp
	}{{ea, ka, ta}, {eb, kb, tb}} {
		k, ts, err := DecodeKey(nil, c.enc)
		if err != nil || !bytes.Equal(k, c.key) || ts != c.ts {
			t.Fatalf("DecodeKey(EncodeKey(%q, %s)) = %q, %s, %v", c.key, c.ts, k, ts, err)
		}
		n, err := SplitKey(c.enc)
		if err != nil || !bytes.Equal(c.enc[:n], AppendKeyPrefix(nil, c.key)) {
			t.Fatalf("SplitKey(%x) = %d, %v", c.enc, n, err)
		}
		// Every version lies in [AppendKeyPrefix(key), KeyEnd(key)).
		if bytes.Compare(c.enc, AppendKeyPrefix(nil, c.key)) <= 0 || bytes.Compare(c.enc, KeyEnd(nil, c.key)) >= 0 {
			t.Fatalf("%q@%s outside its key's bounds", c.key, c.ts)
		}
	}
	// KeyEnd of the smaller key is at or below every version of a larger one.
	if c := bytes.Compare(ka, kb); c < 0 && bytes.Compare(KeyEnd(nil, ka), eb) > 0 {
		t.Fatalf("KeyEnd(%q) above a version of %q", ka, kb)
	} else if c > 0 && bytes.Compare(KeyEnd(nil, kb), ea) > 0 {
		t.Fatalf("KeyEnd(%q) above a version of %q", kb, ka)
	}
}

var edgeKeys = [][]byte{
	{}, {0x00}, {0x00, 0x00}, {0x00, 0x01}, {0x00, 0xFF}, {0x01}, {0xFF}, {0xFF, 0x00},
	[]byte("a"), []byte("a\x00"), []byte("a\x00\x01"), []byte("a\x01"), []byte("ab"), []byte("b"),
}

var edgeTimestamps = []hlc.Timestamp{
	{}, {Logical: 1}, {WallTime: 1}, {WallTime: 1, Logical: math.MaxInt32},
	{WallTime: 255}, {WallTime: 256}, {WallTime: 1 << 56}, hlc.MaxTimestamp,
}

func TestKeyOrderOnEdgeCases(t *testing.T) {
	for _, ka := range edgeKeys {
		for _, kb := range edgeKeys {
			for _, ta := range edgeTimestamps {
				for _, tb := range edgeTimestamps {
					checkOrder(t, ka, ta, kb, tb)
				}
			}
		}
	}
}

func TestKeyOrderRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	randKey := func() []byte {
		k := make([]byte, r.IntN(5))
		for i := range k {
			k[i] = []byte{0x00, 0x01, 0xFF, 'a'}[r.IntN(4)]
		}
		return k
	}
	randTS := func() hlc.Timestamp {
		return hlc.Timestamp{WallTime: r.Int64N(3) << (8 * r.IntN(8)), Logical: r.Int32N(3)}
	}
	for i := 0; i < 200000; i++ {
		checkOrder(t, randKey(), randTS(), randKey(), randTS())
	}
}

func TestSortedEncodingsMatchSortedVersions(t *testing.T) {
	type kv struct {
		k  []byte
		ts hlc.Timestamp
	}
	var all []kv
	for _, k := range edgeKeys {
		for _, ts := range edgeTimestamps {
			all = append(all, kv{k, ts})
		}
	}
	encs := make([][]byte, len(all))
	for i, e := range all {
		encs[i] = EncodeKey(e.k, e.ts)
	}
	slices.SortFunc(all, func(a, b kv) int { return compareVersions(a.k, a.ts, b.k, b.ts) })
	slices.SortFunc(encs, bytes.Compare)
	for i := range all {
		if !bytes.Equal(encs[i], EncodeKey(all[i].k, all[i].ts)) {
			t.Fatalf("position %d: sorted encodings and sorted versions disagree", i)
		}
	}
}

func TestDecodeKeyRejectsMalformed(t *testing.T) {
	good := EncodeKey([]byte("k"), hlc.Timestamp{WallTime: 9})
	cases := map[string][]byte{
		"empty":          nil,
		"too short":      good[:SuffixLen],
		"bad length":     append(append([]byte{}, good[:len(good)-1]...), 12),
		"no terminator":  append([]byte("k"), good[3:]...),
		"bad escape":     append([]byte{'k', 0x00, 0x07, 0x00, 0x01}, good[3:]...),
		"early end":      append([]byte{'k', 0x00, 0x01, 'x', 0x00, 0x01}, good[3:]...),
		"negative wall":  append([]byte{'k', 0x00, 0x01}, append(make([]byte, 12), 13)...),
		"lone escape":    append([]byte{0x00}, good[3:]...),
		"unescaped zero": append([]byte{'k', 0x00, 0x00, 0x01}, good[3:]...),
	}
	for name, b := range cases {
		if _, _, err := DecodeKey(nil, b); !errors.Is(err, ErrMalformedKey) {
			t.Errorf("%s: DecodeKey(% x) = %v, want ErrMalformedKey", name, b, err)
		}
	}
}

func TestDecodeKeyAppendsToDst(t *testing.T) {
	buf := []byte("prefix:")
	k, _, err := DecodeKey(buf, EncodeKey([]byte("a\x00b"), hlc.Timestamp{WallTime: 1}))
	if err != nil || string(k) != "prefix:a\x00b" {
		t.Fatalf("DecodeKey with dst = %q, %v", k, err)
	}
}
