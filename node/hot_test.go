package node

import (
	"fmt"
	"testing"
	"time"

	"github.com/shaledb/shale/api/kvpb"
)

// TestHotTrackerShares: a range whose requests are one key reports that
// key with a share near 1; a range whose requests spread over many keys
// reports no key with a large share; rates and CPU shares follow the
// counts.
func TestHotTrackerShares(t *testing.T) {
	var h hotTracker
	for i := 0; i < 4000; i++ {
		h.record(5, &kvpb.GetRequest{Key: []byte("one")}, 100, time.Millisecond, time.Now())
		h.record(6, &kvpb.GetRequest{Key: []byte(fmt.Sprintf("spread-%d", i%1000))}, 10, time.Millisecond, time.Now())
	}
	_, ranges, keys := h.report(10)
	if len(ranges) != 2 || ranges[0].rangeID != 5 && ranges[0].rangeID != 6 {
		t.Fatalf("ranges = %+v", ranges)
	}
	for _, r := range ranges {
		if r.cpuShare < 0.45 || r.cpuShare > 0.55 {
			t.Fatalf("range %d: CPU share %.2f, want about half", r.rangeID, r.cpuShare)
		}
		if r.rangeID == 5 && r.bytesPerSec < 9*ranges[1-indexOf(ranges, 5)].bytesPerSec {
			t.Fatalf("bytes/s of range 5 (%v) should be 10x range 6's", ranges)
		}
	}
	if keys[0].rangeID != 5 || string(keys[0].key) != "one" || keys[0].rangeShare < 0.8 {
		t.Fatalf("top key = %q of range %d share %.2f; want one of range 5 with share near 1", keys[0].key, keys[0].rangeID, keys[0].rangeShare)
	}
	for _, k := range keys[1:] {
		if k.rangeShare >= 0.5 {
			t.Fatalf("spread key %q has share %.2f", k.key, k.rangeShare)
		}
	}
}

func indexOf(rs []hotRangeRate, id uint64) int {
	for i, r := range rs {
		if r.rangeID == id {
			return i
		}
	}
	return -1
}
