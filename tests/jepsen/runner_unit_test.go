package jepsen

import "testing"

func TestOverlapTime(t *testing.T) {
	spans := []span{{Start: 10, End: 20}, {Start: 30, End: 40}}
	for _, c := range []struct {
		call, ret, want int64
	}{
		{0, 5, 0},    // before every fault
		{0, 15, 5},   // into the first
		{12, 18, 6},  // inside it
		{15, 35, 10}, // across the gap: 5 + 5
		{0, 50, 20},  // around both
		{20, 30, 0},  // exactly the gap
	} {
		if got := overlapTime(op{Call: c.call, Return: c.ret}, spans); got != c.want {
			t.Errorf("overlapTime([%d, %d]) = %d, want %d", c.call, c.ret, got, c.want)
		}
	}
}
