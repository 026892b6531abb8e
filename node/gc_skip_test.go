package node

import (
	"fmt"
	"testing"
	"time"
)

// TestGCSkipsPassesThatCollectNothing: keys overwritten within the
// retention window. The first pass scans the range and collects nothing
// (every old version's successor is in the window); the next is skipped
// without a GC command; once the window has passed the overwrites, a
// pass collects the old versions as before.
func TestGCSkipsPassesThatCollectNothing(t *testing.T) {
	const retention = 3 * time.Second
	// The loop is off: the test runs the passes itself.
	tn := startNode(t, "", Config{GC: GCOptions{Retention: retention, Interval: time.Millisecond, Disable: true}})
	ctx := ctxT(t)
	const nkeys = 20
	start := time.Now()
	for round := 0; round < 2; round++ {
		for i := 0; i < nkeys; i++ {
			put(t, tn, fmt.Sprintf("k%02d", i), fmt.Sprintf("v%d", round))
		}
	}
	if time.Since(start) > retention/2 {
		t.Skipf("writes took %v: too slow to stay within the window", time.Since(start))
	}
	if got := tn.n.gcPass(ctx); got != 0 {
		t.Fatalf("first pass collected %d versions, want 0", got)
	}
	commands := testutilCounter(t, tn, "shale_gc_commands_total")
	if commands < 1 {
		t.Fatalf("first pass proposed %v GC commands, want at least 1", commands)
	}
	if got := tn.n.gcPass(ctx); got != 0 {
		t.Fatalf("second pass collected %d versions, want 0", got)
	}
	if time.Since(start) >= retention/2 {
		t.Skipf("the passes took until %v after the writes: the window may have passed them", time.Since(start))
	}
	if n := testutilCounter(t, tn, "shale_gc_passes_skipped_total"); n != 1 {
		t.Fatalf("shale_gc_passes_skipped_total = %v after the second pass, want 1", n)
	}
	if n := testutilCounter(t, tn, "shale_gc_commands_total"); n != commands {
		t.Fatalf("the skipped pass proposed GC commands: %v, was %v", n, commands)
	}
	// Once the window has passed the overwrites, the old versions go.
	collected := 0
	deadline := time.Now().Add(30 * time.Second)
	for collected < nkeys && time.Now().Before(deadline) {
		collected += tn.n.gcPass(ctx)
		time.Sleep(50 * time.Millisecond) // the next pass's target moves with the clock
	}
	if collected != nkeys {
		t.Fatalf("collected %d versions once the window passed, want %d", collected, nkeys)
	}
	// The keys hold their newest values.
	for i := 0; i < nkeys; i++ {
		if v, ok := get(t, tn, fmt.Sprintf("k%02d", i)); !ok || v != "v1" {
			t.Fatalf("k%02d = %q, %v after GC", i, v, ok)
		}
	}
}
