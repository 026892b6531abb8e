package jepsen

import (
	"strings"
	"testing"

	"github.com/shaledb/shale/client"
)

// TestWatchCheckerCatches: a correct log passes, and each kind of broken
// log is reported for what it breaks.
func TestWatchCheckerCatches(t *testing.T) {
	v := func(n int64) client.Timestamp { return client.Timestamp{WallTime: n} }
	put := func(k, val string, n int64) client.WatchEvent {
		return client.WatchEvent{Type: client.WatchPut, Key: []byte(k), Value: []byte(val), Version: v(n)}
	}
	del := func(k string, n int64) client.WatchEvent {
		return client.WatchEvent{Type: client.WatchDelete, Key: []byte(k), Version: v(n)}
	}
	writes := []watchWrite{
		{key: "watch/0", value: "a", outcome: okOutcome, version: v(10)},
		{key: "watch/1", value: "b", outcome: okOutcome, version: v(11)},
		{key: "watch/0", deleted: true, outcome: okOutcome, version: v(12)},
		{key: "watch/1", deleted: true, outcome: okOutcome, version: v(9)}, // before the start
		{key: "watch/2", value: "maybe", outcome: unknownOutcome},
		{key: "watch/3", deleted: true, outcome: okOutcome, version: v(13)}, // of an absent key
	}
	good := []client.WatchEvent{put("watch/0", "a", 10), put("watch/1", "b", 11), del("watch/0", 12), put("watch/2", "maybe", 14)}
	marks := []watchMark{{at: v(9), before: 0}, {at: v(11), before: 2}, {at: v(14), before: 4}}
	check := func(name string, events []client.WatchEvent, progress []watchMark, want string) {
		t.Helper()
		l := &watchLog{name: name, from: v(9), events: events, progress: progress}
		res := checkWatchLog(l, writes, v(13))
		got := strings.Join(res.problems, "; ")
		switch {
		case want == "" && got != "":
			t.Errorf("%s: a correct log was reported: %s", name, got)
		case want != "" && !strings.Contains(got, want):
			t.Errorf("%s: want a problem containing %q, got %q", name, want, got)
		}
	}
	check("correct", good, marks, "")
	check("lost", []client.WatchEvent{good[0], good[2], good[3]}, marks, `put "watch/1"="b"@`)
	check("repeated", append(append([]client.WatchEvent{}, good...), good[1]), marks, "delivered twice")
	check("out of order", []client.WatchEvent{good[2], good[0], good[1], good[3]}, marks, "not in version order")
	check("unexplained", append(append([]client.WatchEvent{}, good...), put("watch/1", "zzz", 15)), marks, "matches no write")
	check("wrong value", []client.WatchEvent{put("watch/0", "b", 10), good[1], good[2], good[3]}, marks, "delivered as")
	check("progress ahead", good, []watchMark{{at: v(11), before: 1}, {at: v(14), before: 4}}, "progress")
	check("never caught up", good, marks[:2], "progress reached only")
	check("below the start", append([]client.WatchEvent{del("watch/1", 9)}, good...), marks, "at or below the watch's start")
}
