package hlc

import (
	"errors"
	"testing"
	"time"
)

func TestMeasureOffset(t *testing.T) {
	// Sent at 1000, the peer read 1600 in the middle, back at 1200: the
	// peer is 500 ahead, give or take 100.
	o := MeasureOffset(1000, 1600, 1200)
	if o.Offset != 500 || o.Uncertainty != 100 || o.MeasuredAt != 1200 {
		t.Fatalf("MeasureOffset = %+v", o)
	}
	// A reply that seems to arrive before it was sent (a clock step): no
	// negative uncertainty.
	if o := MeasureOffset(1000, 1000, 900); o.Uncertainty != 0 {
		t.Fatalf("MeasureOffset with a backwards step = %+v", o)
	}
}

func TestOffsetMonitorMajorityRule(t *testing.T) {
	const maxOffset = 100 * time.Millisecond // tolerated: 80 ms
	m := NewOffsetMonitor(maxOffset, 10*time.Second)
	now := int64(100 * time.Second)
	ms := func(d int) time.Duration { return time.Duration(d) * time.Millisecond }
	if err := m.Check(now); err != nil {
		t.Fatalf("no measurements: %v", err)
	}
	m.Record(1, RemoteOffset{Offset: ms(90), Uncertainty: ms(1), MeasuredAt: now})
	m.Record(2, RemoteOffset{Offset: ms(-5), MeasuredAt: now})
	if err := m.Check(now); err != nil {
		t.Fatalf("one of two peers beyond: %v", err)
	}
	m.Record(3, RemoteOffset{Offset: ms(-95), Uncertainty: ms(2), MeasuredAt: now})
	err := m.Check(now)
	if !errors.Is(err, ErrClockOffset) {
		t.Fatalf("two of three peers beyond: %v", err)
	}
	if st := m.Status(now); st.Fresh != 3 || st.Beyond != 2 || st.Median != ms(-5) {
		t.Fatalf("Status = %+v", st)
	}
	// A measurement beyond only within its uncertainty does not count.
	m.Record(3, RemoteOffset{Offset: ms(-95), Uncertainty: ms(20), MeasuredAt: now})
	if err := m.Check(now); err != nil {
		t.Fatalf("uncertain measurement counted: %v", err)
	}
	// Stale measurements do not count; forgotten peers neither.
	m.Record(3, RemoteOffset{Offset: ms(-95), MeasuredAt: now})
	m.Record(2, RemoteOffset{Offset: ms(-5), MeasuredAt: now - int64(20*time.Second)})
	if st := m.Status(now); st.Fresh != 2 || st.Healthy() {
		t.Fatalf("with peer 2 stale: %+v", st)
	}
	m.Forget(1)
	m.Forget(3)
	if st := m.Status(now); st.Fresh != 0 || !st.Healthy() {
		t.Fatalf("after forgetting: %+v", st)
	}
}
