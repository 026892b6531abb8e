package node

import (
	"bytes"
	"sync"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/mvcc"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/rangesm"
)

// The node's side of change feeds (docs/watch.md): watchFeeds is the
// rangesm.FeedSink of every replica of the node. It keeps the watchers of
// each range and hands each the changes its span gets as the replica
// publishes them, into a bounded queue that the watcher's stream drains
// (watch_server.go). The apply path never waits on a watcher: a watcher
// whose queue would pass its bound is cut off instead (ResourceExhausted),
// and its client resumes from what it received.

// watchQueueBytes bounds what one watcher may have queued and not yet
// sent: 4 MiB (about 20,000 small events, several seconds of a busy
// range), past which it is cut off. With 10,000 idle watchers the queues
// hold nothing; the bound is what a burst can cost per watcher.
const watchQueueBytes = 4 << 20

// watchFeeds holds every watcher of the node, by range.
type watchFeeds struct {
	mu     sync.Mutex
	ranges map[uint64]map[*watcher]struct{}
	// count is the number of watchers (for the gauge).
	count int
	// queueBytes overrides watchQueueBytes (tests).
	queueBytes int
	// onWatched, if set, is called (under mu) when a range gets its
	// first watcher: the freshness loop wakes for it (read_close.go).
	onWatched func()
}

var _ rangesm.FeedSink = (*watchFeeds)(nil)

func newWatchFeeds() *watchFeeds {
	return &watchFeeds{ranges: make(map[uint64]map[*watcher]struct{})}
}

// watcher is one watch stream's state. Fields below mu are guarded by the
// feeds' mu.
type watcher struct {
	rangeID    uint64
	start, end []byte // end nil: the keyspace's end
	// scanTo is the version up to which the watcher reads history
	// (catch-up): the frontier when it registered, raised by every batch
	// published without its changes (rangesm.FeedSink.Applied). Queued
	// events are all above it.
	scanTo hlc.Timestamp
	// queue holds the changes to send, in version order, queued their
	// bytes; progress the newest frontier published: every change at or
	// below it is in queue or was taken from it.
	queue  []mvcc.Change
	queued int
	// progress is the frontier of the last batch published.
	progress hlc.Timestamp
	// err ends the stream (cut off, range changed); set once.
	err error
	// wake is signalled when queue, progress or err change.
	wake chan struct{}
}

// contains reports whether key is in the watcher's span.
func (w *watcher) contains(key []byte) bool {
	return bytes.Compare(key, w.start) >= 0 && (w.end == nil || bytes.Compare(key, w.end) < 0)
}

func (w *watcher) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// register adds a watcher of [start, end) on rangeID, whose replica's
// published state is st() (read under the feeds' lock, so that every batch
// published after it reaches the watcher through Applied). The watcher
// reads history up to scanTo first.
func (f *watchFeeds) register(rangeID uint64, start, end []byte, st func() rangesm.MVCCState) *watcher {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := st()
	w := &watcher{rangeID: rangeID, start: start, end: end, scanTo: s.FeedFrontier, progress: s.FeedFrontier,
		wake: make(chan struct{}, 1)}
	ws := f.ranges[rangeID]
	if ws == nil {
		ws = make(map[*watcher]struct{})
		f.ranges[rangeID] = ws
		if f.onWatched != nil {
			f.onWatched()
		}
	}
	ws[w] = struct{}{}
	f.count++
	return w
}

// unregister removes w.
func (f *watchFeeds) unregister(w *watcher) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ws := f.ranges[w.rangeID]
	if _, ok := ws[w]; !ok {
		return
	}
	delete(ws, w)
	f.count--
	if len(ws) == 0 {
		delete(f.ranges, w.rangeID)
	}
}

// Watched implements rangesm.FeedSink.
func (f *watchFeeds) Watched(rangeID uint64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.ranges[rangeID]) > 0
}

// watchedRanges returns the ranges with watchers.
func (f *watchFeeds) watchedRanges() []uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	ids := make([]uint64, 0, len(f.ranges))
	for id := range f.ranges {
		ids = append(ids, id)
	}
	return ids
}

// watchers returns how many watchers the node has.
func (f *watchFeeds) watchers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.count
}

// Applied implements rangesm.FeedSink: it queues each watcher's part of
// changes, or, for an incomplete batch, moves its history read up to
// frontier; and it ends the watchers whose span the range no longer holds
// (a split or a merge applied).
func (f *watchFeeds) Applied(rangeID uint64, desc *kvpb.RangeDescriptor, changes []mvcc.Change, frontier hlc.Timestamp, complete bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	limit := f.queueBytes
	if limit == 0 {
		limit = watchQueueBytes
	}
	for w := range f.ranges[rangeID] {
		if w.err != nil {
			continue
		}
		if desc == nil || !keys.ContainsUserSpan(desc, w.start, w.end) {
			w.err = errRangeChanged
			w.signal()
			continue
		}
		if !complete {
			if w.scanTo.Less(frontier) {
				w.scanTo = frontier
				// Every queued change is at or below frontier: the
				// history read covers it.
				w.queue, w.queued = nil, 0
			}
		} else {
			for i := range changes {
				c := &changes[i]
				if !w.scanTo.Less(c.Version) || !w.contains(c.Key) {
					continue
				}
				w.queue = append(w.queue, *c)
				w.queued += c.Size()
			}
			if w.queued > limit {
				w.err = errWatcherBehind(len(w.queue), w.queued, limit)
				w.queue, w.queued = nil, 0
			}
		}
		w.progress = w.progress.Forward(frontier)
		// A new frontier alone does not wake the stream: it sends
		// progress with its next events, or at its next check
		// (watchCheckInterval).
		if len(w.queue) > 0 || w.err != nil || !complete {
			w.signal()
		}
	}
}

// take returns w's queued changes and progress, or the error that ends it.
func (f *watchFeeds) take(w *watcher) (changes []mvcc.Change, progress, scanTo hlc.Timestamp, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	changes, w.queue, w.queued = w.queue, nil, 0
	return changes, w.progress, w.scanTo, w.err
}

// fail ends w with err (unless it has ended already).
func (f *watchFeeds) fail(w *watcher, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if w.err == nil {
		w.err = err
		w.signal()
	}
}
