package node

import (
	"cmp"
	"container/heap"
	"slices"
)

// spaceSaving is the Space-Saving top-K sketch (Metwally, Agrawal, El
// Abbadi, 2005): it keeps at most cap keys with counts; a key not kept
// replaces the one with the smallest count and inherits that count as its
// possible overestimate. Every key whose true count exceeds N/cap (N the
// keys offered) is kept, and a kept key's count overstates its true count
// by at most its err. Memory is bounded by cap keys. Not safe for
// concurrent use: the hot tracker holds its lock around it.
type spaceSaving struct {
	cap   int
	index map[string]int // key -> position in items
	items ssHeap         // a min-heap by count
}

// ssItem is one kept key.
type ssItem struct {
	key     string
	count   uint64 // offered count, possibly overstated by err
	err     uint64
	rangeID uint64 // the range that last served the key
}

func newSpaceSaving(capacity int) *spaceSaving {
	index := make(map[string]int, capacity)
	return &spaceSaving{cap: capacity, index: index, items: ssHeap{index: index}}
}

// offer counts one occurrence of key, served by rangeID.
func (s *spaceSaving) offer(key []byte, rangeID uint64) {
	if i, ok := s.index[string(key)]; ok {
		s.items.s[i].count++
		s.items.s[i].rangeID = rangeID
		heap.Fix(&s.items, i)
		return
	}
	if len(s.items.s) < s.cap {
		heap.Push(&s.items, ssItem{key: string(key), count: 1, rangeID: rangeID})
		return
	}
	// Replace the smallest: the newcomer may have been seen up to min
	// times before, uncounted.
	min := s.items.s[0]
	delete(s.index, min.key)
	s.items.s[0] = ssItem{key: string(key), count: min.count + 1, err: min.count, rangeID: rangeID}
	s.index[string(key)] = 0
	heap.Fix(&s.items, 0)
}

// top returns the kept keys, highest count first (a copy).
func (s *spaceSaving) top() []ssItem {
	out := append([]ssItem(nil), s.items.s...)
	slices.SortFunc(out, func(a, b ssItem) int { return cmp.Compare(b.count, a.count) })
	return out
}

// ssHeap is a min-heap of items by count that keeps index current.
type ssHeap struct {
	s     []ssItem
	index map[string]int
}

func (h *ssHeap) Len() int           { return len(h.s) }
func (h *ssHeap) Less(i, j int) bool { return h.s[i].count < h.s[j].count }
func (h *ssHeap) Swap(i, j int) {
	h.s[i], h.s[j] = h.s[j], h.s[i]
	h.index[h.s[i].key] = i
	h.index[h.s[j].key] = j
}
func (h *ssHeap) Push(x any) {
	it := x.(ssItem)
	h.index[it.key] = len(h.s)
	h.s = append(h.s, it)
}
func (h *ssHeap) Pop() any {
	it := h.s[len(h.s)-1]
	h.s = h.s[:len(h.s)-1]
	delete(h.index, it.key)
	return it
}
