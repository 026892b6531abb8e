package jepsen

import (
	"strconv"
	"strings"
	"testing"

	"github.com/shaledb/shale/client"
)

// snapshot builds a read of the workload's keys: vals[i] for key i.
func snapshot(vals func(i int) int) []scanEntry {
	out := make([]scanEntry, scanKeys)
	for i := range out {
		out[i] = scanEntry{key: scanKey(i), value: strconv.Itoa(vals(i))}
	}
	return out
}

// TestCheckSnapshot holds the consistent-scan checker to known answers,
// planted torn snapshots among them, so that a checker that accepts
// everything cannot pass.
func TestCheckSnapshot(t *testing.T) {
	cases := []struct {
		name    string
		entries []scanEntry
		want    string // "" consistent, else a word the reason must hold
	}{
		{"one round everywhere", snapshot(func(int) int { return 7 }), ""},
		{"writer half way", snapshot(func(i int) int { return map[bool]int{true: 8, false: 7}[i < 42] }), ""},
		{"writer at the last key", snapshot(func(i int) int { return map[bool]int{true: 8, false: 7}[i < 99] }), ""},
		{"probe keys are ignored", append(snapshot(func(int) int { return 3 }), scanEntry{key: scanKey(10) + probeSuffix, value: "probe"}), ""},
		// A scan that read k00-k49 before the writer's round 8 reached
		// them and k50-k99 after: a value rises.
		{"planted: later ranges newer", snapshot(func(i int) int { return map[bool]int{true: 7, false: 8}[i < 50] }), "rises"},
		// Read k00-k29 two rounds after k30-k99.
		{"planted: falls two steps", snapshot(func(i int) int { return map[bool]int{true: 9, false: 7}[i < 30] }), "falls 2 steps"},
		{"planted: falls twice by one", snapshot(func(i int) int {
			switch {
			case i < 20:
				return 9
			case i < 60:
				return 8
			}
			return 7
		}), "falls 2 steps"},
		{"planted: one key behind", snapshot(func(i int) int { return map[bool]int{true: 6, false: 7}[i == 40] }), "rises"},
		{"round 0 half written", snapshot(func(int) int { return 0 })[:50], ""},
		{"nothing written yet", nil, ""},
		{"planted: first key missing", snapshot(func(int) int { return 1 })[1:], "rises"},
		{"planted: a key in the middle missing", append(snapshot(func(int) int { return 0 })[:40], snapshot(func(int) int { return 0 })[41:]...), "rises"},
		{"planted: round 1 begun, round 0 not done", snapshot(func(i int) int { return map[bool]int{true: 1, false: 0}[i < 10] })[:60], "falls 2 steps"},
		{"key twice", append(snapshot(func(int) int { return 1 }), scanEntry{key: scanKey(5), value: "1"}), "twice"},
		{"stray key", append(snapshot(func(int) int { return 1 }), scanEntry{key: "cs/zz", value: "1"}), "unexpected"},
		{"not a round", append(snapshot(func(int) int { return 1 })[1:], scanEntry{key: scanKey(0), value: "x"}), "round number"},
	}
	for _, c := range cases {
		got := checkSnapshot(c.entries)
		switch {
		case c.want == "" && got != "":
			t.Errorf("%s: flagged a consistent read: %s", c.name, got)
		case c.want != "" && !strings.Contains(got, c.want):
			t.Errorf("%s: checkSnapshot = %q, want a violation saying %q", c.name, got, c.want)
		}
	}
}

// TestScanCheckVersions: a read holding a version above its own
// timestamp is flagged, and as-of comparisons catch any difference.
func TestScanCheckVersions(t *testing.T) {
	var w scanWorkload
	read := func(version int64) []client.KeyValue {
		var out []client.KeyValue
		for _, e := range snapshot(func(int) int { return 4 }) {
			out = append(out, client.KeyValue{Key: []byte(e.key), Value: []byte(e.value), Version: client.Timestamp{WallTime: version}})
		}
		return out
	}
	if why := w.check(read(10), client.Timestamp{WallTime: 10}); why != "" {
		t.Fatalf("a read at its own timestamp was flagged: %s", why)
	}
	if why := w.check(read(11), client.Timestamp{WallTime: 10}); !strings.Contains(why, "above the read's timestamp") {
		t.Fatalf("a version above the read's timestamp: check = %q", why)
	}
	if why := sameEntries(read(10), read(10)); why != "" {
		t.Fatalf("identical reads differ: %s", why)
	}
	changed := read(10)
	changed[50].Value = []byte("5")
	if why := sameEntries(read(10), changed); why == "" {
		t.Fatal("a changed value went unnoticed")
	}
	if why := sameEntries(read(10), read(9)); why == "" {
		t.Fatal("changed versions went unnoticed")
	}
	if why := sameEntries(read(10), read(10)[1:]); why == "" {
		t.Fatal("a missing entry went unnoticed")
	}
	withProbe := append(read(10), client.KeyValue{Key: []byte(scanKey(99) + probeSuffix)})
	if why := sameEntries(withProbe, read(10)); why != "" {
		t.Fatalf("a BatchGet without the probe key: %s", why)
	}
	if why := sameEntries(read(10), withProbe); why != "" {
		t.Fatalf("a scan with the probe key after a BatchGet: %s", why)
	}
}
