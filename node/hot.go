package node

import (
	"cmp"
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/shaledb/shale/api/kvpb"
)

// Hot ranges and keys (docs/operations.md, "Hot ranges and keys").
//
// Every KV request this node serves counts against the range that served
// it (the range in its response header): requests, request and response
// bytes, and the time spent serving it. One request in hotSampleEvery has
// its keys offered to a Space-Saving sketch of hotKeysKept keys
// (hot_sketch.go), so memory is bounded whatever the key space. Counts
// are kept per window of hotWindow; a report reads the last finished
// window (or the current one before any finished), so rates follow the
// load within one to two windows.
//
// Time spent serving stands in for CPU: Go cannot attribute CPU time to a
// request. It includes waiting (for a Raft commit, an fsync), so a range
// of slow writes weighs more than its CPU; the share still names the
// ranges that keep the node busy.

const (
	// hotWindow is the span of one measurement window.
	hotWindow = 10 * time.Second
	// hotSampleEvery: one request in this many has its keys sampled.
	hotSampleEvery = 4
	// hotKeysKept is the sketch's capacity.
	hotKeysKept = 128
	// hotKeysPerRequest bounds the keys sampled from one batch request.
	hotKeysPerRequest = 16
	// hotMetricRanges is how many ranges /metrics exports (the busiest):
	// a bounded number of series whatever the number of ranges.
	hotMetricRanges = 10
	// hotDefaultLimit is what HotSpots reports without a limit.
	hotDefaultLimit = 20
)

// hotTracker counts the load of ranges and samples keys. Safe for
// concurrent use.
type hotTracker struct {
	mu   sync.Mutex
	cur  *hotWindowCounts
	prev *hotWindowCounts // the last finished window; nil before one
}

// hotWindowCounts are one window's counts.
type hotWindowCounts struct {
	start, end time.Time // end is zero while the window is current
	ranges     map[uint64]*hotRangeCounts
	serveTotal time.Duration
	keys       *spaceSaving
}

type hotRangeCounts struct {
	requests uint64
	bytes    uint64
	serve    time.Duration
}

func newHotWindow(now time.Time) *hotWindowCounts {
	return &hotWindowCounts{start: now, ranges: map[uint64]*hotRangeCounts{}, keys: newSpaceSaving(hotKeysKept)}
}

// rollLocked starts a new window when the current one is over. A window
// with no traffic for longer than a window leaves no finished window
// behind: the rates are those of the current, quiet one.
func (h *hotTracker) rollLocked(now time.Time) {
	if h.cur == nil {
		h.cur = newHotWindow(now)
		return
	}
	if now.Sub(h.cur.start) < hotWindow {
		return
	}
	if now.Sub(h.cur.start) < 2*hotWindow {
		h.cur.end = now
		h.prev = h.cur
	} else {
		h.prev = nil
	}
	h.cur = newHotWindow(now)
}

// record counts one request served by rangeID, finished at now.
func (h *hotTracker) record(rangeID uint64, req proto.Message, size int, served time.Duration, now time.Time) {
	sample := rand.Uint32N(hotSampleEvery) == 0
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rollLocked(now)
	w := h.cur
	rc := w.ranges[rangeID]
	if rc == nil {
		rc = &hotRangeCounts{}
		w.ranges[rangeID] = rc
	}
	rc.requests++
	rc.bytes += uint64(size)
	rc.serve += served
	w.serveTotal += served
	if sample {
		forKeys(req, func(k []byte) { w.keys.offer(k, rangeID) })
	}
}

// forKeys calls f with the keys of a KV request (at most
// hotKeysPerRequest): a span's start key stands for a scan.
func forKeys(req proto.Message, f func([]byte)) {
	switch r := req.(type) {
	case *kvpb.GetRequest:
		f(r.GetKey())
	case *kvpb.PutRequest:
		f(r.GetKey())
	case *kvpb.DeleteRequest:
		f(r.GetKey())
	case *kvpb.CompareAndSwapRequest:
		f(r.GetKey())
	case *kvpb.ScanRequest:
		f(r.GetStartKey())
	case *kvpb.DeleteRangeRequest:
		f(r.GetStartKey())
	case *kvpb.BatchGetRequest:
		for _, k := range r.GetKeys()[:min(len(r.GetKeys()), hotKeysPerRequest)] {
			f(k)
		}
	case *kvpb.BatchRequest:
		for _, m := range r.GetMutations()[:min(len(r.GetMutations()), hotKeysPerRequest)] {
			switch {
			case m.GetPut() != nil:
				f(m.GetPut().GetKey())
			case m.GetDelete() != nil:
				f(m.GetDelete().GetKey())
			case m.GetDeleteRange() != nil:
				f(m.GetDeleteRange().GetStartKey())
			}
		}
	}
}

// unaryInterceptor records every KV request that a local range served.
// Requests that failed are not load this node carried to the end, and
// admin calls name no range: neither counts.
func (h *hotTracker) unaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := handler(ctx, req)
	if err != nil {
		return resp, err
	}
	hr, ok := resp.(interface{ GetHeader() *kvpb.ResponseHeader })
	if !ok {
		return resp, nil
	}
	rangeID := hr.GetHeader().GetRangeId()
	pm, ok1 := req.(proto.Message)
	rm, ok2 := resp.(proto.Message)
	if rangeID == 0 || !ok1 || !ok2 {
		return resp, nil
	}
	now := time.Now()
	h.record(rangeID, pm, proto.Size(pm)+proto.Size(rm), now.Sub(start), now)
	return resp, nil
}

// hotRangeRate is one range's rates over a window.
type hotRangeRate struct {
	rangeID        uint64
	requestsPerSec float64
	bytesPerSec    float64
	cpuShare       float64
}

// hotKeyRate is one sampled key's estimated rate.
type hotKeyRate struct {
	key            []byte
	rangeID        uint64
	requestsPerSec float64
	errorPerSec    float64
	rangeShare     float64
}

// report returns the window's length and the ranges and keys by rate,
// busiest first, at most limit of each.
func (h *hotTracker) report(limit int) (time.Duration, []hotRangeRate, []hotKeyRate) {
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rollLocked(now)
	w, span := h.prev, time.Duration(0)
	if w != nil {
		span = w.end.Sub(w.start)
	} else {
		w, span = h.cur, now.Sub(h.cur.start)
	}
	secs := max(span.Seconds(), 0.001)
	ranges := make([]hotRangeRate, 0, len(w.ranges))
	byRange := map[uint64]float64{}
	for id, rc := range w.ranges {
		r := hotRangeRate{rangeID: id, requestsPerSec: float64(rc.requests) / secs, bytesPerSec: float64(rc.bytes) / secs}
		if w.serveTotal > 0 {
			r.cpuShare = float64(rc.serve) / float64(w.serveTotal)
		}
		ranges = append(ranges, r)
		byRange[id] = r.requestsPerSec
	}
	slices.SortFunc(ranges, func(a, b hotRangeRate) int {
		return cmp.Or(cmp.Compare(b.requestsPerSec, a.requestsPerSec), cmp.Compare(a.rangeID, b.rangeID))
	})
	var keys []hotKeyRate
	for _, it := range w.keys.top() {
		k := hotKeyRate{key: []byte(it.key), rangeID: it.rangeID,
			requestsPerSec: float64(it.count*hotSampleEvery) / secs, errorPerSec: float64(it.err*hotSampleEvery) / secs}
		// The share counts only what the key surely had (count - err):
		// a key is called a range's whole load on evidence, not on the
		// sketch's overestimate.
		if rr := byRange[it.rangeID]; rr > 0 {
			k.rangeShare = min(1, float64((it.count-it.err)*hotSampleEvery)/secs/rr)
		}
		keys = append(keys, k)
	}
	return span, ranges[:min(len(ranges), limit)], keys[:min(len(keys), limit)]
}
