package jepsen

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shaledb/shale/client"
)

// TestProtectionCheckCatchesPlantedBug: the protection check. With a 2 s
// retention window collected every 200 ms (gcFlags) and writers
// overwriting keys in every range, a backup throttled to run more than
// twice the window completes: the protected timestamp it holds keeps GC
// below its read timestamp (docs/versions.md, "Protected timestamps").
// With the planted bug set on every node (a faults build's
// /debug/faults/protect-ignore: GC passes ignore protections), the same
// backup fails with history compacted: the check catches it.
func TestProtectionCheckCatchesPlantedBug(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping a multi-process test in -short mode")
	}
	dir := t.TempDir()
	flags := append(backupFlags(filepath.Join(dir, "backups")), gcFlags...)
	c := startClusterBin(t, faultsBinary(t), filepath.Join(dir, "source"), 3, false, flags...)
	sess, err := newSession(c, t)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl := sess.get()
	for _, at := range []string{"prot/1/", "prot/2/"} {
		if _, _, err := cl.Split(ctx, []byte(at)); err != nil {
			t.Fatalf("split at %s: %v", at, err)
		}
	}
	key := func(i int) []byte { return []byte(fmt.Sprintf("prot/%d/%04d", i%3, i)) }
	val := []byte(strings.Repeat("p", 100))
	for i := range 300 {
		if err := cl.Put(ctx, key(i), val); err != nil {
			t.Fatal(err)
		}
	}
	// Writers overwrite the keys all along: every range has history for
	// GC to collect.
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for w := range 2 {
		s, err := newSession(c, t)
		if err != nil {
			t.Fatal(err)
		}
		defer s.close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(7, uint64(w)))
			for wctx.Err() == nil {
				pctx, cancel := context.WithTimeout(wctx, 5*time.Second)
				_ = s.get().Put(pctx, key(rng.IntN(300)), val)
				cancel()
			}
		}()
	}
	defer func() { stop(); wg.Wait() }()

	const window = 2 * time.Second // gcFlags
	slowBackup := func(name string) error {
		t0 := time.Now()
		// About 34 KB in three ranges at 3 KB/s: the third range is read
		// some 7 s after the backup's timestamp.
		_, err := cl.Backup(ctx, name, &client.BackupOptions{BytesPerSecond: 3000})
		if took := time.Since(t0); err == nil && took < 2*window {
			t.Fatalf("backup %s took %v; the check needs it to outlast the window twice", name, took)
		}
		return err
	}
	if err := slowBackup("protected"); err != nil {
		t.Fatalf("a backup outlasting the retention window, protected: %v", err)
	}
	plant := func(on bool) {
		method := map[bool]string{true: http.MethodPut, false: http.MethodDelete}[on]
		for _, nd := range c.nodes(false) {
			req, _ := http.NewRequestWithContext(ctx, method, "http://"+nd.httpAddr+"/debug/faults/protect-ignore", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s protect-ignore on node %d: %s", method, nd.id, resp.Status)
			}
		}
	}
	plant(true)
	defer plant(false)
	if err := slowBackup("unprotected"); !errors.Is(err, client.ErrHistoryCompacted) {
		t.Fatalf("with GC ignoring protections, the backup outlasting the window: %v; want it to fail with history compacted (the check missed the planted bug)", err)
	}
}
