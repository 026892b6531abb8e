package hlc

import (
	"errors"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

const testMaxOffset = 100 * time.Millisecond

func newTestClock(start int64) (*Clock, *manualClock) {
	m := &manualClock{now: start}
	return NewClock(m, testMaxOffset), m
}

func TestNowFollowsThePhysicalClockAndCountsWhenItStalls(t *testing.T) {
	c, m := newTestClock(1000)
	if got := c.Now(); got != (Timestamp{WallTime: 1000}) {
		t.Fatalf("first Now = %s, want 1000,0", got)
	}
	if got := c.Now(); got != (Timestamp{WallTime: 1000, Logical: 1}) {
		t.Fatalf("Now on a stalled clock = %s, want 1000,1", got)
	}
	m.Set(900) // a backwards step (NTP)
	if got := c.Now(); got != (Timestamp{WallTime: 1000, Logical: 2}) {
		t.Fatalf("Now after a backwards step = %s, want 1000,2", got)
	}
	m.Set(2000)
	if got := c.Now(); got != (Timestamp{WallTime: 2000}) {
		t.Fatalf("Now after the clock moved on = %s, want 2000,0", got)
	}
	if c.Last() != (Timestamp{WallTime: 2000}) {
		t.Fatalf("Last = %s, want 2000,0", c.Last())
	}
}

func TestNowMovesTheWallTimeAtTheLogicalLimit(t *testing.T) {
	c, _ := newTestClock(1000)
	if err := c.Update(Timestamp{WallTime: 1000, Logical: math.MaxInt32}); err != nil {
		t.Fatal(err)
	}
	if got := c.Now(); got != (Timestamp{WallTime: 1001}) {
		t.Fatalf("Now past the logical limit = %s, want 1001,0", got)
	}
}

func TestUpdateWithinTheOffsetMovesTheClock(t *testing.T) {
	c, _ := newTestClock(1000)
	remote := Timestamp{WallTime: 1000 + int64(testMaxOffset), Logical: 4}
	if err := c.Update(remote); err != nil {
		t.Fatalf("Update at exactly the maximum offset: %v", err)
	}
	if got := c.Now(); !remote.Less(got) {
		t.Fatalf("Now = %s, not above the accepted %s", got, remote)
	}
	// An older reading changes nothing.
	before := c.Last()
	if err := c.Update(Timestamp{WallTime: 5}); err != nil || c.Last() != before {
		t.Fatalf("Update with an old reading: %v, Last %s -> %s", err, before, c.Last())
	}
}

func TestUpdateRefusesAReadingBeyondTheOffset(t *testing.T) {
	c, m := newTestClock(1000)
	c.Now()
	before := c.Last()
	remote := Timestamp{WallTime: 1000 + int64(testMaxOffset) + 1}
	err := c.Update(remote)
	var oe *OffsetError
	if !errors.As(err, &oe) || !errors.Is(err, ErrClockOffset) {
		t.Fatalf("Update(%s) = %v, want an *OffsetError", remote, err)
	}
	if oe.Remote != remote || oe.Physical != 1000 || oe.MaxOffset != testMaxOffset || oe.Offset() != testMaxOffset+1 {
		t.Fatalf("OffsetError = %+v", oe)
	}
	if c.Last() != before {
		t.Fatalf("a refused reading moved the clock: %s -> %s", before, c.Last())
	}
	// Once the local clock catches up, the same reading is accepted.
	m.Advance(time.Nanosecond)
	if err := c.Update(remote); err != nil {
		t.Fatalf("Update after catching up: %v", err)
	}
}

func TestUpdateRefusesMalformedReadings(t *testing.T) {
	c, _ := newTestClock(1000)
	for _, bad := range []Timestamp{{WallTime: -1}, {WallTime: 1, Logical: -1}, MaxTimestamp} {
		if err := c.Update(bad); !errors.Is(err, ErrMalformed) {
			t.Errorf("Update(%s) = %v, want ErrMalformed", bad, err)
		}
	}
	if !c.Last().IsZero() {
		t.Fatalf("a refused reading moved the clock to %s", c.Last())
	}
}

func TestNegativePhysicalTimeReadsAsZero(t *testing.T) {
	c, _ := newTestClock(-50)
	if got := c.Now(); !got.Valid() {
		t.Fatalf("Now with a physical clock before 1970 = %s", got)
	}
}

func TestNewClockRejectsBadArguments(t *testing.T) {
	for name, f := range map[string]func(){
		"nil clock":   func() { NewClock(nil, time.Second) },
		"zero offset": func() { NewClock(SystemClock{}, 0) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: NewClock did not panic", name)
				}
			}()
			f()
		}()
	}
}

// TestClockProperties drives a clock with random steps of its physical
// clock (forwards and backwards), Now calls and remote readings, and checks
// it against the rules: Now is above everything issued or accepted, never
// below the physical clock; a reading is refused exactly when it is more
// than the maximum offset ahead, and a refusal changes nothing.
func TestClockProperties(t *testing.T) {
	for seed := uint64(0); seed < 50; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		start := r.Int64N(1 << 50)
		c, m := newTestClock(start)
		phys := start
		var high Timestamp // the highest issued or accepted
		for op := 0; op < 2000; op++ {
			switch r.IntN(4) {
			case 0:
				phys += r.Int64N(int64(testMaxOffset)) - int64(testMaxOffset)/3
				m.Set(phys)
			case 1, 2:
				ts := c.Now()
				if !high.Less(ts) {
					t.Fatalf("seed %d op %d: Now %s not above %s", seed, op, ts, high)
				}
				if ts.WallTime < max(phys, 0) {
					t.Fatalf("seed %d op %d: Now %s below the physical clock %d", seed, op, ts, phys)
				}
				high = ts
			case 3:
				remote := Timestamp{
					WallTime: max(phys+r.Int64N(3*int64(testMaxOffset))-int64(testMaxOffset), 0),
					Logical:  r.Int32N(3),
				}
				err := c.Update(remote)
				beyond := remote.WallTime-max(phys, 0) > int64(testMaxOffset)
				switch {
				case beyond && !errors.Is(err, ErrClockOffset):
					t.Fatalf("seed %d op %d: Update(%s) at %d = %v, want a refusal", seed, op, remote, phys, err)
				case !beyond && err != nil:
					t.Fatalf("seed %d op %d: Update(%s) at %d = %v", seed, op, remote, phys, err)
				case !beyond:
					high = high.Forward(remote)
				}
				if c.Last() != high {
					t.Fatalf("seed %d op %d: Last %s, want %s", seed, op, c.Last(), high)
				}
			}
		}
	}
}

// TestConcurrentNowIsUniqueAndIncreasing: goroutines calling Now and
// Update at once never see a timestamp twice, and each sees its own
// increasing.
func TestConcurrentNowIsUniqueAndIncreasing(t *testing.T) {
	c := NewClock(SystemClock{}, time.Second)
	const goroutines, each = 8, 5000
	results := make([][]Timestamp, goroutines)
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				if i%100 == 0 {
					if err := c.Update(c.Last().Add(time.Microsecond)); err != nil {
						t.Error(err)
						return
					}
				}
				results[g] = append(results[g], c.Now())
			}
		}(g)
	}
	wg.Wait()
	seen := make(map[Timestamp]bool, goroutines*each)
	for g, rs := range results {
		for i, ts := range rs {
			if seen[ts] {
				t.Fatalf("timestamp %s issued twice", ts)
			}
			seen[ts] = true
			if i > 0 && !rs[i-1].Less(ts) {
				t.Fatalf("goroutine %d: %s after %s", g, ts, rs[i-1])
			}
		}
	}
}

func TestNowNIssuesAConsecutiveRange(t *testing.T) {
	c, _ := newTestClock(1000)
	before := c.Now()
	first, last := c.NowN(3)
	if !before.Less(first) || first.Next().Next() != last {
		t.Fatalf("NowN(3) after %s = [%s, %s]", before, first, last)
	}
	if got := c.Now(); !last.Less(got) {
		t.Fatalf("Now after NowN = %s, not above %s", got, last)
	}
	if f, l := c.NowN(1); f != l {
		t.Fatalf("NowN(1) = [%s, %s]", f, l)
	}
}
