package node

import (
	"context"
	"time"

	"google.golang.org/grpc/status"
)

// exportPaceSlack is how far ahead of its rate an export may run before
// it waits: small enough that a paced export never bursts for long, large
// enough that it sleeps a few times per second rather than per page.
const exportPaceSlack = 20 * time.Millisecond

// exportPacer holds an export's reads to a rate (ExportRangeRequest
// bytes_per_second): before each page it waits until the bytes read so far
// are within the rate since the export began. A zero rate never waits.
// Used by one export's goroutine only.
type exportPacer struct {
	rate  float64 // bytes per second; 0: no limit
	start time.Time
	read  uint64
}

func newExportPacer(bytesPerSecond uint64) *exportPacer {
	return &exportPacer{rate: float64(bytesPerSecond), start: time.Now()}
}

// add counts n bytes read.
func (p *exportPacer) add(n int) { p.read += uint64(n) }

// wait blocks until the bytes read are within the rate, or ctx ends (its
// error as a gRPC status).
func (p *exportPacer) wait(ctx context.Context) error {
	if p == nil || p.rate <= 0 {
		return nil
	}
	ahead := time.Duration(float64(p.read)/p.rate*float64(time.Second)) - time.Since(p.start)
	if ahead < exportPaceSlack {
		return nil
	}
	t := time.NewTimer(ahead)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	case <-t.C:
		return nil
	}
}
