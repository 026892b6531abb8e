package node

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// Load tracking for load-based splits and for the QPS shown by
// Admin.Ranges: every request routed to a local replica counts against its
// range, and a uniform sample of the keys it touched (a reservoir) is
// kept. Each split check rolls the window over: the QPS of the finished
// window is kept for display and the sample is handed to the splitter,
// whose median divides the window's traffic in two.

// loadSampleSize is the reservoir size per range.
const loadSampleSize = 64

type loadTracker struct {
	mu     sync.Mutex
	ranges map[uint64]*rangeLoad
}

type rangeLoad struct {
	mu      sync.Mutex
	count   int64
	samples [][]byte
	since   time.Time
	lastQPS float64
}

func (l *loadTracker) get(rangeID uint64) *rangeLoad {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ranges == nil {
		l.ranges = map[uint64]*rangeLoad{}
	}
	rl := l.ranges[rangeID]
	if rl == nil {
		rl = &rangeLoad{since: time.Now()}
		l.ranges[rangeID] = rl
	}
	return rl
}

// record counts one request on rangeID touching key.
func (l *loadTracker) record(rangeID uint64, key []byte) {
	rl := l.get(rangeID)
	rl.mu.Lock()
	defer rl.mu.Unlock()
	rl.count++
	if len(rl.samples) < loadSampleSize {
		rl.samples = append(rl.samples, bytes.Clone(key))
	} else if j := rand.Int64N(rl.count); j < loadSampleSize {
		rl.samples[j] = bytes.Clone(key)
	}
}

// roll ends rangeID's window: it returns the window's QPS and its sorted
// key sample, and starts a new window.
func (l *loadTracker) roll(rangeID uint64, now time.Time) (float64, [][]byte) {
	rl := l.get(rangeID)
	rl.mu.Lock()
	defer rl.mu.Unlock()
	el := now.Sub(rl.since).Seconds()
	qps := 0.0
	if el > 0 {
		qps = float64(rl.count) / el
	}
	s := rl.samples
	slices.SortFunc(s, bytes.Compare)
	rl.lastQPS, rl.count, rl.samples, rl.since = qps, 0, nil, now
	return qps, s
}

// qps returns the QPS of rangeID's last finished window (or of the
// current one if none finished yet).
func (l *loadTracker) qps(rangeID uint64) float64 {
	rl := l.get(rangeID)
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if rl.lastQPS == 0 {
		if el := time.Since(rl.since).Seconds(); el > 1 {
			return float64(rl.count) / el
		}
	}
	return rl.lastQPS
}

// forget drops a range that left this node.
func (l *loadTracker) forget(rangeID uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.ranges, rangeID)
}
