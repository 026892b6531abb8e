package node

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestSpaceSavingFindsHeavyKeys: keys over N/cap are kept with counts
// that overstate by at most err, and memory stays at cap keys, under a
// stream of many distinct cold keys.
func TestSpaceSavingFindsHeavyKeys(t *testing.T) {
	s := newSpaceSaving(16)
	r := rand.New(rand.NewPCG(1, 2))
	truth := map[string]uint64{}
	for i := 0; i < 20000; i++ {
		var k string
		switch x := r.IntN(100); {
		case x < 30:
			k = "hot-a"
		case x < 40:
			k = "hot-b"
		default:
			k = fmt.Sprintf("cold-%d", r.IntN(5000))
		}
		truth[k]++
		s.offer([]byte(k), 7)
	}
	top := s.top()
	if len(top) != 16 || len(s.index) != 16 {
		t.Fatalf("kept %d keys (index %d), want the capacity 16", len(top), len(s.index))
	}
	if top[0].key != "hot-a" || top[1].key != "hot-b" {
		t.Fatalf("top two = %q, %q; want hot-a, hot-b", top[0].key, top[1].key)
	}
	for _, it := range top {
		if it.count < truth[it.key] || it.count-it.err > truth[it.key] {
			t.Fatalf("%s: count %d err %d, true count %d: outside [count-err, count]", it.key, it.count, it.err, truth[it.key])
		}
		if it.rangeID != 7 {
			t.Fatalf("%s: range %d, want 7", it.key, it.rangeID)
		}
	}
	for k, i := range s.index {
		if s.items.s[i].key != k {
			t.Fatalf("index of %q points at %q", k, s.items.s[i].key)
		}
	}
}
