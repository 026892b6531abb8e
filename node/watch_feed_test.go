package node

import (
	"errors"
	"testing"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/mvcc"
	"github.com/shaledb/shale/rangesm"
)

// TestWatchFeedApplied: a watcher gets the changes of its span above its
// history bound; a batch published without its changes moves the bound
// up and drops what was queued (history covers it); progress follows the
// frontier; a watcher whose span the range no longer holds is ended; the
// queue bound cuts a watcher off.
func TestWatchFeedApplied(t *testing.T) {
	v := func(n int64) hlc.Timestamp { return hlc.Timestamp{WallTime: n} }
	c := func(k string, n int64) mvcc.Change {
		return mvcc.Change{Key: []byte(k), Version: v(n), Value: []byte("x")}
	}
	desc := &kvpb.RangeDescriptor{RangeId: 7, StartKey: []byte("a"), EndKey: []byte("z")}
	f := newWatchFeeds()
	if f.Watched(7) {
		t.Fatal("a range without watchers is watched")
	}
	w := f.register(7, []byte("b"), []byte("d"), func() rangesm.MVCCState { return rangesm.MVCCState{Frontier: v(10), FeedFrontier: v(10)} })
	if !f.Watched(7) || f.watchers() != 1 {
		t.Fatal("the watcher is not registered")
	}
	f.Applied(7, desc, []mvcc.Change{c("a1", 11), c("b1", 11), c("c1", 12), c("d", 12)}, v(12), true)
	got, progress, scanTo, err := f.take(w)
	if err != nil || len(got) != 2 || string(got[0].Key) != "b1" || string(got[1].Key) != "c1" || progress != v(12) || scanTo != v(10) {
		t.Fatalf("take = %v, %v, %v, %v", got, progress, scanTo, err)
	}
	f.Applied(7, desc, []mvcc.Change{c("b2", 13)}, v(13), true)
	f.Applied(7, desc, nil, v(15), false) // a batch applied without collecting
	got, progress, scanTo, _ = f.take(w)
	if len(got) != 0 || scanTo != v(15) || progress != v(15) {
		t.Fatalf("after an incomplete batch: take = %v, progress %v, scanTo %v; want nothing queued, both at 15", got, progress, scanTo)
	}
	// The range split at c: the watcher's span [b, d) is no longer in it.
	f.Applied(7, &kvpb.RangeDescriptor{RangeId: 7, StartKey: []byte("a"), EndKey: []byte("c")}, nil, v(15), true)
	if _, _, _, err := f.take(w); !errors.Is(err, errRangeChanged) {
		t.Fatalf("after a split inside the span: %v, want errRangeChanged", err)
	}
	f.unregister(w)
	if f.Watched(7) || f.watchers() != 0 {
		t.Fatal("the watcher is still registered")
	}

	f.queueBytes = 300
	w = f.register(7, []byte("a"), []byte("y"), func() rangesm.MVCCState { return rangesm.MVCCState{Frontier: v(20), FeedFrontier: v(20)} })
	f.Applied(7, desc, []mvcc.Change{c("b", 21), c("c", 22)}, v(22), true) // 2 x 66 bytes
	if got, _, _, err := f.take(w); err != nil || len(got) != 2 {
		t.Fatalf("within the bound: %v, %v", got, err)
	}
	f.Applied(7, desc, []mvcc.Change{c("b", 23), c("c", 24), c("e", 25), c("f", 26), c("g", 27)}, v(27), true)
	if _, _, _, err := f.take(w); err == nil || errors.Is(err, errRangeChanged) {
		t.Fatalf("a watcher past its queue bound: %v, want cut off", err)
	}
}
