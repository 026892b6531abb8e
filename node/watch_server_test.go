package node

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shaledb/shale/api/kvpb"
)

// watchAll reads a stream until it has n events and a progress notice at
// or above the last of them, and returns the events and every notice.
func watchAll(t *testing.T, s kvpb.Watch_WatchClient, n int) ([]*kvpb.WatchEvent, []*kvpb.Timestamp) {
	t.Helper()
	var evs []*kvpb.WatchEvent
	var marks []*kvpb.Timestamp
	for {
		resp, err := s.Recv()
		if err != nil {
			t.Fatalf("after %d events: %v", len(evs), err)
		}
		evs = append(evs, resp.GetEvents()...)
		if p := resp.GetProgress(); p != nil {
			marks = append(marks, p)
			if len(evs) >= n && (n == 0 || !tsOf(p).Less(tsOf(evs[n-1].GetVersion()))) {
				return evs, marks
			}
		}
	}
}

// TestWatchHistoryInPasses: a watch from a past version gets every version
// since, from history, in version order with previous values, read in
// passes smaller than the history (one version, a batch's four writes,
// larger than a pass on its own), then the changes that follow; a
// malformed request is refused.
func TestWatchHistoryInPasses(t *testing.T) {
	defer func(e int) { catchUpMaxEvents = e }(catchUpMaxEvents)
	catchUpMaxEvents = 3
	tn := startNode(t, "", Config{})
	w := kvpb.NewWatchClient(tn.cc)
	first, err := tn.kv.Put(ctxT(t), &kvpb.PutRequest{Key: []byte("w/a"), Value: []byte("0")})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 5; i++ {
		put(t, tn, fmt.Sprintf("w/%c", 'a'+i%3), fmt.Sprint(i))
	}
	if _, err := tn.kv.Batch(ctxT(t), &kvpb.BatchRequest{Mutations: []*kvpb.Mutation{
		putOp([]byte("w/x1"), []byte("b")), putOp([]byte("w/x2"), []byte("b")),
		putOp([]byte("w/x3"), []byte("b")), putOp([]byte("w/x4"), []byte("b")),
	}}); err != nil {
		t.Fatal(err)
	}
	put(t, tn, "w/a", "6")
	put(t, tn, "zz", "outside")
	s, err := w.Watch(ctxT(t), &kvpb.WatchRequest{StartKey: []byte("w/"), EndKey: []byte("w0"),
		StartVersion: first.GetVersion(), PrevValues: true})
	if err != nil {
		t.Fatal(err)
	}
	evs, marks := watchAll(t, s, 10)
	var got []string
	for i, e := range evs {
		got = append(got, fmt.Sprintf("%s=%s(prev %v %s)", e.GetKey(), e.GetValue(), e.GetPrevFound(), e.GetPrevValue()))
		if i > 0 && tsOf(e.GetVersion()).Less(tsOf(evs[i-1].GetVersion())) {
			t.Fatalf("event %d below the one before: %v", i, got)
		}
	}
	want := "w/b=1(prev false ) w/c=2(prev false ) w/a=3(prev true 0) w/b=4(prev true 1) w/c=5(prev true 2) " +
		"w/x1=b(prev false ) w/x2=b(prev false ) w/x3=b(prev false ) w/x4=b(prev false ) w/a=6(prev true 3)"
	if strings.Join(got, " ") != want {
		t.Fatalf("events\n %s\nwant\n %s", strings.Join(got, " "), want)
	}
	if len(marks) < 4 {
		t.Fatalf("%d progress notices for a history read in passes of 3: %v", len(marks), marks)
	}
	// Live changes follow.
	put(t, tn, "w/live", "7")
	evs, _ = watchAll(t, s, 1)
	if len(evs) != 1 || string(evs[0].GetKey()) != "w/live" || evs[0].GetType() != kvpb.WatchEventType_WATCH_EVENT_TYPE_PUT {
		t.Fatalf("live events = %v", evs)
	}

	for _, bad := range []*kvpb.WatchRequest{
		{StartKey: []byte("b"), EndKey: []byte("a")},
		{StartKey: []byte("a"), EndKey: []byte("a")},
		{StartKey: []byte("a"), StartVersion: &kvpb.Timestamp{WallNanos: -1}},
	} {
		s, err := w.Watch(ctxT(t), bad)
		if err == nil {
			_, err = s.Recv()
		}
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("Watch(%v) = %v, want InvalidArgument", bad, err)
		}
	}
}

// TestWatchCutsOffSlowWatcher: a watcher that does not read while its
// range is written is cut off with ResourceExhausted once its queue passes
// the per-watcher bound, and the node counts it.
func TestWatchCutsOffSlowWatcher(t *testing.T) {
	tn := startNode(t, "", Config{})
	tn.n.watches.mu.Lock()
	tn.n.watches.queueBytes = 16 << 10
	tn.n.watches.mu.Unlock()
	put(t, tn, "warm", "up") // a leader
	s, err := kvpb.NewWatchClient(tn.cc).Watch(ctxT(t), &kvpb.WatchRequest{StartKey: []byte("s/"), EndKey: []byte("s0")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatal(err)
	}
	// Far more than gRPC's stream window (64 KiB) and the queue bound,
	// while nothing is read.
	big := strings.Repeat("v", 4096)
	for i := range 200 {
		put(t, tn, fmt.Sprintf("s/%04d", i), big)
	}
	n := 0
	for {
		resp, err := s.Recv()
		if err == io.EOF || err == nil && n > 1000 {
			t.Fatalf("the stream went on (%d messages) without cutting the slow watcher off", n)
		}
		if err != nil {
			if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "fell behind") {
				t.Fatalf("the stream ended with %v, want ResourceExhausted", err)
			}
			break
		}
		n += len(resp.GetEvents())
	}
	if n >= 200 {
		t.Fatalf("all %d events came through before the cut-off", n)
	}
	if f := scrape(t, tn)["shale_watch_cutoffs_total"]; f == nil || sumOf(f) < 1 {
		t.Fatalf("shale_watch_cutoffs_total = %v", f)
	}
}

// TestFreshnessLoopSleepsUntilAWatch: with no watcher and no
// bounded-staleness read the freshness loop makes no passes; a watcher
// wakes it, and its progress notices advance without writes, the range
// closed every freshInterval.
func TestFreshnessLoopSleepsUntilAWatch(t *testing.T) {
	tn := startNode(t, "", Config{})
	put(t, tn, "w/a", "1")
	// Its first pass found nothing to keep fresh: from then on, none.
	pollUntil(t, "the freshness loop's first pass", func() bool { return tn.n.closes.passes.Load() > 0 })
	before := tn.n.closes.passes.Load()
	time.Sleep(5 * freshInterval)
	if p := tn.n.closes.passes.Load() - before; p > 1 {
		t.Errorf("the freshness loop made %d passes in %v with nothing to keep fresh, want none", p, 5*freshInterval)
	}
	s, err := kvpb.NewWatchClient(tn.cc).Watch(ctxT(t), &kvpb.WatchRequest{StartKey: []byte("w/"), EndKey: []byte("w0")})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now().UnixNano()
	for {
		resp, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if p := resp.GetProgress(); p != nil && tsOf(p).WallTime > start {
			return // closed after the watch began: the loop woke for it
		}
	}
}
