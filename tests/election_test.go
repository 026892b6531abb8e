package tests

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/shaledb/shale/client"
	"github.com/shaledb/shale/client/concurrency"
)

// The election recipe (client/concurrency) and `shalectl elect` on real
// nodes: campaigners lead one at a time in the order they campaigned,
// with create versions (Rev) that rise with each leader; a leader
// proclaims new values and keeps the lead, a non-leader cannot; a
// leader whose session ends loses the lead to the next; observers see
// each leader and value, in election order.

func TestClusterElection(t *testing.T) {
	c := newCluster(t, 3)
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	obsS, err := concurrency.NewSession(ctx, cl, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer obsS.Close(ctx)
	obs := concurrency.NewElection(obsS, "svc")
	if _, err := obs.Leader(ctx); !errors.Is(err, concurrency.ErrElectionNoLeader) {
		t.Fatalf("Leader with nobody campaigning: %v, want ErrElectionNoLeader", err)
	}
	octx, ocancel := context.WithCancel(ctx)
	observed := obs.Observe(octx)
	var seenMu sync.Mutex
	var seen []concurrency.Leader
	seenDone := make(chan struct{})
	go func() {
		defer close(seenDone)
		for l := range observed {
			seenMu.Lock()
			seen = append(seen, l)
			seenMu.Unlock()
		}
	}()

	var leading atomic.Int32
	var mu sync.Mutex
	var revs []client.Timestamp
	var wg sync.WaitGroup
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := concurrency.NewSession(ctx, cl, 5*time.Second)
			if err != nil {
				t.Error(err)
				return
			}
			defer s.Close(ctx)
			for i := 0; i < 2; i++ {
				e := concurrency.NewElection(s, "svc")
				if err := e.Campaign(ctx, []byte("candidate")); err != nil {
					t.Error(err)
					return
				}
				if n := leading.Add(1); n != 1 {
					t.Errorf("%d leaders at once", n)
				}
				mu.Lock()
				revs = append(revs, e.Rev())
				mu.Unlock()
				if err := e.Proclaim(ctx, []byte("leading")); err != nil {
					t.Errorf("Proclaim by the leader: %v", err)
				}
				if l, err := e.Leader(ctx); err != nil || string(l.Value) != "leading" || l.CreateVersion != e.Rev() || string(l.Key) != string(e.Key()) {
					t.Errorf("Leader after Proclaim: %+v, %v; want our key %q, value leading, create version %v", l, err, e.Key(), e.Rev())
				}
				leading.Add(-1)
				if err := e.Resign(ctx); err != nil {
					t.Error(err)
				}
				if err := e.Proclaim(ctx, []byte("x")); !errors.Is(err, concurrency.ErrElectionNotLeader) {
					t.Errorf("Proclaim after Resign: %v, want ErrElectionNotLeader", err)
				}
			}
		}()
	}
	wg.Wait()
	if len(revs) != 6 {
		t.Fatalf("%d elections, want 6", len(revs))
	}
	for i := 1; i < len(revs); i++ {
		if !revs[i-1].Less(revs[i]) {
			t.Fatalf("leaders' create versions in election order %v: not increasing", revs)
		}
	}

	// A leader whose session ends loses the lead: the waiting campaigner
	// is elected, and a Proclaim of the old one fails.
	s1, err := concurrency.NewSession(ctx, cl, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	e1 := concurrency.NewElection(s1, "svc")
	if err := e1.Campaign(ctx, []byte("one")); err != nil {
		t.Fatal(err)
	}
	s2, err := concurrency.NewSession(ctx, cl, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close(ctx)
	e2 := concurrency.NewElection(s2, "svc")
	got := make(chan error, 1)
	go func() { got <- e2.Campaign(ctx, []byte("two")) }()
	// The second campaigner's key is in place before the first goes.
	waitFor(t, 30*time.Second, "two campaigners", func() bool {
		n := 0
		for _, err := range cl.Scan(ctx, []byte("svc/"), []byte("svc0"), nil) {
			if err == nil {
				n++
			}
		}
		return n == 2
	})
	select {
	case err := <-got:
		t.Fatalf("second campaigner elected while the first led: %v", err)
	default:
	}
	if err := s1.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("campaigner after the leader's session ended: %v", err)
	}
	if !e1.Rev().Less(e2.Rev()) {
		t.Fatalf("rev %v after %v", e2.Rev(), e1.Rev())
	}
	if err := e1.Proclaim(ctx, []byte("stale")); !errors.Is(err, concurrency.ErrSessionEnded) {
		t.Fatalf("Proclaim after the session ended: %v, want ErrSessionEnded", err)
	}
	if l, err := obs.Leader(ctx); err != nil || string(l.Value) != "two" {
		t.Fatalf("Leader: %+v, %v; want two", l, err)
	}
	// The observer reported "two" last, and every leader in election
	// order.
	waitFor(t, 30*time.Second, "the observer to see two", func() bool {
		seenMu.Lock()
		defer seenMu.Unlock()
		return len(seen) > 0 && string(seen[len(seen)-1].Value) == "two"
	})
	ocancel()
	<-seenDone
	if len(seen) < 3 {
		t.Fatalf("observed %d leaders (%+v), want at least the first, one and two", len(seen), seen)
	}
	for i := 1; i < len(seen); i++ {
		if seen[i].CreateVersion.Less(seen[i-1].CreateVersion) {
			t.Fatalf("observed leader %d %+v after %+v: create version fell", i, seen[i], seen[i-1])
		}
	}
}

// ctlLines starts shalectl with args against endpoint and returns its
// stdout's lines on a channel (closed when it exits) and the process.
func ctlLines(t *testing.T, endpoint string, args ...string) (<-chan string, *exec.Cmd) {
	t.Helper()
	_, ctl := binaries(t)
	cmd := exec.Command(ctl, args...)
	cmd.Env = append(os.Environ(), "SHALE_ENDPOINTS="+endpoint)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill() //nolint:errcheck // it may have exited
		cmd.Wait()         //nolint:errcheck // killed
	})
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return lines, cmd
}

// nextLine returns the next line of lines, failing after 30 s.
func nextLine(t *testing.T, lines <-chan string, what string) string {
	t.Helper()
	select {
	case l, ok := <-lines:
		if !ok {
			t.Fatalf("%s: shalectl exited", what)
		}
		return l
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: no line within 30s", what)
	}
	return ""
}

func TestShalectlElect(t *testing.T) {
	c := newCluster(t, 1)
	ep := c.endpoints()[0]
	if _, stderr, code := runCtl(t, ep, "elect", "sched"); code == 0 || !strings.Contains(stderr, "PROPOSAL") {
		t.Fatalf("elect without a proposal: exit %d, %q", code, stderr)
	}
	listen, _ := ctlLines(t, ep, "elect", "--listen", "sched")
	alpha, alphaCmd := ctlLines(t, ep, "elect", "sched", "alpha")
	la := nextLine(t, alpha, "elect sched alpha")
	if f := strings.Split(la, "\t"); len(f) != 3 || !strings.HasPrefix(f[0], "elect/sched/") || f[1] != "alpha" {
		t.Fatalf("elect sched alpha printed %q; want key, alpha, create version", la)
	}
	if l := nextLine(t, listen, "listen"); l != la {
		t.Fatalf("listen printed %q, want the leader's line %q", l, la)
	}
	beta, betaCmd := ctlLines(t, ep, "elect", "sched", "beta")
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	waitFor(t, 30*time.Second, "beta campaigning", func() bool {
		n := 0
		for _, err := range cl.Scan(ctx, []byte("elect/sched/"), []byte("elect/sched0"), nil) {
			if err == nil {
				n++
			}
		}
		return n == 2
	})
	// Interrupted, alpha resigns and exits 0; beta leads.
	if err := alphaCmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := alphaCmd.Wait(); err != nil {
		t.Fatalf("elect sched alpha after SIGINT: %v", err)
	}
	lb := nextLine(t, beta, "elect sched beta")
	if f := strings.Split(lb, "\t"); len(f) != 3 || f[1] != "beta" || f[0] == strings.Split(la, "\t")[0] {
		t.Fatalf("elect sched beta printed %q after alpha resigned", lb)
	}
	if l := nextLine(t, listen, "listen"); l != lb {
		t.Fatalf("listen printed %q, want the new leader's line %q", l, lb)
	}
	if err := betaCmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := betaCmd.Wait(); err != nil {
		t.Fatalf("elect sched beta after SIGINT: %v", err)
	}
}
