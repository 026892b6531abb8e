package node

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/shaledb/shale/api/raftrpcpb"
	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/rangesm"
	"github.com/shaledb/shale/tso"
)

// nodeTimestamps takes n timestamps from tn's oracle client, from n
// goroutines at once.
func nodeTimestamps(t *testing.T, tn *testNode, n int) []hlc.Timestamp {
	t.Helper()
	out := make([]hlc.Timestamp, n)
	var wg sync.WaitGroup
	for i := range out {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ts, err := tn.n.tsoClient.Now(ctxT(t))
			if err != nil {
				t.Error(err)
			}
			out[i] = ts
		}()
	}
	wg.Wait()
	return out
}

// gatedTransport is the node's own oracle transport with its first
// Timestamps call held until the test opens gate: requests made while
// it is held all queue for the next call, whatever the scheduler does.
type gatedTransport struct {
	tso.Transport
	gate    chan struct{}
	entered chan struct{}
	once    sync.Once
}

func (g *gatedTransport) Timestamps(ctx context.Context, count int) (hlc.Timestamp, hlc.Timestamp, error) {
	first := false
	g.once.Do(func() { first = true })
	if first {
		close(g.entered)
		<-g.gate
	}
	return g.Transport.Timestamps(ctx, count)
}

// TestOracleBatchesConcurrentRequests: requests waiting at once share
// one call to the oracle, every one gets its own timestamp, and a request
// that starts after another got its timestamp gets a higher one.
func TestOracleBatchesConcurrentRequests(t *testing.T) {
	tn := startNode(t, "", Config{})
	g := &gatedTransport{Transport: &oracleTransport{n: tn.n}, gate: make(chan struct{}), entered: make(chan struct{})}
	c := tso.NewClient(g, tn.n.clock, nil)
	const n = 400
	got := make([]hlc.Timestamp, n)
	var wg sync.WaitGroup
	take := func(i int) {
		defer wg.Done()
		ts, err := c.Now(ctxT(t))
		if err != nil {
			t.Error(err)
		}
		got[i] = ts
	}
	// The first request's call is held; the other n-1 queue behind it.
	wg.Add(n)
	go take(0)
	<-g.entered
	for i := 1; i < n; i++ {
		go take(i)
	}
	for c.Waiting() < n-1 {
		runtime.Gosched()
	}
	close(g.gate)
	wg.Wait()
	if calls, _ := c.Calls(); calls != 2 {
		t.Fatalf("%d requests, %d of them queued behind one call, made %d oracle calls; want 2", n, n-1, calls)
	}
	seen := map[hlc.Timestamp]bool{}
	for _, ts := range got {
		if ts.IsZero() || seen[ts] {
			t.Fatalf("timestamp %s zero or handed out twice", ts)
		}
		seen[ts] = true
	}
	// Real-time order: one after another, each above the one before.
	prev, err := c.Now(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		ts, err := c.Now(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if !prev.Less(ts) {
			t.Fatalf("timestamp %s after %s", ts, prev)
		}
		prev = ts
	}
	// The node's clock is past everything handed out.
	if !prev.Less(tn.n.clock.Now()) {
		t.Fatalf("node clock not moved past %s", prev)
	}
}

// TestOracleWindowSurvivesRestart: the persisted window covers every
// timestamp issued, and after a restart with a clock set back the new
// oracle still issues above all of them.
func TestOracleWindowSurvivesRestart(t *testing.T) {
	dir := t.TempDir() + "/node"
	tn := startNode(t, dir, Config{})
	got := nodeTimestamps(t, tn, 100)
	var high hlc.Timestamp
	for _, ts := range got {
		high = high.Forward(ts)
	}
	w, err := rangesm.TSOWindow(tn.n.db)
	if err != nil {
		t.Fatal(err)
	}
	if w < high.WallTime {
		t.Fatalf("persisted window %d below issued timestamp %s", w, high)
	}
	tn.cc.Close()
	tn.stop(t)

	// Set back by 400 ms (within the maximum offset): the clock alone
	// would issue below what the old oracle issued.
	back := startNode(t, dir, Config{Clock: ClockOptions{TestingOffset: -400 * time.Millisecond}})
	if back.n.clock.PhysicalNow() > high.WallTime {
		t.Skip("the restart took longer than the clock was set back; nothing to check")
	}
	ts, err := back.n.tsoClient.Now(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if !high.Less(ts) {
		t.Fatalf("after a restart the oracle issued %s, not above %s issued before", ts, high)
	}
}

// TestOracleServiceRefusesBadCounts: the node-to-node service checks its
// input.
func TestOracleServiceRefusesBadCounts(t *testing.T) {
	tn := startNode(t, "", Config{})
	c := raftrpcpb.NewTimestampOracleClient(tn.cc)
	for _, n := range []uint32{0, 1<<16 + 1} {
		if _, err := c.Timestamps(ctxT(t), &raftrpcpb.TimestampsRequest{Count: n}); err == nil {
			t.Errorf("count %d accepted", n)
		}
	}
	// The oracle serves once the node leads meta (an election first).
	var resp *raftrpcpb.TimestampsResponse
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if resp, err = c.Timestamps(context.Background(), &raftrpcpb.TimestampsRequest{Count: 3}); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
	first, _ := tsFromProto(resp.GetFirst())
	last, _ := tsFromProto(resp.GetLast())
	if first.Next().Next() != last || resp.GetCount() != 3 {
		t.Fatalf("Timestamps(3) = %s..%s (%d)", first, last, resp.GetCount())
	}
}

// TestOracleObserve: after Observe(ts) every timestamp is above ts (and
// the persisted window covers it, so a later oracle's would be too); a
// timestamp at or below one the oracle already handed out needs no call.
func TestOracleObserve(t *testing.T) {
	tn := startNode(t, "", Config{})
	ctx := ctxT(t)
	c := tn.n.tsoClient
	issued, err := c.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, before := c.Calls()
	if err := c.Observe(ctx, issued.Prev()); err != nil {
		t.Fatal(err)
	}
	if _, after := c.Calls(); after != before {
		t.Fatalf("observing a timestamp below one issued made %d calls", after-before)
	}
	// Ahead of the oracle's clock and window (within the maximum offset).
	ahead := hlc.Timestamp{WallTime: time.Now().Add(400 * time.Millisecond).UnixNano(), Logical: 7}
	if err := c.Observe(ctx, ahead); err != nil {
		t.Fatal(err)
	}
	if _, after := c.Calls(); after != before+1 {
		t.Fatalf("observing a timestamp ahead made %d calls, want 1", after-before)
	}
	if w, err := rangesm.TSOWindow(tn.n.db); err != nil || w < ahead.WallTime {
		t.Fatalf("persisted window %d (%v) below the observed %s", w, err, ahead)
	}
	ts, err := c.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !ahead.Less(ts) {
		t.Fatalf("timestamp %s after observing %s", ts, ahead)
	}
}

// gatedObserves is the node's own oracle transport with its first
// Observe call held until the test opens gate.
type gatedObserves struct {
	tso.Transport
	gate    chan struct{}
	entered chan struct{}
	once    sync.Once
}

func (g *gatedObserves) Observe(ctx context.Context, ts hlc.Timestamp) error {
	first := false
	g.once.Do(func() { first = true })
	if first {
		close(g.entered)
		<-g.gate
	}
	return g.Transport.Observe(ctx, ts)
}

// TestOracleObservesShareCalls: Observes waiting while one is out share
// the next call, which observes the highest of them: after each returns,
// every timestamp is above what it observed.
func TestOracleObservesShareCalls(t *testing.T) {
	tn := startNode(t, "", Config{})
	g := &gatedObserves{Transport: &oracleTransport{n: tn.n}, gate: make(chan struct{}), entered: make(chan struct{})}
	c := tso.NewClient(g, tn.n.clock, nil)
	base := hlc.Timestamp{WallTime: time.Now().Add(300 * time.Millisecond).UnixNano()}
	const n = 50
	var wg sync.WaitGroup
	observe := func(i int) {
		defer wg.Done()
		if err := c.Observe(ctxT(t), hlc.Timestamp{WallTime: base.WallTime, Logical: int32(i)}); err != nil {
			t.Error(err)
		}
	}
	wg.Add(n)
	go observe(0)
	<-g.entered
	for i := 1; i < n; i++ {
		go observe(i)
	}
	// Wait until every other Observe queues behind the held call.
	for deadline := time.Now().Add(10 * time.Second); ; {
		queued := c.ObservesWaiting()
		if queued == n-1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d Observes queued", queued, n-1)
		}
		runtime.Gosched()
	}
	close(g.gate)
	wg.Wait()
	if _, observes := c.Calls(); observes != 2 {
		t.Fatalf("%d Observes made %d calls, want 2 (the held one and one shared)", n, observes)
	}
	ts, err := c.Now(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if top := (hlc.Timestamp{WallTime: base.WallTime, Logical: n - 1}); !top.Less(ts) {
		t.Fatalf("timestamp %s after observing %s", ts, top)
	}
}
