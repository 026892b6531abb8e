package jepsen

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/shaledb/shale/client"
)

// These tests hold the checker to known answers on small hand-written
// histories, so that a checker that accepts everything cannot pass.

func get(worker int, key string, found bool, value string, call, ret int64) op {
	return op{Worker: worker, Input: regInput{Kind: opGet, Key: key}, Output: regOutput{Found: found, Value: value}, Call: call, Return: ret}
}

func put(worker int, key, value string, call, ret int64, oc outcome) op {
	return op{Worker: worker, Input: regInput{Kind: opPut, Key: key, Value: value}, Call: call, Return: ret, outcome: oc}
}

func TestCheckerRegister(t *testing.T) {
	cases := []struct {
		name  string
		ops   []op
		legal bool
	}{
		{"read your write", []op{put(0, "k", "1", 0, 10, okOutcome), get(1, "k", true, "1", 20, 30)}, true},
		{"stale read after an acknowledged put", []op{
			put(0, "k", "1", 0, 10, okOutcome), put(0, "k", "2", 20, 30, okOutcome), get(1, "k", true, "1", 40, 50)}, false},
		{"read of a value never written", []op{get(1, "k", true, "9", 0, 10)}, false},
		{"concurrent read may see either", []op{
			put(0, "k", "1", 0, 10, okOutcome), put(0, "k", "2", 20, 60, okOutcome), get(1, "k", true, "1", 30, 40)}, true},
		{"indeterminate put may have happened late", []op{
			put(0, "k", "1", 0, 10, unknownOutcome), get(1, "k", false, "", 20, 30), get(1, "k", true, "1", 40, 50)}, true},
		{"indeterminate put may never happen", []op{
			put(0, "k", "1", 0, 10, unknownOutcome), get(1, "k", false, "", 20, 30)}, true},
		{"failed put never happens", []op{
			put(0, "k", "1", 0, 10, failOutcome), get(1, "k", true, "1", 20, 30)}, false},
		{"cas swaps on the current value", []op{
			put(0, "k", "1", 0, 10, okOutcome),
			{Worker: 1, Input: regInput{Kind: opCAS, Key: "k", Expect: "1", Value: "2"}, Output: regOutput{Swapped: true}, Call: 20, Return: 30},
			get(0, "k", true, "2", 40, 50)}, true},
		{"cas cannot swap on an old value", []op{
			put(0, "k", "1", 0, 10, okOutcome), put(0, "k", "3", 12, 15, okOutcome),
			{Worker: 1, Input: regInput{Kind: opCAS, Key: "k", Expect: "1", Value: "2"}, Output: regOutput{Swapped: true}, Call: 20, Return: 30}}, false},
		{"failed cas reports the current value", []op{
			put(0, "k", "1", 0, 10, okOutcome),
			{Worker: 1, Input: regInput{Kind: opCAS, Key: "k", ExpectAbsent: true, Value: "2"}, Output: regOutput{Found: true, Value: "1"}, Call: 20, Return: 30}}, true},
		// What a wrong GC (gc-split-merge) would make a read return: the
		// key's newest version collected, or an older one showing
		// through a collected newer one.
		{"GC lost the newest version", []op{
			put(0, "k", "1", 0, 10, okOutcome), put(0, "k", "2", 20, 30, okOutcome), get(1, "k", false, "", 40, 50)}, false},
		{"GC let an older version show through", []op{
			put(0, "k", "1", 0, 10, okOutcome), put(0, "k", "2", 20, 30, okOutcome), get(1, "k", true, "2", 40, 50),
			get(1, "k", true, "1", 60, 70)}, false},
		{"failed cas with a wrong current value", []op{
			put(0, "k", "1", 0, 10, okOutcome),
			{Worker: 1, Input: regInput{Kind: opCAS, Key: "k", ExpectAbsent: true, Value: "2"}, Output: regOutput{Found: true, Value: "7"}, Call: 20, Return: 30}}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			res, err := checkRegister(tc.ops, dir)
			if err != nil {
				t.Fatal(err)
			}
			if res.histories != 1 {
				t.Fatalf("checked %d histories, want 1", res.histories)
			}
			if got := len(res.violations) == 0 && len(res.timeouts) == 0; got != tc.legal {
				t.Fatalf("legal = %v, want %v (violations %v, timeouts %v)", got, tc.legal, res.violations, res.timeouts)
			}
			if !tc.legal {
				for _, f := range []string{"key-k.json", "key-k.html"} {
					if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
						t.Errorf("artifact %s not written: %v", f, err)
					}
				}
			}
		})
	}
}

// The history is split by key: a violation on one key is found even when
// another key's history is fine.
func TestCheckerSplitsByKey(t *testing.T) {
	ops := []op{put(0, "a", "1", 0, 10, okOutcome), get(1, "a", true, "1", 20, 30),
		put(0, "b", "1", 0, 10, okOutcome), get(1, "b", false, "", 20, 30)}
	res, err := checkRegister(ops, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if res.histories != 2 || len(res.violations) != 1 || res.violations[0] != "b" {
		t.Fatalf("histories %d, violations %v; want 2 and [b]", res.histories, res.violations)
	}
}

func TestCheckerSet(t *testing.T) {
	attempted := map[string]setAdd{
		"set/1": {value: "1", outcome: okOutcome}, "set/2": {value: "2", outcome: okOutcome},
		"set/3": {value: "3", outcome: unknownOutcome}, "set/4": {value: "4", outcome: failOutcome},
	}
	res := checkSet(attempted, map[string]string{"set/1": "1", "set/3": "3", "set/4": "4", "set/9": "9"})
	if res.acked != 2 || len(res.lost) != 1 || res.lost[0] != "set/2" {
		t.Errorf("acked %d, lost %v; want 2 and [set/2]", res.acked, res.lost)
	}
	if res.recovered != 1 {
		t.Errorf("recovered %d, want 1", res.recovered)
	}
	if len(res.unexpected) != 2 {
		t.Errorf("unexpected %v; want set/4 (failed) and set/9 (never added)", res.unexpected)
	}
}

// TestCheckerBackup: the backup check holds a restored backup to the set's
// state at the backup's timestamp: adds acknowledged at or below it
// present with their values, later and failed adds absent, indeterminate
// ones either way, nothing else.
func TestCheckerBackup(t *testing.T) {
	ts := func(w int64) client.Timestamp { return client.Timestamp{WallTime: w} }
	attempted := map[string]setAdd{
		"set/1": {value: "1", outcome: okOutcome, version: ts(10)},
		"set/2": {value: "2", outcome: okOutcome, version: ts(20)},
		"set/3": {value: "3", outcome: okOutcome, version: ts(30)},
		"set/4": {value: "4", outcome: unknownOutcome},
		"set/5": {value: "5", outcome: failOutcome},
	}
	at := ts(20)
	good := checkBackup(attempted, at, map[string]string{"set/1": "1", "set/2": "2", "set/4": "4"})
	if len(good.problems()) != 0 || good.expected != 2 || good.later != 1 || good.recovered != 1 {
		t.Fatalf("a correct backup: %+v, problems %v", good, good.problems())
	}
	for _, c := range []struct {
		name     string
		restored map[string]string
		missing  int
		extra    int
	}{
		{"a key dropped", map[string]string{"set/2": "2"}, 1, 0},
		{"a wrong value", map[string]string{"set/1": "1", "set/2": "x"}, 1, 0},
		{"a write after the timestamp", map[string]string{"set/1": "1", "set/2": "2", "set/3": "3"}, 0, 1},
		{"a failed add", map[string]string{"set/1": "1", "set/2": "2", "set/5": "5"}, 0, 1},
		{"an indeterminate add with another value", map[string]string{"set/1": "1", "set/2": "2", "set/4": "y"}, 0, 1},
		{"a key never added", map[string]string{"set/1": "1", "set/2": "2", "set/9": "9"}, 0, 1},
	} {
		res := checkBackup(attempted, at, c.restored)
		if len(res.missing) != c.missing || len(res.extra) != c.extra || len(res.problems()) == 0 {
			t.Errorf("%s: missing %v, extra %v; want %d and %d", c.name, res.missing, res.extra, c.missing, c.extra)
		}
	}
}
