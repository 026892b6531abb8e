package hlc

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// RemoteOffset is one measurement of a peer's clock against the local one,
// taken from a round trip: the local physical clock read when the request
// was sent and when the reply came back, and the peer's physical clock
// read while it handled the request.
type RemoteOffset struct {
	// Offset is the peer's clock minus ours, estimated at the middle of
	// the round trip.
	Offset time.Duration
	// Uncertainty bounds the estimate's error: half the round trip.
	Uncertainty time.Duration
	// MeasuredAt is the local physical time the reply arrived, in Unix
	// nanoseconds.
	MeasuredAt int64
}

// MeasureOffset estimates a peer's offset from one round trip: sent and
// received are local physical readings (Unix nanoseconds) around the call,
// remote the peer's physical reading in between.
func MeasureOffset(sent, remote, received int64) RemoteOffset {
	rtt := max(received-sent, 0)
	return RemoteOffset{
		Offset:      time.Duration(remote - (sent + rtt/2)),
		Uncertainty: time.Duration(rtt / 2),
		MeasuredAt:  received,
	}
}

// OffsetMonitor keeps the latest offset measurement of each peer and says
// whether the local clock is within bounds of the cluster: it is not when
// a majority of the peers with a fresh measurement are certainly farther
// than the tolerated offset (a fraction of the maximum offset) from it.
// That is the condition on which a node stops serving (docs/versions.md).
// Safe for concurrent use.
type OffsetMonitor struct {
	tolerated time.Duration
	ttl       time.Duration

	mu    sync.Mutex
	peers map[uint64]RemoteOffset
}

// ToleratedFraction is the part of the maximum offset a node may be from
// the cluster before it stops serving; the rest is margin for the
// measurements' own error (CockroachDB uses the same 80%).
const ToleratedFraction = 0.8

// NewOffsetMonitor returns a monitor for clocks with the given maximum
// offset, ignoring measurements older than ttl.
func NewOffsetMonitor(maxOffset, ttl time.Duration) *OffsetMonitor {
	if maxOffset <= 0 || ttl <= 0 {
		panic(fmt.Sprintf("hlc.NewOffsetMonitor: maximum offset %v and ttl %v must be positive", maxOffset, ttl))
	}
	return &OffsetMonitor{
		tolerated: time.Duration(float64(maxOffset) * ToleratedFraction),
		ttl:       ttl,
		peers:     make(map[uint64]RemoteOffset),
	}
}

// Record stores peer's latest measurement.
func (m *OffsetMonitor) Record(peer uint64, o RemoteOffset) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.peers[peer] = o
}

// Forget drops peer (it left the cluster).
func (m *OffsetMonitor) Forget(peer uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.peers, peer)
}

// OffsetStatus is the monitor's verdict at one moment.
type OffsetStatus struct {
	Fresh  int // peers with a measurement within the ttl
	Beyond int // of those, the ones certainly beyond the tolerated offset
	// Median is the median offset of the fresh measurements (0 when none):
	// about how far the cluster's clocks are from ours.
	Median time.Duration
}

// Healthy reports whether the local clock may serve: true when no fresh
// measurement exists or fewer than a majority of the fresh ones are
// beyond the tolerated offset.
func (s OffsetStatus) Healthy() bool { return s.Beyond*2 <= s.Fresh || s.Fresh == 0 }

// Status judges the local clock at local physical time now (Unix nanos).
func (m *OffsetMonitor) Status(now int64) OffsetStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	var st OffsetStatus
	// Every request that needs a timestamp asks: the fresh offsets go on
	// the stack (a cluster has few peers), and are sorted without the
	// reflection sort.Slice uses, so that asking allocates nothing.
	var buf [16]time.Duration
	offsets := buf[:0]
	for _, o := range m.peers {
		if now-o.MeasuredAt > int64(m.ttl) {
			continue
		}
		st.Fresh++
		offsets = append(offsets, o.Offset)
		abs := o.Offset
		if abs < 0 {
			abs = -abs
		}
		if abs-o.Uncertainty > m.tolerated {
			st.Beyond++
		}
	}
	if len(offsets) > 0 {
		slices.Sort(offsets)
		st.Median = offsets[len(offsets)/2]
	}
	return st
}

// Check returns nil if the local clock may serve at now, or an error
// wrapping ErrClockOffset that says how far off it is.
func (m *OffsetMonitor) Check(now int64) error {
	st := m.Status(now)
	if st.Healthy() {
		return nil
	}
	return fmt.Errorf("%w: %d of %d peers measure this node's clock beyond %v (median peer offset %v)",
		ErrClockOffset, st.Beyond, st.Fresh, m.tolerated, st.Median)
}
