package transport

import (
	"context"
	"math/rand/v2"
	"time"
)

// backoff yields jittered, doubling delays between min and max. Jitter
// keeps the peers of a restarted node from re-dialling it in lockstep.
type backoff struct {
	min, max time.Duration
	attempts int
}

// next returns the delay before the next attempt: uniformly random in
// [d/2, d) where d doubles from min with every attempt, up to max.
func (b *backoff) next() time.Duration {
	d := b.min
	for i := 0; i < b.attempts && d < b.max; i++ {
		d *= 2
	}
	d = min(d, b.max)
	b.attempts++
	half := d / 2
	return half + time.Duration(rand.Int64N(int64(d-half)+1))
}

func (b *backoff) reset() { b.attempts = 0 }

// sleepCtx sleeps for d or until ctx is done; it reports whether it slept
// the whole time.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
