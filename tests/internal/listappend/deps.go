package listappend

import (
	"fmt"
	"sort"
)

// addKeyEdges adds the ww, wr and rw edges one key proves between
// committed transactions (committed[i]: ok, or indeterminate with an
// observed append). Elements no read observed, appended by committed
// transactions, follow the last element of the order (a read holding the
// last one would otherwise hold them); their order among themselves is
// unknown, so they get edges from the order's end only.
func (s *keyState) addKeyEdges(h []Txn, committed []bool, g *graph) {
	w := func(v int) int {
		if t := s.writer(v); t >= 0 && committed[t] {
			return t
		}
		return -1
	}
	key := s.key
	// ww: consecutive versions.
	for i := 0; i+1 < len(s.order); i++ {
		a, b := s.order[i], s.order[i+1]
		if wa, wb := w(a), w(b); wa >= 0 && wb >= 0 {
			g.add(wa, wb, WW, func() string {
				return fmt.Sprintf("%s's order puts %d (T%d) right before %d (T%d)", key, a, wa, b, wb)
			})
		}
	}
	// Unobserved appends of ok transactions come after the order's end.
	var unseen []int
	for v, refs := range s.appends {
		if _, ok := s.pos[v]; !ok && committed[refs[0].txn] {
			unseen = append(unseen, v)
		}
	}
	sort.Ints(unseen)
	if n := len(s.order); n > 0 {
		last := s.order[n-1]
		if wl := w(last); wl >= 0 {
			for _, u := range unseen {
				wu := s.writer(u)
				g.add(wl, wu, WW, func() string {
					return fmt.Sprintf("T%d's append of %d to %s is in no read, so it follows the last element read, %d (T%d)", wu, u, key, last, wl)
				})
			}
		}
	}
	for i, r := range s.reads {
		l := h[r.txn].Ops[r.op].List
		// wr: the reader saw the writer of its last element.
		if len(l) > 0 {
			v := l[len(l)-1]
			if wv := w(v); wv >= 0 {
				g.add(wv, r.txn, WR, func() string {
					return fmt.Sprintf("T%d read %s = %s, ending in T%d's append of %d", r.txn, key, formatList(l), wv, v)
				})
			}
		}
		if !s.compatible[i] {
			continue // its place in the order is unknown
		}
		// rw: the reader missed the next version. Versions are per
		// transaction: the appends of the last element's writer right
		// after it are one version with it (reading between them is G1b,
		// reported on its own), so the next version starts after them.
		nx, lw := len(l), -1
		if len(l) > 0 {
			lw = s.writer(l[len(l)-1])
			for nx < len(s.order) && s.writer(s.order[nx]) == lw {
				nx++
			}
		}
		if nx < len(s.order) {
			next := s.order[nx]
			if wn := w(next); wn >= 0 {
				g.add(r.txn, wn, RW, func() string {
					return fmt.Sprintf("T%d read %s = %s, missing %d, which T%d appended next", r.txn, key, formatList(l), next, wn)
				})
			}
			continue
		}
		for _, u := range unseen {
			wu := s.writer(u)
			if wu == lw {
				continue // the same version as the read's last element
			}
			g.add(r.txn, wu, RW, func() string {
				return fmt.Sprintf("T%d read %s = %s, missing %d, which T%d appended after it (no read holds it)", r.txn, key, formatList(l), u, wu)
			})
		}
	}
}
