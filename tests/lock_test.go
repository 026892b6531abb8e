package tests

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shaledb/shale/client"
	"github.com/shaledb/shale/client/concurrency"
)

// The mutex recipe (client/concurrency) and `shalectl lock` on real
// nodes: contenders take turns, never two at once, with fencing tokens
// that grow with each holder; a holder whose session ends loses the lock
// to the next; shalectl lock runs a command under the lock and exits with
// its status.

func TestClusterMutex(t *testing.T) {
	c := newCluster(t, 3)
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var holders atomic.Int32
	var mu sync.Mutex
	var tokens []client.Timestamp
	var wg sync.WaitGroup
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// One session per worker, locking again after each unlock:
			// its key comes back under the same name, behind the others.
			s, err := concurrency.NewSession(ctx, cl, 5*time.Second)
			if err != nil {
				t.Error(err)
				return
			}
			defer s.Close(ctx)
			for i := 0; i < 3; i++ {
				m := concurrency.NewMutex(s, "jobs")
				if err := m.Lock(ctx); err != nil {
					t.Error(err)
					return
				}
				if n := holders.Add(1); n != 1 {
					t.Errorf("%d holders at once", n)
				}
				mu.Lock()
				tokens = append(tokens, m.Token())
				mu.Unlock()
				time.Sleep(20 * time.Millisecond) // hold it a moment
				holders.Add(-1)
				if err := m.Unlock(ctx); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if len(tokens) != 9 {
		t.Fatalf("%d acquisitions, want 9", len(tokens))
	}
	for i := 1; i < len(tokens); i++ {
		if !tokens[i-1].Less(tokens[i]) {
			t.Fatalf("fencing tokens in acquisition order %v: not increasing", tokens)
		}
	}

	// A holder whose session ends (its lease revoked) loses the lock: a
	// waiter gets it.
	s1, err := concurrency.NewSession(ctx, cl, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	m1 := concurrency.NewMutex(s1, "jobs")
	if err := m1.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	s2, err := concurrency.NewSession(ctx, cl, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close(ctx)
	m2 := concurrency.NewMutex(s2, "jobs")
	got := make(chan error, 1)
	go func() { got <- m2.Lock(ctx) }()
	select {
	case err := <-got:
		t.Fatalf("second session locked while the first held: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	if err := s1.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter after the holder's session ended: %v", err)
	}
	if !m1.Token().Less(m2.Token()) {
		t.Fatalf("token %v after %v", m2.Token(), m1.Token())
	}
}

func TestShalectlLock(t *testing.T) {
	c := newCluster(t, 1)
	ep := c.endpoints()[0]
	out, stderr, code := runCtl(t, ep, "lock", "nightly", "--", "sh", "-c", `echo "token=$SHALE_LOCK_TOKEN key=$SHALE_LOCK_KEY"; exit 3`)
	if code != 3 || !strings.Contains(out, "token=") || !strings.Contains(out, "key=lock/nightly/") {
		t.Fatalf("lock -- sh: exit %d, stdout %q, stderr %q; want exit 3 and the token and key", code, out, stderr)
	}
	// Released: another holder gets it at once.
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := concurrency.NewSession(ctx, cl, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	lctx, lcancel := context.WithTimeout(ctx, 5*time.Second)
	defer lcancel()
	if err := concurrency.NewMutex(s, "lock/nightly").Lock(lctx); err != nil {
		t.Fatalf("lock after shalectl lock exited: %v", err)
	}
	if _, stderr, code := runCtl(t, ep, "lease", "grant", "0s"); code == 0 || !strings.Contains(stderr, "TTL") {
		t.Fatalf("lease grant 0s: exit %d, %q", code, stderr)
	}
	out, stderr, code = runCtl(t, ep, "lease", "grant", "--id", "77", "30s")
	if code != 0 || out != "lease 77 granted with TTL 30s\n" {
		t.Fatalf("lease grant: exit %d %q %q", code, out, stderr)
	}
	if out, stderr, code := runCtl(t, ep, "put", "--lease", "77", "leased", "v"); code != 0 {
		t.Fatalf("put --lease: exit %d %q %q", code, out, stderr)
	}
	for _, tc := range []struct {
		args []string
		want string // a prefix of stdout
	}{
		{[]string{"lease", "keep-alive", "--once", "77"}, "lease 77 renewed: TTL 30s\n"},
		{[]string{"lease", "ttl", "--keys", "77"}, "lease 77: TTL 30s, "},
		{[]string{"lease", "list"}, "ID  TTL  REMAINING\n"},
		{[]string{"--json", "lease", "ttl", "77"}, `{"id":77,"ttlMs":30000,"remainingMs":`},
		{[]string{"--json", "lease", "list"}, `{"leases":[{"id":`},
		{[]string{"lease", "revoke", "77"}, "lease 77 revoked: 1 keys deleted\n"},
	} {
		out, stderr, code := runCtl(t, ep, tc.args...)
		if code != 0 || !strings.HasPrefix(out, tc.want) {
			t.Fatalf("%v: exit %d, stdout %q (want it to start %q), stderr %q", tc.args, code, out, tc.want, stderr)
		}
		if tc.args[1] == "ttl" && !strings.HasSuffix(out, "left\nleased\n") {
			t.Fatalf("%v: %q, want the time left and the key", tc.args, out)
		}
		if strings.HasSuffix(tc.args[len(tc.args)-1], "list") && !strings.Contains(out, "77") {
			t.Fatalf("%v: %q, want lease 77 listed", tc.args, out)
		}
	}
	if _, _, code := runCtl(t, ep, "lease", "revoke", "999999"); code == 0 {
		t.Fatal("revoke of an unknown lease succeeded")
	}
}
