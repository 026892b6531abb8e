package node

import (
	"bytes"
	"container/heap"
	"errors"
	"fmt"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/mvcc"
	"github.com/shaledb/shale/raft"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/rangesm"
)

// watchServer serves the Watch service (api/kvpb/watch.proto,
// docs/watch.md): the change feed of a span of one range, from its
// leader. A stream registers its watcher first (watch_feed.go), so that
// every batch published after that reaches it; then it reads history from
// its start version up to the frontier it registered at (and beyond, for
// batches published without their changes), in version order; then it
// sends what the feed queues, and progress notices from the frontier.
type watchServer struct {
	kvpb.UnimplementedWatchServer
	n *Node
}

const (
	// watchCheckInterval is how often a stream checks that its node still
	// leads the range and the range still holds its span (its events stay
	// right meanwhile: a former leader still applies the range's log), and
	// how often at most a stream with no events sends a progress notice
	// alone. Progress rides with every message of events; an idle watcher
	// costs one wake-up and one small message a second, so 10,000 of them
	// cost 10,000 of each rather than five times that.
	watchCheckInterval = time.Second
	// watchMaxEvents and watchMaxBytes bound one message.
	watchMaxEvents = 1000
	watchMaxBytes  = 1 << 20
)

// catchUpMaxEvents and catchUpMaxBytes bound what one history read holds:
// a longer history is read in several passes, each up to a version below
// which it fits. Variables so that tests can make passes small.
var (
	catchUpMaxEvents = 16384
	catchUpMaxBytes  = 8 << 20
)

// errRangeChanged ends a watcher whose range no longer holds its span.
var errRangeChanged = errors.New("the range split or merged")

// errWatcherBehind cuts off a watcher that fell behind.
func errWatcherBehind(events, bytes, limit int) error {
	return status.Errorf(codes.ResourceExhausted,
		"Watch: the watcher fell behind: %d events (%d bytes) queued, over the per-watcher limit of %d bytes; resume from the last version received",
		events, bytes, limit)
}

// Watch implements kvpb.WatchServer.
func (s *watchServer) Watch(req *kvpb.WatchRequest, stream kvpb.Watch_WatchServer) error {
	n := s.n
	const op = "Watch"
	start, end := req.GetStartKey(), req.GetEndKey()
	if len(end) == 0 {
		end = nil
	}
	if end != nil && bytes.Compare(start, end) >= 0 {
		return invalidArgument("end_key", "the span [%q, %q) is empty or inverted: end_key must be above start_key", clip(start), clip(end))
	}
	// A start_version that is set is a start, even at zero (from the
	// beginning of the retained history).
	from, _, err := timestampFromProto("start_version", req.GetStartVersion())
	if err != nil {
		return err
	}
	explicit := req.GetStartVersion() != nil
	r, desc, err := n.replicaFor(req.GetHeader(), start)
	if err != nil {
		return err
	}
	if err := n.checkSpan(req.GetHeader(), desc, start, end); err != nil {
		return err
	}
	if !r.IsLeader() {
		return n.raftError(op, r.NotLeaderError())
	}
	if r.Frozen() {
		return n.raftError(op, r.FrozenError())
	}
	// A start_version ahead of this node's clock is served as it is: a
	// watch closes nothing at it (unlike a read), and a client resuming
	// from a frontier another node's clock set may be ahead of a skewed
	// node's.
	w := n.watches.register(r.RangeID(), bytes.Clone(start), bytes.Clone(end), func() rangesm.MVCCState { return mvccState(r) })
	defer n.watches.unregister(w)
	if !explicit {
		from = w.scanTo
	}
	if g := mvccState(r).GCThreshold; from.Less(g) {
		return historyCompacted(op, r.RangeID(), from, g)
	}
	ws := &watchStream{n: n, r: r, w: w, stream: stream, prev: req.GetPrevValues(), cur: from}
	first := &kvpb.WatchResponse{Header: n.respHeader(r, r.AppliedIndex()), Progress: rangesm.TimestampProto(from)}
	if first.Progress == nil {
		first.Progress = &kvpb.Timestamp{} // a range never written: from version zero
	}
	if err := stream.Send(first); err != nil {
		return err
	}
	ws.sentProgress = from
	err = ws.run()
	if errors.Is(err, errRangeChanged) {
		d := r.Descriptor()
		if d == nil {
			return rangeNotFound(r.RangeID())
		}
		return n.keyMismatch(req.GetHeader().GetRangeId(), d, fmt.Sprintf("Watch: range %d no longer holds [%q, %q): it split or merged",
			r.RangeID(), clip(start), clip(end)))
	}
	if status.Code(err) == codes.ResourceExhausted {
		n.metrics.watch.cutoffs.Inc()
	}
	return err
}

// watchStream is one Watch stream being served.
type watchStream struct {
	n      *Node
	r      *raft.Replica
	w      *watcher
	stream kvpb.Watch_WatchServer
	prev   bool
	// cur: every event at or below it has been sent.
	cur          hlc.Timestamp
	sentProgress hlc.Timestamp
	// live: the stream has taken a change from the feed.
	live bool
	// progressAt is when the last progress notice was sent.
	progressAt time.Time
	out        kvpb.WatchResponse
	outBytes   int
}

// run serves the stream until it fails or ends.
func (ws *watchStream) run() error {
	n, w := ws.n, ws.w
	ctx := ws.stream.Context()
	t := time.NewTicker(watchCheckInterval)
	defer t.Stop()
	for {
		changes, progress, scanTo, err := n.watches.take(w)
		if err != nil {
			return err
		}
		if ws.cur.Less(scanTo) {
			if err := ws.catchUp(scanTo); err != nil {
				return err
			}
		}
		for i := range changes {
			if !ws.live {
				ws.live = true
				if dropFirstLiveWatchEvent() {
					continue // the planted bug of a test build (faults_watch_on.go)
				}
			}
			// (Queued changes are above scanTo; a stream that started
			// above the frontier skips those up to its start.)
			if ws.cur.Less(changes[i].Version) {
				if err := ws.add(&changes[i]); err != nil {
					return err
				}
			}
		}
		if len(changes) > 0 {
			ws.cur = ws.cur.Forward(changes[len(changes)-1].Version)
		}
		if ws.sentProgress.Less(progress) && (len(changes) > 0 || time.Since(ws.progressAt) >= watchCheckInterval) {
			ws.progressAt = time.Now()
			ws.out.Progress = rangesm.TimestampProto(progress)
			ws.sentProgress = progress
			n.metrics.watch.progressLag.Observe(lagSeconds(n, progress))
		}
		if err := ws.flush(); err != nil {
			return err
		}
		select {
		case <-w.wake:
		case <-t.C:
			if err := ws.check(); err != nil {
				return err
			}
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-n.bgCtx.Done():
			return unavailable(time.Second, "Watch: node is shutting down; resume on another node")
		}
	}
}

// check ends the stream when this node no longer leads the range or the
// range no longer holds the span.
func (ws *watchStream) check() error {
	r := ws.r
	if cur, err := ws.n.store.Replica(r.RangeID()); err != nil || cur != r {
		return rangeNotFound(r.RangeID())
	}
	if d := r.Descriptor(); d == nil || !keys.ContainsUserSpan(d, ws.w.start, ws.w.end) {
		return errRangeChanged
	}
	if !r.IsLeader() {
		return ws.n.raftError("Watch", r.NotLeaderError())
	}
	return nil
}

// add appends one change to the message being built, sending it first
// when full.
func (ws *watchStream) add(c *mvcc.Change) error {
	if len(ws.out.Events) >= watchMaxEvents || ws.outBytes >= watchMaxBytes {
		if err := ws.flush(); err != nil {
			return err
		}
	}
	e := &kvpb.WatchEvent{Type: kvpb.WatchEventType_WATCH_EVENT_TYPE_PUT, Key: c.Key, Value: c.Value,
		Version: rangesm.TimestampProto(c.Version)}
	if c.Deleted {
		e.Type = kvpb.WatchEventType_WATCH_EVENT_TYPE_DELETE
	}
	if ws.prev {
		e.PrevFound, e.PrevValue = c.PrevFound, c.PrevValue
	}
	ws.out.Events = append(ws.out.Events, e)
	ws.outBytes += c.Size()
	return nil
}

// flush sends the message being built, if it holds anything.
func (ws *watchStream) flush() error {
	if len(ws.out.Events) == 0 && ws.out.Progress == nil {
		return nil
	}
	now := ws.n.clock.Now()
	for _, e := range ws.out.Events {
		ws.n.metrics.watch.eventLag.Observe(max(0, float64(now.WallTime-e.GetVersion().GetWallNanos())/1e9))
	}
	err := ws.stream.Send(&ws.out)
	ws.n.metrics.watch.events.Add(float64(len(ws.out.Events)))
	ws.out = kvpb.WatchResponse{}
	ws.outBytes = 0
	return err
}

// catchUp sends every version of the span in (cur, upTo] from history, in
// version order, and moves cur to upTo.
func (ws *watchStream) catchUp(upTo hlc.Timestamp) error {
	for ws.cur.Less(upTo) {
		to, chunk, err := ws.readHistory(ws.cur, upTo)
		if err != nil {
			return err
		}
		for i := range chunk {
			if err := ws.add(&chunk[i]); err != nil {
				return err
			}
		}
		ws.cur = to
		// Every event at or below to is sent: say so, so that a stream
		// broken in a long catch-up resumes from here.
		if ws.sentProgress.Less(to) {
			ws.out.Progress = rangesm.TimestampProto(to)
			ws.sentProgress = to
		}
		if err := ws.flush(); err != nil {
			return err
		}
	}
	return nil
}

// readHistory reads the span's versions in (after, upTo] from a snapshot
// of the engine, in version order (a version's events in key order). When
// they are more than one read may hold, it reads only up to a version to
// below upTo where they fit, and returns to.
func (ws *watchStream) readHistory(after, upTo hlc.Timestamp) (to hlc.Timestamp, chunk []mvcc.Change, err error) {
	n, r, w := ws.n, ws.r, ws.w
	snap, err := n.db.NewSnapshot()
	if err != nil {
		return hlc.Timestamp{}, nil, readError("Watch", err)
	}
	defer snap.Close()
	// The snapshot is open before the threshold is checked: a GC that
	// could have taken versions from it has published its threshold.
	if g := mvccState(r).GCThreshold; after.Less(g) {
		return hlc.Timestamp{}, nil, historyCompacted("Watch", r.RangeID(), after, g)
	}
	var h changeHeap
	size := 0
	var cut hlc.Timestamp // the lowest version left out, if any
	cutSet := false
	leaveOut := func(v hlc.Timestamp) {
		if !cutSet || v.Less(cut) {
			cut, cutSet = v, true
		}
	}
	err = keys.UserKeyspace.History(snap, w.start, w.end, after, upTo, ws.prev, func(c mvcc.Change) error {
		if cutSet && !c.Version.Less(cut) {
			return nil
		}
		heap.Push(&h, c)
		size += c.Size()
		for h.Len() > 1 && (h.Len() > catchUpMaxEvents || size > catchUpMaxBytes) {
			top := heap.Pop(&h).(mvcc.Change)
			size -= top.Size()
			leaveOut(top.Version)
		}
		return nil
	})
	if err != nil {
		return hlc.Timestamp{}, nil, readError("Watch", err)
	}
	to = upTo
	if cutSet {
		chunk = slices.DeleteFunc([]mvcc.Change(h), func(c mvcc.Change) bool { return !c.Version.Less(cut) })
		to = cut.Prev()
		if len(chunk) == 0 {
			// One version alone is more than a read holds (a command's
			// writes): read that version whole.
			to = cut
			err = keys.UserKeyspace.History(snap, w.start, w.end, cut.Prev(), cut, ws.prev, func(c mvcc.Change) error {
				chunk = append(chunk, c)
				return nil
			})
			if err != nil {
				return hlc.Timestamp{}, nil, readError("Watch", err)
			}
		}
	} else {
		chunk = h
	}
	slices.SortFunc(chunk, func(a, b mvcc.Change) int {
		if c := a.Version.Compare(b.Version); c != 0 {
			return c
		}
		return bytes.Compare(a.Key, b.Key)
	})
	return to, chunk, nil
}

// changeHeap is a max-heap of changes by version.
type changeHeap []mvcc.Change

func (h changeHeap) Len() int           { return len(h) }
func (h changeHeap) Less(i, j int) bool { return h[j].Version.Less(h[i].Version) }
func (h changeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *changeHeap) Push(x any)        { *h = append(*h, x.(mvcc.Change)) }
func (h *changeHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

// lagSeconds is how far ts is behind the node's clock.
func lagSeconds(n *Node, ts hlc.Timestamp) float64 {
	return max(0, float64(n.clock.PhysicalNow()-ts.WallTime)/1e9)
}
