package raft

import (
	"testing"
	"time"
)

// TestDiskStallCountsOnlyTimeTheNodeRan drives the stall accounting with
// explicit times: a write in flight is a stall once on-time ticks have
// seen it wait longer than the threshold, and the time a starved or
// paused node could not run (late ticks, a late end) is not the disk's.
func TestDiskStallCountsOnlyTimeTheNodeRan(t *testing.T) {
	const (
		tick = int64(50 * time.Millisecond)
		thr  = int64(time.Second)
		hold = int64(2 * time.Second)
		gap  = stallCreditTicks * tick
	)
	var d diskStall

	// A write that hangs while the node ticks on time: noticed as soon
	// as the ticks have seen it wait past the threshold, once.
	now := int64(0)
	d.begin(now)
	noticed := int64(-1)
	for range 40 {
		now += tick
		if d.observe(now, thr, gap) {
			if noticed >= 0 {
				t.Fatal("the same stall was reported twice")
			}
			noticed = now
		}
	}
	if noticed != thr+tick {
		t.Fatalf("a hanging write noticed after %v, want %v (the first tick past the threshold)", time.Duration(noticed), time.Duration(thr+tick))
	}
	if !d.stalled(now, thr) {
		t.Fatal("a write hanging for 2s does not count as stalled")
	}
	stalled, newly := d.end(now+tick, thr, hold, gap)
	if !stalled || newly {
		t.Fatalf("end of the noticed stall: stalled %v, newly %v; want true, false", stalled, newly)
	}
	if end := now + tick; !d.stalled(end+hold-1, thr) || d.stalled(end+hold, thr) {
		t.Fatal("a stalled disk must stay stalled for the hold after its write ends, and no longer")
	}

	// A node paused (or starved) for 3 s while a write is in flight: the
	// late tick credits two ticks, not 3 s, and the write that ends at
	// once after it is no stall.
	d = diskStall{}
	now = 0
	d.begin(now)
	now += 3 * int64(time.Second)
	if d.observe(now, thr, gap) || d.stalled(now, thr) {
		t.Fatal("a write in flight across a 3 s pause of the node counts as a stall")
	}
	if stalled, _ := d.end(now+int64(time.Millisecond), thr, hold, gap); stalled || d.stalled(now+int64(time.Millisecond), thr) {
		t.Fatal("a write that ended after the node's pause counts as a stall")
	}

	// Same with no tick at all during the write (the ticker starved
	// too): its end credits at most two ticks.
	d = diskStall{}
	d.begin(0)
	if stalled, _ := d.end(int64(5*time.Second), thr, hold, gap); stalled {
		t.Fatal("a write seen by no tick counts as a stall on its end")
	}

	// A slow write (600 ms, ticks on time) is not a stall; nor are many
	// of them in a row.
	d = diskStall{}
	now = 0
	for range 10 {
		d.begin(now)
		for range 12 {
			now += tick
			if d.observe(now, thr, gap) {
				t.Fatal("a 600 ms write was reported as a stall")
			}
		}
		if stalled, _ := d.end(now, thr, hold, gap); stalled {
			t.Fatal("a 600 ms write counts as a stall")
		}
		now += tick / 5
	}

	// A write that ends just past the threshold, between two ticks, is
	// counted on its end.
	d = diskStall{}
	now = 0
	d.begin(now)
	for now < thr {
		now += tick
		if d.observe(now, thr, gap) {
			t.Fatal("noticed before its wait passed the threshold")
		}
	}
	if stalled, newly := d.end(now+tick/2, thr, hold, gap); !stalled || !newly {
		t.Fatalf("a write that waited %v: stalled %v, newly %v; want both", time.Duration(now+tick/2), stalled, newly)
	}
}
