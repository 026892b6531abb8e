package jepsen

import (
	"fmt"
	"slices"
	"strings"

	"github.com/shaledb/shale/client"
)

// The watch checker (docs/watch.md, docs/testing.md): each watcher of the
// run watches the set's keys and the watch workload's keys from some
// version on; what it received is checked against the write history:
//
//   - every acknowledged write above the watcher's start appears exactly
//     once, with its value and version (an acknowledged delete of a key
//     whose last event before it was not a put wrote nothing and may be
//     absent: a delete of an absent key is no change);
//   - no (key, version) appears twice, and each key's events come in
//     version order;
//   - every event is explained by a write that was attempted (an
//     indeterminate write may have applied; probe keys are ignored);
//   - no progress notice came before an event it covers: an acknowledged
//     write at or below a notice's version was delivered before it;
//   - the watcher's progress reached the last acknowledged write once
//     the writers stopped and the cluster healed.

// watchWrite is one write to a watched key, as the writer saw it.
type watchWrite struct {
	key     string
	value   string // "" for a delete
	deleted bool
	outcome outcome
	version client.Timestamp // when acknowledged
}

// watchLog is what one watcher delivered to its application.
type watchLog struct {
	name     string
	from     client.Timestamp // its start: events above it are expected
	events   []client.WatchEvent
	progress []watchMark
	// ended is the error that ended the watch early, if any.
	ended error
}

// watchMark is a progress notice and how many events came before it.
type watchMark struct {
	at     client.Timestamp
	before int
}

// last returns the log's last progress (zero if none).
func (l *watchLog) last() client.Timestamp {
	if len(l.progress) == 0 {
		return client.Timestamp{}
	}
	return l.progress[len(l.progress)-1].at
}

// watchCheck is the checker's verdict on one log.
type watchCheck struct {
	events   int
	expected int // acknowledged writes above the start
	problems []string
}

// checkWatchLog checks one watcher's log against writes (every write to
// the watched keys, acknowledged or not). top is the highest
// acknowledged version the watcher had to reach.
func checkWatchLog(l *watchLog, writes []watchWrite, top client.Timestamp) watchCheck {
	res := watchCheck{events: len(l.events)}
	bad := func(format string, args ...any) {
		if len(res.problems) < 20 {
			res.problems = append(res.problems, l.name+": "+fmt.Sprintf(format, args...))
		}
	}
	if l.ended != nil {
		bad("the watch ended: %v", l.ended)
	}
	attempted := map[string]bool{}
	for _, w := range writes {
		attempted[w.key+"="+w.value] = true
	}
	type kv struct {
		key string
		v   client.Timestamp
	}
	at := map[kv]int{}
	lastOf := map[string]int{} // index of each key's latest event
	for i, e := range l.events {
		k := kv{string(e.Key), e.Version}
		if strings.HasSuffix(k.key, probeSuffix) {
			continue
		}
		if j, dup := at[k]; dup {
			bad("%q@%s delivered twice (events %d and %d)", e.Key, e.Version, j, i)
			continue
		}
		at[k] = i
		if j, ok := lastOf[k.key]; ok && !l.events[j].Version.Less(e.Version) {
			bad("%q@%s delivered after %q@%s: not in version order", e.Key, e.Version, e.Key, l.events[j].Version)
		}
		lastOf[k.key] = i
		if !l.from.Less(e.Version) {
			bad("%q@%s is at or below the watch's start %s", e.Key, e.Version, l.from)
		}
		val := string(e.Value)
		if e.Type == client.WatchDelete {
			val = ""
		}
		if !attempted[k.key+"="+val] {
			bad("event %v %q=%q@%s matches no write", e.Type, e.Key, val, e.Version)
		}
	}
	for _, w := range writes {
		if w.outcome != okOutcome || !l.from.Less(w.version) || top.Less(w.version) {
			continue
		}
		i, ok := at[kv{w.key, w.version}]
		if !ok {
			if w.deleted && !putBefore(l.events, w.key, w.version) {
				continue // deleted an absent key: no change
			}
			res.expected++
			bad("acknowledged %s %q=%q@%s never delivered", map[bool]string{true: "delete", false: "put"}[w.deleted], w.key, w.value, w.version)
			continue
		}
		res.expected++
		e := l.events[i]
		if (e.Type == client.WatchDelete) != w.deleted || (!w.deleted && string(e.Value) != w.value) {
			bad("%q@%s delivered as %v %q, written as %q", w.key, w.version, e.Type, e.Value, w.value)
		}
		// The first notice at or above the write must come after it.
		if m, found := slices.BinarySearchFunc(l.progress, w.version, func(m watchMark, v client.Timestamp) int {
			return m.at.Compare(v)
		}); found || m < len(l.progress) {
			if l.progress[m].before <= i {
				bad("progress %s was delivered before the event %q@%s it covers", l.progress[m].at, w.key, w.version)
			}
		}
	}
	if l.last().Less(top) {
		bad("progress reached only %s, not the last acknowledged write's version %s", l.last(), top)
	}
	return res
}

// putBefore reports whether the latest of events for key below v is a put.
func putBefore(events []client.WatchEvent, key string, v client.Timestamp) bool {
	var best *client.WatchEvent
	for i := range events {
		e := &events[i]
		if string(e.Key) == key && e.Version.Less(v) && (best == nil || best.Version.Less(e.Version)) {
			best = e
		}
	}
	return best != nil && best.Type == client.WatchPut
}
