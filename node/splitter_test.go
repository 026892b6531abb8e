package node

import (
	"fmt"
	"testing"
)

// window is a led range's load window with a full sample.
func window(id uint64, qps float64) rangeWindow {
	w := rangeWindow{id: id, qps: qps}
	for i := 0; i < loadSampleSize; i++ {
		w.sample = append(w.sample, []byte(fmt.Sprintf("k%03d", i)))
	}
	return w
}

// settledOn is a memory in which the given ranges were settled.
func settledOn(ids ...uint64) splitMemory {
	m := splitMemory{settled: map[uint64]bool{}, hot: map[uint64]int{}}
	for _, id := range ids {
		m.settled[id] = true
	}
	return m
}

// passes runs hotRanges over the same windows for n passes in a row and
// returns the last pass's verdicts.
func passes(n int, prev splitMemory, led []rangeWindow, splitQPS float64) ([]bool, splitMemory) {
	var hot []bool
	for i := 0; i < n; i++ {
		hot, prev = hotRanges(prev, led, splitQPS)
	}
	return hot, prev
}

// Ranges just split or just led here, with their partial windows near zero
// QPS, do not lower the fair share: counted, they made every settled range
// of a uniform load look hot, and each split made another such range.
func TestHotRangesFreshRangesDoNotLowerTheFairShare(t *testing.T) {
	led := []rangeWindow{window(1, 100), window(2, 100), window(3, 100),
		window(4, 0), window(5, 0), window(6, 1), window(7, 0)}
	hot, next := passes(3, settledOn(1, 2, 3), led[:3], 20)
	for i, h := range hot {
		if h {
			t.Fatalf("range %d of a uniform load is hot", led[i].id)
		}
	}
	// Ranges 4-7 appear (split off, or their leadership moved here).
	hot, next = hotRanges(next, led, 20)
	for i, h := range hot {
		if h {
			t.Fatalf("range %d hot at the pass where idle new ranges appeared", led[i].id)
		}
	}
	for id := uint64(1); id <= 7; id++ {
		if !next.settled[id] {
			t.Fatalf("range %d, led at this pass, is not settled for the next", id)
		}
	}
	if len(next.hot) != 0 {
		t.Fatalf("hot counts %v after a uniform load", next.hot)
	}
}

// A range hotter than its fair share splits only once it has been so for
// loadSplitWindows settled windows in a row; a cooler window starts the
// count again.
func TestHotRangesWantTwoHotWindowsInARow(t *testing.T) {
	led := []rangeWindow{window(1, 1000), window(2, 100), window(3, 100)}
	prev := settledOn(1, 2, 3)
	for pass := 1; pass <= loadSplitWindows; pass++ {
		hot, next := hotRanges(prev, led, 20)
		if want := pass >= loadSplitWindows; hot[0] != want || hot[1] || hot[2] {
			t.Fatalf("pass %d: hot = %v; want [%v false false]", pass, hot, want)
		}
		prev = next
	}
	cool := []rangeWindow{window(1, 100), window(2, 100), window(3, 100)}
	_, prev = hotRanges(prev, cool, 20)
	if prev.hot[1] != 0 {
		t.Fatalf("a window at the fair share left range 1 counted %d hot windows", prev.hot[1])
	}
	if hot, _ := hotRanges(prev, led, 20); hot[0] {
		t.Fatal("range 1 hot again after one window: the count did not restart")
	}
}

// A range is not judged on a window this node did not lead it for the
// whole of (it was not settled), however busy.
func TestHotRangesJudgeSettledRangesOnly(t *testing.T) {
	led := []rangeWindow{window(1, 5000), window(2, 10)}
	hot, next := hotRanges(splitMemory{}, led, 20)
	if hot[0] || len(next.hot) != 0 {
		t.Fatalf("an unsettled range counted hot: %v %v", hot, next.hot)
	}
	// Range 1 settled from here: hot after loadSplitWindows more passes.
	if hot, _ := passes(loadSplitWindows, next, led, 20); !hot[0] {
		t.Fatal("a settled range at 5000 qps, 500 times its neighbour, is not hot")
	}
}

// A node leading one settled range splits it on the threshold alone; a
// short sample, or load splits turned off, never splits.
func TestHotRangesThresholdAndSample(t *testing.T) {
	one := []rangeWindow{window(1, 30)}
	if hot, _ := passes(loadSplitWindows, settledOn(1), one, 20); !hot[0] {
		t.Fatal("the only led range, over --split-qps, is not hot")
	}
	if hot, _ := passes(loadSplitWindows, settledOn(1), one, 40); hot[0] {
		t.Fatal("a range under --split-qps is hot")
	}
	if hot, _ := passes(loadSplitWindows, settledOn(1), one, -1); hot[0] {
		t.Fatal("a range is hot with load splits off")
	}
	short := []rangeWindow{window(1, 1000)}
	short[0].sample = short[0].sample[:7]
	if hot, _ := passes(loadSplitWindows, settledOn(1), short, 20); hot[0] {
		t.Fatal("a range with 7 sampled keys is hot: its median divides nothing")
	}
}
