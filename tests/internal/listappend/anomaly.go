package listappend

import (
	"fmt"
	"sort"
	"strings"
)

// AnomalyType names a class of anomaly, with Elle's names.
type AnomalyType string

// Cycle classes. A cycle is classified by the edges it uses: rw edges
// first (one: G-single, more: G2-item), then wr (G1c), else G0. A cycle
// that also needs a real-time edge takes the -realtime suffix.
const (
	// G0 (dirty write): a cycle of ww edges; two transactions' writes
	// interleaved on two keys in opposite orders.
	G0 AnomalyType = "G0"
	// G1c (circular information flow): a cycle of ww and wr edges.
	G1c AnomalyType = "G1c"
	// GSingle (read skew): a cycle with exactly one rw edge.
	GSingle AnomalyType = "G-single"
	// G2Item (write skew and kin): a cycle with two or more rw edges. In
	// list-append every anti-dependency is on an item (there are no
	// predicate reads), so G2 and G2-item coincide here.
	G2Item AnomalyType = "G2-item"
)

// Non-cycle classes.
const (
	// G1a (aborted read): a read observed the append of a transaction
	// that failed.
	G1a AnomalyType = "G1a"
	// G1b (intermediate read): a read ended in an element that its
	// transaction followed with another append to the same key, so the
	// reader saw a state that transaction never committed.
	G1b AnomalyType = "G1b"
	// IncompatibleOrder: two reads of one key of which neither is a prefix
	// of the other; no single list explains both.
	IncompatibleOrder AnomalyType = "incompatible-order"
	// DuplicateElements: a read holds one element twice; an append took
	// effect twice.
	DuplicateElements AnomalyType = "duplicate-elements"
	// GarbageRead: a read holds an element no transaction appended.
	GarbageRead AnomalyType = "garbage-read"
	// Internal: a transaction's read disagrees with its own earlier reads
	// and appends of that key.
	Internal AnomalyType = "internal"
	// DuplicateAppend: two appends of one element to one key in the
	// history. A workload bug: the checker's inference assumes unique
	// elements, so the rest of the report is suspect.
	DuplicateAppend AnomalyType = "duplicate-append"
)

// realtime returns the class of a cycle that needs real-time edges.
func realtime(t AnomalyType) AnomalyType { return t + "-realtime" }

// Anomaly is one finding.
type Anomaly struct {
	Type AnomalyType
	// Key is the key involved, for anomalies about one key.
	Key string
	// Txns are the indexes in the history of the transactions involved;
	// for a cycle, in cycle order.
	Txns []int
	// Steps explains the finding, one sentence per edge of a cycle or per
	// observation otherwise.
	Steps []string
}

// Result is the verdict on a history.
type Result struct {
	// Committed counts the transactions in the dependency graph (ok ones
	// and indeterminate ones whose appends were observed).
	Committed int
	// Edges counts the graph's edges by type.
	Edges map[EdgeType]int
	// Anomalies are the findings, sorted by type.
	Anomalies []Anomaly
	// Truncated reports that a cycle search hit its budget: an SCC was
	// reported with fewer classes than it may hold (never with none).
	Truncated bool

	history []Txn
}

// Valid reports whether no anomaly was found.
func (r Result) Valid() bool { return len(r.Anomalies) == 0 }

// Types returns the distinct anomaly types found, sorted.
func (r Result) Types() []AnomalyType {
	seen := map[AnomalyType]bool{}
	var out []AnomalyType
	for _, a := range r.Anomalies {
		if !seen[a.Type] {
			seen[a.Type] = true
			out = append(out, a.Type)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Has reports whether an anomaly of type t was found.
func (r Result) Has(t AnomalyType) bool {
	for _, a := range r.Anomalies {
		if a.Type == t {
			return true
		}
	}
	return false
}

// Keys returns the keys the anomalies are about, sorted: each anomaly's
// key and the keys its transactions appended to (a cycle names no key of
// its own). A report adds their final states: an element missing from a
// key's final list was lost, one present was only hidden from some reads.
func (r Result) Keys() []string {
	seen := map[string]bool{}
	for _, a := range r.Anomalies {
		if a.Key != "" {
			seen[a.Key] = true
		}
		for _, i := range a.Txns {
			if i < 0 || i >= len(r.history) {
				continue
			}
			for _, m := range r.history[i].Ops {
				if m.Kind == Append {
					seen[m.Key] = true
				}
			}
		}
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// String is the report: a summary line, then each anomaly with its steps
// and the transactions it involves.
func (r Result) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d committed transactions, edges %v: ", r.Committed, r.Edges)
	if r.Valid() {
		b.WriteString("no anomaly")
		return b.String()
	}
	fmt.Fprintf(&b, "%d anomalies %v", len(r.Anomalies), r.Types())
	if r.Truncated {
		b.WriteString(" (cycle search budget reached; more classes may hide in the same components)")
	}
	for _, a := range r.Anomalies {
		b.WriteString("\n")
		b.WriteString(a.format(r.history))
	}
	return b.String()
}

func (a Anomaly) format(h []Txn) string {
	var b strings.Builder
	b.WriteString(string(a.Type))
	if a.Key != "" {
		fmt.Fprintf(&b, " on key %s", a.Key)
	}
	b.WriteString(":")
	for _, s := range a.Steps {
		b.WriteString("\n    ")
		b.WriteString(s)
	}
	seen := map[int]bool{}
	for _, i := range a.Txns {
		if seen[i] || i < 0 || i >= len(h) {
			continue
		}
		seen[i] = true
		b.WriteString("\n      ")
		b.WriteString(describe(h, i))
	}
	return b.String()
}
