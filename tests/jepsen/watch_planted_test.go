package jepsen

import (
	"context"
	"maps"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestWatchCheckCatchesPlantedBug: with set writers and the watch
// workload on a cluster whose watched span crosses three ranges, the
// watch checker passes; then, with the planted bug set on every node (a
// faults build's /debug/faults/watch-drop: each watch stream leaves out
// the first change it takes from the feed), a second round of the same
// must be reported: an acknowledged write never delivered.
func TestWatchCheckCatchesPlantedBug(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping a multi-process test in -short mode")
	}
	c := startClusterBin(t, faultsBinary(t), filepath.Join(t.TempDir(), "c"), 3, false)
	sess, err := newSession(c, t)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.close()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	for _, at := range []string{"set/01/", "watch/"} {
		if _, _, err := sess.get().Split(ctx, []byte(at)); err != nil {
			t.Fatalf("split at %s: %v", at, err)
		}
	}
	plant := func(on bool) {
		method := map[bool]string{true: http.MethodPut, false: http.MethodDelete}[on]
		for _, nd := range c.nodes(false) {
			req, _ := http.NewRequestWithContext(ctx, method, "http://"+nd.httpAddr+"/debug/faults/watch-drop", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s watch-drop on node %d: %s", method, nd.id, resp.Status)
			}
		}
	}
	round := func(planted bool) []string {
		plant(planted)
		set := newSetWorkload(newHistory(time.Now()))
		watch := &watchWorkload{}
		var sessions []*session
		for range 6 {
			s, err := newSession(c, t)
			if err != nil {
				t.Fatal(err)
			}
			sessions = append(sessions, s)
		}
		defer func() {
			for _, s := range sessions {
				s.close()
			}
		}()
		wctx, stopWriters := context.WithCancel(ctx)
		watchCtx, stopWatchers := context.WithCancel(ctx)
		var wg, watchWG sync.WaitGroup
		watch.startWatchers(watchCtx, &watchWG, sessions[:3], 2*time.Second)
		wg.Add(3)
		go func() { defer wg.Done(); watch.writer(wctx, sessions[3], rand.New(rand.NewPCG(1, 2))) }()
		for i := range 2 {
			go func() { defer wg.Done(); set.worker(wctx, i, sessions[4+i]) }()
		}
		pause(ctx, 8*time.Second)
		stopWriters()
		wg.Wait()
		set.mu.Lock()
		added := maps.Clone(set.added)
		set.mu.Unlock()
		watch.caughtUp(added, 30*time.Second)
		stopWatchers()
		watchWG.Wait()
		summary, problems := watch.check(added)
		t.Logf("planted %v: %s; problems: %v", planted, summary, problems)
		if !strings.Contains(summary, "watch-from-past") {
			t.Fatalf("planted %v: the watcher from the past never started: %s", planted, summary)
		}
		return problems
	}
	if p := round(false); len(p) > 0 {
		t.Fatalf("the correct watch failed the check: %v", p)
	}
	p := round(true)
	plant(false)
	if !strings.Contains(strings.Join(p, "\n"), "never delivered") {
		t.Fatalf("the check did not catch the events the planted bug dropped: %v", p)
	}
}
