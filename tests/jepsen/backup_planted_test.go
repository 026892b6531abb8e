package jepsen

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestBackupCheckCatchesPlantedBug: with set writers running on a cluster
// of three ranges, a backup is taken, restored into a fresh cluster and
// checked (backup_check_test.go): it passes. Then the planted bug is set
// on every node (a faults build's /debug/faults/export-drop: each exported
// file leaves out its first key) and a second backup is taken and
// checked: the check must name the dropped keys.
func TestBackupCheckCatchesPlantedBug(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping a multi-process test in -short mode")
	}
	dir := t.TempDir()
	backupDir := filepath.Join(dir, "backups")
	c := startClusterBin(t, faultsBinary(t), filepath.Join(dir, "source"), 3, false, backupFlags(backupDir)...)
	sess, err := newSession(c, t)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// Three ranges hold the writers' keys (set/00/..., set/01/..., set/02/...),
	// so the backup has several files.
	for _, at := range []string{"set/01/", "set/02/"} {
		if _, _, err := sess.get().Split(ctx, []byte(at)); err != nil {
			t.Fatalf("split at %s: %v", at, err)
		}
	}

	set := newSetWorkload(newHistory(time.Now()))
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := range 3 {
		s, err := newSession(c, t)
		if err != nil {
			t.Fatal(err)
		}
		defer s.close()
		wg.Add(1)
		go func() { defer wg.Done(); set.worker(wctx, i, s) }()
	}
	acked := func() int {
		set.mu.Lock()
		defer set.mu.Unlock()
		n := 0
		for _, a := range set.added {
			if a.outcome == okOutcome {
				n++
			}
		}
		return n
	}
	for acked() < 100 && ctx.Err() == nil {
		pause(ctx, 50*time.Millisecond)
	}

	plant := func(on bool) {
		method := map[bool]string{true: http.MethodPut, false: http.MethodDelete}[on]
		for _, nd := range c.nodes(false) {
			req, _ := http.NewRequestWithContext(ctx, method, "http://"+nd.httpAddr+"/debug/faults/export-drop", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s export-drop on node %d: %s", method, nd.id, resp.Status)
			}
		}
	}
	var backups []backupTaken
	for i, planted := range []bool{false, true} {
		plant(planted)
		b := takeBackup(ctx, sess, fmt.Sprintf("planted-%d", i))
		if b.manifest == nil {
			t.Fatalf("backup %d: no backup completed (%d attempts): %v", i, b.attempts, b.lastErr)
		}
		backups = append(backups, b)
		// Writes go on after each backup, so later adds are there to
		// keep out of it.
		for n := acked(); acked() < n+50 && ctx.Err() == nil; {
			pause(ctx, 50*time.Millisecond)
		}
	}
	stop()
	wg.Wait()
	set.mu.Lock()
	added := maps.Clone(set.added)
	set.mu.Unlock()

	for i, b := range backups {
		res, err := restoreAndCheck(t, filepath.Join(dir, fmt.Sprint("restore", i)), backupDir, b, added)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("backup %d (%d files, %d entries, at %v): %d adds at or below its timestamp, %d later; problems %v",
			i, len(b.manifest.Files), b.manifest.Entries, b.manifest.ReadTimestamp, res.expected, res.later, res.problems())
		if res.expected == 0 || res.later == 0 {
			t.Fatalf("backup %d proves little: %d adds at or below its timestamp, %d later", i, res.expected, res.later)
		}
		switch planted := i == 1; {
		case !planted && len(res.problems()) > 0:
			t.Errorf("the correct backup failed the check: %v", res.problems())
		case planted && len(res.missing) == 0:
			t.Errorf("the check did not catch the keys the planted export bug dropped (%d files)", len(b.manifest.Files))
		}
	}
}
