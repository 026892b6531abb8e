package node

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A paced export takes at least its bytes over its rate.
func TestExportPacerHoldsTheRate(t *testing.T) {
	const rate = 1 << 20 // 1 MiB/s
	p := newExportPacer(rate)
	ctx := context.Background()
	start := time.Now()
	for range 8 { // eight 32 KiB pages: 256 KiB, 250 ms at the rate
		if err := p.wait(ctx); err != nil {
			t.Fatal(err)
		}
		p.add(32 << 10)
	}
	if err := p.wait(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := time.Since(start), 250*time.Millisecond-exportPaceSlack; got < want {
		t.Fatalf("256 KiB at 1 MiB/s took %v, want at least %v", got, want)
	}
}

// Rate 0 and a nil pacer never wait; a cancelled context ends a wait
// with its status.
func TestExportPacerUnlimitedAndCancelled(t *testing.T) {
	ctx := context.Background()
	p := newExportPacer(0)
	p.add(1 << 30)
	if err := p.wait(ctx); err != nil {
		t.Fatal(err)
	}
	var none *exportPacer
	if err := none.wait(ctx); err != nil {
		t.Fatal(err)
	}
	slow := newExportPacer(1) // one byte per second
	slow.add(1 << 20)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := slow.wait(cctx); status.Code(err) != codes.Canceled {
		t.Fatalf("wait on a cancelled context: %v, want Canceled", err)
	}
}
