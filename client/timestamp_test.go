package client

import (
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/hlc"
)

func TestParseTimestamp(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Timestamp
	}{
		{"1795798530123456789,3", Timestamp{WallTime: 1795798530123456789, Logical: 3}},
		{"1795798530123456789", Timestamp{WallTime: 1795798530123456789}},
		{"2026-11-27T16:55:30.123456789Z,3", Timestamp{WallTime: 1795798530123456789, Logical: 3}},
		{"2026-11-27T16:55:30Z", Timestamp{WallTime: 1795798530000000000}},
		{"2026-11-27T17:55:30.5+01:00", Timestamp{WallTime: 1795798530500000000}},
		{" 7,0 ", Timestamp{WallTime: 7}},
	} {
		got, err := ParseTimestamp(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseTimestamp(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "-5", "abc", "12,x", "12,-1", "2026-11-27", "2026-11-27T16:55:30Z,", "1969-12-31T23:59:59Z",
		"2026-11-27T16:55:30Z,99999999999", "99999999999999999999"} {
		if ts, err := ParseTimestamp(bad); !errors.Is(err, hlc.ErrMalformed) {
			t.Errorf("ParseTimestamp(%q) = %v, %v; want an error wrapping hlc.ErrMalformed", bad, ts, err)
		}
	}
}

// TestFormatTimestampRoundTrip: what shalectl prints, --at reads back to
// the same timestamp.
func TestFormatTimestampRoundTrip(t *testing.T) {
	for _, ts := range []Timestamp{
		{WallTime: 1795798530123456789, Logical: 3},
		{WallTime: 1795798530000000000},
		{WallTime: 1795798530100000000, Logical: math.MaxInt32},
		{WallTime: 1},
	} {
		s := FormatTimestamp(ts)
		got, err := ParseTimestamp(s)
		if err != nil || got != ts {
			t.Errorf("ParseTimestamp(FormatTimestamp(%v) = %q) = %v, %v", ts, s, got, err)
		}
	}
	if got := FormatTimestamp(Timestamp{WallTime: 1795798530123456789, Logical: 3}); got != "2026-11-27T16:55:30.123456789Z,3" {
		t.Errorf("FormatTimestamp = %q", got)
	}
	if got := FormatTimestamp(Timestamp{}); got != "-" {
		t.Errorf("FormatTimestamp(zero) = %q, want -", got)
	}
}

func TestTimestampProto(t *testing.T) {
	if toProto(Timestamp{}) != nil {
		t.Error("the zero Timestamp must go out unset")
	}
	ts := Timestamp{WallTime: 12, Logical: 5}
	if got, err := fromProto(toProto(ts)); err != nil || got != ts {
		t.Errorf("round trip: %v, %v", got, err)
	}
	if got, err := fromProto(nil); err != nil || !got.IsZero() {
		t.Errorf("fromProto(nil) = %v, %v", got, err)
	}
	for _, p := range []*kvpb.Timestamp{{WallNanos: -1}, {WallNanos: 1, Logical: math.MaxInt32 + 1}} {
		if _, err := fromProto(p); !errors.Is(err, hlc.ErrMalformed) {
			t.Errorf("fromProto(%v) = %v, want malformed", p, err)
		}
	}
}

// TestHighWater: concurrent observations leave the highest, and a lower
// one never lowers it.
func TestHighWater(t *testing.T) {
	var h highWater
	if !h.load().IsZero() {
		t.Fatal("a new high-water mark is not zero")
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				h.observe(Timestamp{WallTime: int64(i), Logical: int32(g)})
			}
		}()
	}
	wg.Wait()
	if got := h.load(); got != (Timestamp{WallTime: 999, Logical: 7}) {
		t.Fatalf("high water = %v, want 999,7", got)
	}
	h.observe(Timestamp{WallTime: 5})
	if got := h.load(); got != (Timestamp{WallTime: 999, Logical: 7}) {
		t.Fatalf("a lower observation moved it to %v", got)
	}
}

// TestReadOptions: bad combinations and timestamps are refused before
// anything is sent.
func TestReadOptions(t *testing.T) {
	ts := Timestamp{WallTime: 10}
	var served Timestamp
	o, err := readOpts("Get", []ReadOption{AtTimestamp(ts), ServedAt(&served), nil})
	if err != nil || o.at != ts || o.servedAt != &served {
		t.Fatalf("readOpts = %+v, %v", o, err)
	}
	for name, opts := range map[string][]ReadOption{
		"zero":            {AtTimestamp(Timestamp{})},
		"negative":        {AtTimestamp(Timestamp{WallTime: -1})},
		"at and stale":    {AtTimestamp(ts), StaleRead(time.Second)},
		"stale, no bound": {StaleRead(0)},
		"stale, negative": {StaleRead(-time.Second)},
	} {
		if _, err := readOpts("Get", opts); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: readOpts = %v, want ErrInvalidArgument", name, err)
		}
	}
	c := &Client{}
	c.ObserveTimestamp(Timestamp{WallTime: 40, Logical: 1})
	h := c.readHeaderAt(o, ts)
	if h.GetReadTimestamp().GetWallNanos() != 10 || h.GetObserved().GetWallNanos() != 40 || h.GetObserved().GetLogical() != 1 {
		t.Fatalf("header = %v", h)
	}
	if h := c.header(true); h.GetReadTimestamp() != nil || h.GetObserved().GetWallNanos() != 40 {
		t.Fatalf("write header = %v", h)
	}
	// A stale read asks for bounded staleness; its later parts go at the
	// first part's timestamp, as plain reads at a timestamp.
	so, err := readOpts("Scan", []ReadOption{StaleRead(1500 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	if h := c.readHeaderAt(so, Timestamp{}); h.GetReadConsistency() != kvpb.ReadConsistency_READ_CONSISTENCY_BOUNDED_STALE ||
		h.GetMaxStalenessUs() != 1_500_000 || h.GetReadTimestamp() != nil {
		t.Fatalf("stale header = %v", h)
	}
	if h := c.readHeaderAt(so, ts); h.GetReadConsistency() != kvpb.ReadConsistency_READ_CONSISTENCY_LINEARIZABLE ||
		h.GetReadTimestamp().GetWallNanos() != 10 {
		t.Fatalf("stale read's later part header = %v", h)
	}
}
