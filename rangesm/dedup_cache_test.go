package rangesm

import (
	"math/rand/v2"
	"testing"
)

// TestDedupClientAgreesWithASet records random seqs (mostly rising, some
// out of order, some far ahead) and checks after each that whatever the
// cache claims to know is true: it never calls a recorded seq new, nor a
// new seq recorded.
func TestDedupClientAgreesWithASet(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for _, start := range []uint64{0, 5, 1 << 40} {
		c := &dedupClient{}
		recorded := map[uint64]bool{}
		if start > 0 {
			// As loaded from an engine whose last record is start.
			c.max, c.exactFrom = start, start
			c.record(start)
			recorded[start] = true
		} else {
			c.exactFrom = 1
		}
		next := start + 1
		known := 0
		for i := 0; i < 20000; i++ {
			var s uint64
			switch rng.IntN(10) {
			case 0:
				s = next + uint64(rng.IntN(600)) // a jump, sometimes past the window
			case 1, 2:
				s = next - uint64(rng.IntN(int(min(next, 300)))) // out of order
			default:
				s = next
			}
			next = max(next, s+1)
			if !recorded[s] {
				recorded[s] = true
				c.record(s)
			}
			for q := next - min(next, 400); q < next+3; q++ {
				has, ok := c.recorded(q)
				if !ok {
					continue
				}
				known++
				if has != recorded[q] {
					t.Fatalf("start %d: seq %d: cache says recorded=%v, truth %v (max %d, exactFrom %d)",
						start, q, has, recorded[q], c.max, c.exactFrom)
				}
			}
		}
		if known == 0 {
			t.Fatal("the cache never knew anything")
		}
	}
}
