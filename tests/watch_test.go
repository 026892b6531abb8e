package tests

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shaledb/shale/client"
)

// watchLog is what one watcher received: its events in order, and each
// progress notice with how many events had come before it.
type watchLog struct {
	mu       sync.Mutex
	events   []client.WatchEvent
	progress []watchMark
	err      error
}

type watchMark struct {
	at     client.Timestamp
	before int
}

// consume reads ch into l until it closes.
func (l *watchLog) consume(ch <-chan client.WatchResponse) {
	for resp := range ch {
		l.mu.Lock()
		l.events = append(l.events, resp.Events...)
		if !resp.Progress.IsZero() {
			l.progress = append(l.progress, watchMark{at: resp.Progress, before: len(l.events)})
		}
		if resp.Err != nil {
			l.err = resp.Err
		}
		l.mu.Unlock()
	}
}

// reached waits until l's progress is at least v.
func (l *watchLog) reached(t *testing.T, name string, v client.Timestamp, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		l.mu.Lock()
		var p client.Timestamp
		if n := len(l.progress); n > 0 {
			p = l.progress[n-1].at
		}
		err := l.err
		l.mu.Unlock()
		if err != nil {
			t.Fatalf("%s: the watch ended: %v", name, err)
		}
		if v.LessEq(p) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: progress %s has not reached %s after %v", name, p, v, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ackedWrite is one write to the watched span and its outcome.
type ackedWrite struct {
	key     string
	value   string // "" for a delete
	version client.Timestamp
}

// checkWatch checks l against the writes: every acknowledged write with a
// version above from appears exactly once, with its value; each key's
// events are in version order (an acknowledged delete of a key whose
// last event was not a put wrote nothing and is excused); an event that no write explains (an
// ambiguous write that applied is explained by attempted) is an error;
// the watched span is the prefix "w/";
// and no progress notice came before an event at or below it.
func checkWatch(t *testing.T, name string, l *watchLog, from client.Timestamp, acked []ackedWrite, attempted map[string]bool) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	type kv struct {
		key string
		v   client.Timestamp
	}
	at := map[kv]int{}
	last := map[string]client.Timestamp{}
	for i, e := range l.events {
		k := kv{string(e.Key), e.Version}
		if j, dup := at[k]; dup {
			t.Fatalf("%s: %q@%s delivered twice (events %d and %d)", name, e.Key, e.Version, j, i)
		}
		at[k] = i
		if p, ok := last[string(e.Key)]; ok && !p.Less(e.Version) {
			t.Fatalf("%s: %q@%s delivered after %q@%s: not in version order", name, e.Key, e.Version, e.Key, p)
		}
		last[string(e.Key)] = e.Version
		val := string(e.Value)
		if e.Type == client.WatchDelete {
			val = ""
		}
		if !attempted[string(e.Key)+"="+val] {
			t.Fatalf("%s: event %q=%q@%s matches no write", name, e.Key, val, e.Version)
		}
	}
	for _, w := range acked {
		if !from.Less(w.version) || !strings.HasPrefix(w.key, "w/") {
			continue
		}
		i, ok := at[kv{w.key, w.version}]
		if !ok && w.value == "" && !liveBefore(l.events, w.key, w.version) {
			continue // a delete of an absent key writes nothing
		}
		if !ok {
			t.Fatalf("%s: acknowledged write %q=%q@%s never delivered (%d events)", name, w.key, w.value, w.version, len(l.events))
		}
		e := l.events[i]
		if got := string(e.Value); got != w.value || (w.value == "") != (e.Type == client.WatchDelete) {
			t.Fatalf("%s: %q@%s delivered as %v %q, written as %q", name, w.key, w.version, e.Type, got, w.value)
		}
		for _, m := range l.progress {
			if w.version.LessEq(m.at) && m.before <= i {
				t.Fatalf("%s: progress %s was delivered before the event %q@%s it covers", name, m.at, w.key, w.version)
			}
		}
	}
}

// liveBefore reports whether the last of events for key below v is a put.
func liveBefore(events []client.WatchEvent, key string, v client.Timestamp) bool {
	var best *client.WatchEvent
	for i := range events {
		e := &events[i]
		if string(e.Key) == key && e.Version.Less(v) && (best == nil || best.Version.Less(e.Version)) {
			best = e
		}
	}
	return best != nil && best.Type == client.WatchPut
}

// TestClusterWatchThroughSplitMergeMoveAndKill watches a span from a past
// version and from now while it is written, split, merged, its leader
// moved and its leader's node killed and restarted: each watcher gets
// every acknowledged write exactly once, in version order per key, and
// progress never runs ahead of an event.
func TestClusterWatchThroughSplitMergeMoveAndKill(t *testing.T) {
	c := newCluster(t, 3)
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	var mu sync.Mutex
	var acked []ackedWrite
	attempted := map[string]bool{}
	write := func(key, value string) {
		mu.Lock()
		attempted[key+"="+value] = true
		mu.Unlock()
		wctx, wcancel := context.WithTimeout(ctx, 15*time.Second)
		defer wcancel()
		var v client.Timestamp
		var err error
		if value == "" {
			v, err = cl.DeleteVersioned(wctx, []byte(key))
		} else {
			v, err = cl.PutVersioned(wctx, []byte(key), []byte(value))
		}
		if err == nil && !v.IsZero() {
			mu.Lock()
			acked = append(acked, ackedWrite{key: key, value: value, version: v})
			mu.Unlock()
		} else if err != nil && !errors.Is(err, client.ErrAmbiguous) && !errors.Is(err, client.ErrUnavailable) {
			t.Errorf("write %q: %v", key, err)
		}
	}
	// History before the watches start, and a key outside the span.
	var from client.Timestamp
	for i := range 20 {
		write(fmt.Sprintf("w/%03d", i), fmt.Sprintf("h%d", i))
		if i == 4 {
			mu.Lock()
			from = acked[len(acked)-1].version
			mu.Unlock()
		}
	}
	write("x/outside", "no")

	past, now := &watchLog{}, &watchLog{}
	chPast, err := cl.Watch(ctx, []byte("w/"), client.PrefixEnd([]byte("w/")), &client.WatchOptions{From: from, PrevValues: true})
	if err != nil {
		t.Fatal(err)
	}
	chNow, err := cl.Watch(ctx, []byte("w/"), []byte("w0"), nil)
	if err != nil {
		t.Fatal(err)
	}
	go past.consume(chPast)
	go now.consume(chNow)
	// "From now" starts when its first progress notice arrives.
	now.reached(t, "now", client.Timestamp{WallTime: 1}, 30*time.Second)
	now.mu.Lock()
	nowFrom := now.progress[0].at
	now.mu.Unlock()

	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 300 {
			key := fmt.Sprintf("w/%03d", i%60)
			if i%7 == 3 {
				write(key, "")
			} else {
				write(key, fmt.Sprintf("v%d", i))
			}
			if ctx.Err() != nil {
				return
			}
		}
	}()
	// Disturbances while the writes go on.
	step := func(what string, f func() error) {
		if err := f(); err != nil {
			t.Logf("%s: %v", what, err)
		}
		time.Sleep(300 * time.Millisecond) // let writes land between steps (not a wait for state)
	}
	step("split", func() error { _, _, err := cl.Split(ctx, []byte("w/030")); return err })
	step("split", func() error { _, _, err := cl.Split(ctx, []byte("w/045")); return err })
	leader, _ := c.leader(userRange, 10*time.Second)
	for _, n := range c.all() {
		if n.id != leader {
			step("move leader", func() error { return cl.TransferLeader(ctx, userRange, n.id) })
			break
		}
	}
	step("merge", func() error { _, err := cl.Merge(ctx, []byte("w/030")); return err })
	leader, _ = c.leader(userRange, 10*time.Second)
	c.node(leader).kill()
	time.Sleep(time.Second)
	c.start(leader)
	<-done

	mu.Lock()
	var top client.Timestamp
	for _, w := range acked {
		top = top.Forward(w.version)
	}
	ws := append([]ackedWrite(nil), acked...)
	at := map[string]bool{}
	for k := range attempted {
		at[k] = true
	}
	mu.Unlock()
	past.reached(t, "past", top, 60*time.Second)
	now.reached(t, "now", top, 60*time.Second)
	checkWatch(t, "past", past, from, ws, at)
	checkWatch(t, "now", now, nowFrom, ws, at)
	for _, e := range past.events {
		if string(e.Key) == "x/outside" {
			t.Fatalf("an event outside the span: %q", e.Key)
		}
	}
}

// TestClusterWatchBadInput: an empty or inverted span is refused at once,
// and a start below the GC threshold ends the watch with ErrHistoryCompacted.
func TestClusterWatchBadInput(t *testing.T) {
	c := newCluster(t, 1, "--history-retention", "1s", "--history-gc-interval", "1s")
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, span := range [][2]string{{"b", "a"}, {"a", "a"}} {
		if _, err := cl.Watch(ctx, []byte(span[0]), []byte(span[1]), nil); !errors.Is(err, client.ErrInvalidArgument) {
			t.Fatalf("Watch [%q, %q) = %v, want ErrInvalidArgument", span[0], span[1], err)
		}
	}
	// History to collect: versions of one key, then wait for GC to pass them.
	var first client.Timestamp
	for i := range 5 {
		v, err := cl.PutVersioned(ctx, []byte("g"), []byte(fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = v
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		wctx, wcancel := context.WithCancel(ctx)
		ch, err := cl.Watch(wctx, []byte("g"), []byte("h"), &client.WatchOptions{From: first})
		if err != nil {
			t.Fatal(err)
		}
		var got error
		for resp := range ch {
			if resp.Err != nil {
				got = resp.Err
				break
			}
			if !resp.Progress.IsZero() {
				break // served: GC has not passed it yet
			}
		}
		wcancel()
		if errors.Is(got, client.ErrHistoryCompacted) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a watch from %s never reported history compacted (last: %v)", first, got)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestClusterWatchManyOnOneClient: one client holds more watches on one
// node than a connection carries streams (256 by default): each still
// starts and gets the next write.
func TestClusterWatchManyOnOneClient(t *testing.T) {
	c := newCluster(t, 1)
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := cl.Put(ctx, []byte("m/warm"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	const n = 300
	got := make(chan bool, n)
	for range n {
		ch, err := cl.Watch(ctx, []byte("m/"), []byte("m0"), nil)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for resp := range ch {
				for _, e := range resp.Events {
					if string(e.Key) == "m/k" {
						got <- true
						return
					}
				}
				if resp.Err != nil {
					got <- false
					return
				}
			}
		}()
	}
	// Every watch has started once a write made after its start reaches
	// it; keep writing until all have one.
	for seen := 0; seen < n; {
		if err := cl.Put(ctx, []byte("m/k"), []byte("v")); err != nil {
			t.Fatal(err)
		}
		deadline := time.After(2 * time.Second)
	wait:
		for seen < n {
			select {
			case ok := <-got:
				if !ok {
					t.Fatal("a watch ended with an error")
				}
				seen++
			case <-deadline:
				break wait
			case <-ctx.Done():
				t.Fatalf("%d of %d watches got a write", seen, n)
			}
		}
	}
}
