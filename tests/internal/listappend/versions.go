package listappend

import (
	"fmt"
	"sort"

	"github.com/shaledb/shale/tests/internal/txnkv"
)

// opRef points at micro-op op of transaction txn.
type opRef struct{ txn, op int }

// keyState is what the history says about one key.
type keyState struct {
	key string
	// appends maps each element to the appends of it (more than one is a
	// DuplicateAppend).
	appends map[int][]opRef
	// reads are the reads of the key in ok transactions.
	reads []opRef
	// order is the inferred version order: the longest read, each element
	// once. pos maps an element to its index in order.
	order []int
	pos   map[int]int
	// compatible[i] reports whether reads[i] is a prefix of order.
	compatible []bool
}

// indexKeys gathers every key's appends (from all transactions) and reads
// (from ok ones), in a stable key order.
func indexKeys(h []Txn) []*keyState {
	byKey := map[string]*keyState{}
	get := func(k string) *keyState {
		s := byKey[k]
		if s == nil {
			s = &keyState{key: k, appends: map[int][]opRef{}, pos: map[int]int{}}
			byKey[k] = s
		}
		return s
	}
	for i, t := range h {
		for j, m := range t.Ops {
			switch {
			case m.Kind == Append:
				s := get(m.Key)
				s.appends[m.Value] = append(s.appends[m.Value], opRef{i, j})
			case m.Kind == Read && t.Outcome == txnkv.OK:
				s := get(m.Key)
				s.reads = append(s.reads, opRef{i, j})
			}
		}
	}
	keys := make([]*keyState, 0, len(byKey))
	for _, s := range byKey {
		keys = append(keys, s)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].key < keys[j].key })
	return keys
}

// writer returns the transaction that appended v to the key, or -1 when
// none did.
func (s *keyState) writer(v int) int {
	if refs := s.appends[v]; len(refs) > 0 {
		return refs[0].txn
	}
	return -1
}

// inferOrder sets the key's version order from its longest read and
// reports what contradicts it: reads that are not prefixes of it
// (IncompatibleOrder, the first such read per key) and reads holding an
// element twice (DuplicateElements).
func (s *keyState) inferOrder(h []Txn) []Anomaly {
	var out []Anomaly
	longest := -1
	for i, r := range s.reads {
		l := h[r.txn].Ops[r.op].List
		if longest < 0 || len(l) > len(h[s.reads[longest].txn].Ops[s.reads[longest].op].List) {
			longest = i
		}
		if d, ok := duplicate(l); ok {
			out = append(out, Anomaly{Type: DuplicateElements, Key: s.key, Txns: []int{r.txn},
				Steps: []string{fmt.Sprintf("T%d read %s = %v, holding %d twice", r.txn, s.key, l, d)}})
		}
	}
	if longest < 0 {
		return out
	}
	lr := s.reads[longest]
	for _, v := range h[lr.txn].Ops[lr.op].List {
		if _, seen := s.pos[v]; !seen {
			s.pos[v] = len(s.order)
			s.order = append(s.order, v)
		}
	}
	s.compatible = make([]bool, len(s.reads))
	reported := false
	for i, r := range s.reads {
		l := h[r.txn].Ops[r.op].List
		s.compatible[i] = s.isPrefix(l)
		if !s.compatible[i] && !reported {
			reported = true
			out = append(out, Anomaly{Type: IncompatibleOrder, Key: s.key, Txns: []int{r.txn, lr.txn},
				Steps: []string{fmt.Sprintf("T%d read %s = %v and T%d read %v: neither is a prefix of the other",
					r.txn, s.key, l, lr.txn, h[lr.txn].Ops[lr.op].List)}})
		}
	}
	return out
}

// isPrefix reports whether l is a prefix of the key's order (a read with a
// duplicate element never is).
func (s *keyState) isPrefix(l []int) bool {
	if len(l) > len(s.order) {
		return false
	}
	for i, v := range l {
		if s.order[i] != v {
			return false
		}
	}
	return true
}

func duplicate(l []int) (int, bool) {
	seen := make(map[int]bool, len(l))
	for _, v := range l {
		if seen[v] {
			return v, true
		}
		seen[v] = true
	}
	return 0, false
}

// duplicateAppends reports elements appended more than once to the key.
func (s *keyState) duplicateAppends() []Anomaly {
	var out []Anomaly
	for v, refs := range s.appends {
		if len(refs) < 2 {
			continue
		}
		a := Anomaly{Type: DuplicateAppend, Key: s.key}
		for _, r := range refs {
			a.Txns = append(a.Txns, r.txn)
		}
		a.Steps = []string{fmt.Sprintf("%d appended to %s by %d micro-ops (transactions %v); elements must be unique", v, s.key, len(refs), a.Txns)}
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Txns[0] < out[j].Txns[0] })
	return out
}

// observe marks the transactions whose appends some ok read observed, and
// reports reads of elements nobody appended (GarbageRead) or a failed
// transaction appended (G1a).
func (s *keyState) observe(h []Txn, observed []bool) []Anomaly {
	var out []Anomaly
	for _, r := range s.reads {
		l := h[r.txn].Ops[r.op].List
		failed := map[int]bool{} // writers already reported for this read
		for _, v := range l {
			w := s.writer(v)
			switch {
			case w >= 0 && failed[w]:
			case w < 0:
				out = append(out, Anomaly{Type: GarbageRead, Key: s.key, Txns: []int{r.txn},
					Steps: []string{fmt.Sprintf("T%d read %s = %v, but no transaction appended %d", r.txn, s.key, l, v)}})
			case h[w].Outcome == txnkv.Fail:
				failed[w] = true
				out = append(out, Anomaly{Type: G1a, Key: s.key, Txns: []int{r.txn, w},
					Steps: []string{fmt.Sprintf("T%d read %s = %v, holding %d, which T%d appended and failed", r.txn, s.key, formatList(l), v, w)}})
			default:
				observed[w] = true
			}
		}
	}
	return out
}

// intermediateReads reports reads whose last element its writer followed
// with another append to the key (G1b).
func (s *keyState) intermediateReads(h []Txn) []Anomaly {
	var out []Anomaly
	for _, r := range s.reads {
		l := h[r.txn].Ops[r.op].List
		if len(l) == 0 {
			continue
		}
		v := l[len(l)-1]
		refs := s.appends[v]
		if len(refs) == 0 || refs[0].txn == r.txn {
			continue
		}
		w := refs[0]
		for _, m := range h[w.txn].Ops[w.op+1:] {
			if m.Kind == Append && m.Key == s.key {
				out = append(out, Anomaly{Type: G1b, Key: s.key, Txns: []int{r.txn, w.txn},
					Steps: []string{fmt.Sprintf("T%d read %s = %s, ending in %d, which T%d followed with its own append of %d",
						r.txn, s.key, formatList(l), v, w.txn, m.Value)}})
				break
			}
		}
	}
	return out
}
