package node

import (
	"testing"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/rangesm"
)

// TestProtectedTarget: a GC target is lowered below the timestamp of
// every live protection overlapping the range, and only those.
func TestProtectedTarget(t *testing.T) {
	ts := func(w int64) hlc.Timestamp { return hlc.Timestamp{WallTime: w} }
	d := &kvpb.RangeDescriptor{StartKey: []byte("b"), EndKey: []byte("m")}
	last := &kvpb.RangeDescriptor{StartKey: []byte("m")}
	recs := []rangesm.ProtectionRecord{
		{ID: 1, Timestamp: ts(50), Start: []byte("a"), End: []byte("c"), Expiry: 1000}, // overlaps d
		{ID: 2, Timestamp: ts(20), Start: []byte("m"), End: []byte("z"), Expiry: 1000}, // touches d's end only
		{ID: 3, Timestamp: ts(10), Start: []byte("c"), End: []byte("d"), Expiry: 500},  // expired at 500
		{ID: 4, Timestamp: ts(200), Start: []byte("e"), End: nil, Expiry: 1000},        // above the target
		{ID: 5, Timestamp: ts(30), Start: []byte("zz"), End: nil, Expiry: 1000},        // past d
	}
	for _, c := range []struct {
		name   string
		d      *kvpb.RangeDescriptor
		now    int64
		target hlc.Timestamp
		want   hlc.Timestamp
	}{
		{"overlapping", d, 600, ts(100), ts(50).Prev()},
		{"expired one counts before expiry", d, 400, ts(100), ts(10).Prev()},
		{"the last range", last, 600, ts(100), ts(20).Prev()},
		{"target below every protection", d, 600, ts(5), ts(5)},
	} {
		if got := protectedTarget(c.target, c.d, recs, c.now); got != c.want {
			t.Errorf("%s: target %s, want %s", c.name, got, c.want)
		}
	}
}
