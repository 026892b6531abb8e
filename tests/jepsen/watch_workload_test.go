package jepsen

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/shaledb/shale/client"
)

// The watch workload: a writer puts and deletes a few hot keys under
// "watch/" (so that keys get many versions and events of one key must
// come in order), and watchers watch [set/, watch0), which also holds the
// set workload's adds (unique keys over the ranges the split/merge storm
// cuts). Three watchers: one from now, started with the workers; one from
// a past version, started a while in (its stream begins with history);
// and one that restarts itself every few seconds from its last progress,
// as an application that crashed would (dropping only what it delivered
// above that progress before, which comes again). watch_check_test.go
// checks their logs.

const (
	watchKeys    = 6
	watchSpanLo  = "set/"
	watchSpanHi  = "watch0"
	watchRestart = 4 * time.Second
)

// watchWorkload is the writer's history and the watchers' logs.
type watchWorkload struct {
	// retention is the cluster's history retention window (0: the
	// default, 10 minutes). Under a short one (the GC nemesis: 2 s) the
	// watcher from the past starts within it, and a watcher whose resume
	// point falls below a range's GC threshold (a stream broken for longer
	// than the window) ends with "history compacted", as it must: its log
	// is then checked up to its last progress.
	retention time.Duration

	mu     sync.Mutex
	writes []watchWrite
	logs   []*watchLog
}

// retentionOf returns the --history-retention among flags (0 if none).
func retentionOf(flags []string) time.Duration {
	for i, f := range flags {
		if f == "--history-retention" && i+1 < len(flags) {
			if d, err := time.ParseDuration(flags[i+1]); err == nil {
				return d
			}
		}
	}
	return 0
}

// writer puts and deletes the hot keys until ctx ends.
func (w *watchWorkload) writer(ctx context.Context, sess *session, rng *rand.Rand) {
	live := map[string]bool{}
	for n := 0; ctx.Err() == nil; n++ {
		cl := sess.get()
		key := fmt.Sprintf("watch/%d", rng.IntN(watchKeys))
		ww := watchWrite{key: key}
		octx, cancel := context.WithTimeout(context.Background(), opTimeout)
		var err error
		if live[key] && rng.IntN(4) == 0 {
			ww.deleted = true
			ww.version, err = cl.DeleteVersioned(octx, []byte(key))
		} else {
			ww.value = fmt.Sprintf("w%d", n)
			ww.version, err = cl.PutVersioned(octx, []byte(key), []byte(ww.value))
		}
		cancel()
		ww.outcome = outcomeOf(err, true)
		if err == nil {
			live[key] = !ww.deleted
		}
		w.mu.Lock()
		w.writes = append(w.writes, ww)
		w.mu.Unlock()
		if err != nil {
			pause(ctx, 50*time.Millisecond)
		}
		pause(ctx, thinkTime)
	}
}

// watcher runs one watcher into l until ctx ends; restart makes it start
// a new watch from its last progress every watchRestart.
func (w *watchWorkload) watcher(ctx context.Context, sess *session, l *watchLog, restart bool) {
	from := l.from
	// seen holds what the last incarnation delivered above the progress
	// the next one resumes from: those events come again, and an
	// application drops them by (key, version).
	seen := map[string]client.Timestamp{}
	for ctx.Err() == nil {
		wctx, cancel := context.WithCancel(ctx)
		if restart {
			wctx, cancel = context.WithTimeout(ctx, watchRestart)
		}
		ch, err := sess.get().Watch(wctx, []byte(watchSpanLo), []byte(watchSpanHi), &client.WatchOptions{From: from})
		if err != nil {
			cancel()
			w.mu.Lock()
			l.ended = err
			w.mu.Unlock()
			return
		}
		var delivered []client.WatchEvent
		for resp := range ch {
			w.mu.Lock()
			if resp.Err != nil {
				if ctx.Err() == nil && wctx.Err() == nil {
					l.ended = resp.Err
				}
				w.mu.Unlock()
				break
			}
			for _, e := range resp.Events {
				id := fmt.Sprintf("%s@%s", e.Key, e.Version)
				if _, again := seen[id]; again {
					// Delivered by an earlier incarnation: drop it, but
					// it still counts as delivered above the next
					// resume point (a later incarnation may send it
					// again too).
					delete(seen, id)
					delivered = append(delivered, e)
					continue
				}
				l.events = append(l.events, e)
				delivered = append(delivered, e)
			}
			if !resp.Progress.IsZero() {
				l.progress = append(l.progress, watchMark{at: resp.Progress, before: len(l.events)})
			}
			w.mu.Unlock()
		}
		cancel()
		w.mu.Lock()
		ended := l.ended != nil
		p := l.last()
		w.mu.Unlock()
		if ended || !restart {
			return
		}
		if !p.IsZero() {
			from = p
		}
		for id, v := range seen {
			if !from.Less(v) {
				delete(seen, id)
			}
		}
		for _, e := range delivered {
			if from.Less(e.Version) {
				seen[fmt.Sprintf("%s@%s", e.Key, e.Version)] = e.Version
			}
		}
	}
}

// startWatchers starts the watchers on sessions (three): from now, from
// now restarting, and, after delay, from the first version the writer got
// acknowledged (its stream begins with history).
func (w *watchWorkload) startWatchers(ctx context.Context, wg *sync.WaitGroup, sessions []*session, delay time.Duration) {
	wg.Add(3)
	now := &watchLog{name: "watch-from-now"}
	again := &watchLog{name: "watch-restarting"}
	w.mu.Lock()
	w.logs = append(w.logs, now, again)
	w.mu.Unlock()
	go func() { defer wg.Done(); w.watchFromNow(ctx, sessions[0], now, false) }()
	go func() { defer wg.Done(); w.watchFromNow(ctx, sessions[1], again, true) }()
	go func() {
		defer wg.Done()
		pause(ctx, delay)
		w.mu.Lock()
		// From the writer's first acknowledged write, or under a short
		// retention window from one acknowledged within its first half.
		var from client.Timestamp
		recent := time.Now().Add(-w.retention / 2).UnixNano()
		for _, ww := range w.writes {
			if ww.outcome == okOutcome && (w.retention == 0 || ww.version.WallTime >= recent) {
				from = ww.version.Prev()
				break
			}
		}
		for i := len(w.writes) - 1; from.IsZero() && i >= 0; i-- {
			if w.writes[i].outcome == okOutcome {
				from = w.writes[i].version.Prev() // the latest, if none is that recent
			}
		}
		past := &watchLog{name: "watch-from-past", from: from}
		if from.IsZero() {
			past.ended = fmt.Errorf("no write was acknowledged in the first %v", delay)
		}
		w.logs = append(w.logs, past)
		w.mu.Unlock()
		if !from.IsZero() {
			w.watcher(ctx, sessions[2], past, false)
		}
	}()
}

// watchFromNow starts a watcher from the current time: its start is a
// version a fresh write would be above, taken from the cluster before the
// watch begins (so the check knows from where everything is expected).
func (w *watchWorkload) watchFromNow(ctx context.Context, sess *session, l *watchLog, restart bool) {
	for ctx.Err() == nil {
		octx, cancel := context.WithTimeout(ctx, opTimeout)
		v, err := sess.get().PutVersioned(octx, []byte("watch/start"+probeSuffix), []byte("x"))
		cancel()
		if err == nil {
			w.mu.Lock()
			l.from = v
			w.mu.Unlock()
			w.watcher(ctx, sess, l, restart)
			return
		}
		pause(ctx, 200*time.Millisecond)
	}
	w.mu.Lock()
	l.ended = fmt.Errorf("no write to take a start version from succeeded before the run ended")
	w.mu.Unlock()
}

// check checks every watcher's log against the writes: the watch
// workload's and the set's acknowledged adds.
func (w *watchWorkload) check(added map[string]setAdd) (summary string, problems []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	writes := append([]watchWrite(nil), w.writes...)
	for k, a := range added {
		writes = append(writes, watchWrite{key: k, value: a.value, outcome: a.outcome, version: a.version})
	}
	var top client.Timestamp
	for _, ww := range writes {
		if ww.outcome == okOutcome {
			top = top.Forward(ww.version)
		}
	}
	var parts []string
	for _, l := range w.logs {
		ltop := top
		if l.ended != nil && errors.Is(l.ended, client.ErrHistoryCompacted) && w.retention > 0 && w.retention < time.Minute {
			// Fell behind a short retention window: a correct end.
			parts = append(parts, fmt.Sprintf("%s ended behind the %v retention window at progress %s", l.name, w.retention, l.last()))
			l.ended = nil
			ltop = top.Backward(l.last())
		}
		res := checkWatchLog(l, writes, ltop)
		parts = append(parts, fmt.Sprintf("%s %d events (%d expected)", l.name, res.events, res.expected))
		problems = append(problems, res.problems...)
	}
	return fmt.Sprint(parts), problems
}

// caughtUp waits until every watcher's progress is at or above the last
// acknowledged write (the writers have stopped), or timeout.
func (w *watchWorkload) caughtUp(added map[string]setAdd, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		w.mu.Lock()
		var top client.Timestamp
		for _, ww := range w.writes {
			if ww.outcome == okOutcome {
				top = top.Forward(ww.version)
			}
		}
		for _, a := range added {
			if a.outcome == okOutcome {
				top = top.Forward(a.version)
			}
		}
		done := true
		for _, l := range w.logs {
			if l.ended == nil && l.last().Less(top) {
				done = false
			}
		}
		w.mu.Unlock()
		if done {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}
