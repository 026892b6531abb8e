package listappend

import (
	"slices"
	"strings"
	"testing"

	"github.com/shaledb/shale/tests/internal/txnkv"
)

// Hand-written histories, one planted anomaly each, so that a checker that
// accepts everything (or misclassifies) cannot pass.

func ap(k string, v int) MicroOp           { return MicroOp{Kind: Append, Key: k, Value: v} }
func rd(k string, l ...int) MicroOp        { return MicroOp{Kind: Read, Key: k, List: l} }
func okT(ops ...MicroOp) Txn               { return Txn{Outcome: txnkv.OK, Ops: ops, Invoke: 0, Complete: 100} }
func failT(ops ...MicroOp) Txn             { return Txn{Outcome: txnkv.Fail, Ops: ops, Invoke: 0, Complete: 100} }
func infoT(ops ...MicroOp) Txn             { return Txn{Outcome: txnkv.Info, Ops: ops, Invoke: 0} }
func at(t Txn, invoke, complete int64) Txn { t.Invoke, t.Complete = invoke, complete; return t }

func TestCheckPlanted(t *testing.T) {
	cases := []struct {
		name   string
		h      []Txn
		strict bool
		want   []AnomalyType // exactly these types
	}{
		{"G0: writes interleaved in opposite orders on two keys", []Txn{
			okT(ap("x", 1), ap("y", 1)),
			okT(ap("x", 2), ap("y", 2)),
			okT(rd("x", 1, 2), rd("y", 2, 1)),
		}, false, []AnomalyType{G0}},
		{"G1a: read of a failed append", []Txn{
			failT(ap("x", 1)),
			okT(rd("x", 1)),
		}, false, []AnomalyType{G1a}},
		{"G1b: read of an intermediate append", []Txn{
			okT(ap("x", 1), ap("x", 2)),
			okT(rd("x", 1)),
		}, false, []AnomalyType{G1b}},
		{"G1c: each reads the other's append", []Txn{
			okT(ap("x", 1), rd("y", 1)),
			okT(ap("y", 1), rd("x", 1)),
		}, false, []AnomalyType{G1c}},
		{"G-single: read skew", []Txn{
			okT(rd("x"), rd("y", 1)),
			okT(ap("x", 1), ap("y", 1)),
			okT(rd("x", 1)),
		}, false, []AnomalyType{GSingle}},
		{"G2-item: write skew", []Txn{
			okT(rd("x"), ap("y", 1)),
			okT(rd("y"), ap("x", 1)),
		}, false, []AnomalyType{G2Item}},
		{"incompatible orders", []Txn{
			okT(ap("x", 1)), okT(ap("x", 2)), okT(ap("x", 3)),
			okT(rd("x", 1, 2)),
			okT(rd("x", 1, 3)),
		}, false, []AnomalyType{IncompatibleOrder}},
		{"an append applied twice", []Txn{
			okT(ap("x", 1)),
			okT(rd("x", 1, 1)),
		}, false, []AnomalyType{DuplicateElements, IncompatibleOrder}},
		{"two appends of one element", []Txn{
			okT(ap("x", 1)),
			okT(ap("x", 1)),
		}, false, []AnomalyType{DuplicateAppend}},
		{"read of an element nobody appended", []Txn{
			okT(ap("x", 1)),
			okT(rd("x", 1, 9)),
		}, false, []AnomalyType{GarbageRead}},
		{"a transaction misses its own append", []Txn{
			okT(ap("x", 1)),
			okT(ap("x", 2), rd("x", 1)),
		}, false, []AnomalyType{Internal}},
		{"stale read: a completed append unseen later", []Txn{
			at(okT(ap("x", 1)), 0, 10),
			at(okT(rd("x")), 20, 30),
		}, true, []AnomalyType{realtime(GSingle)}},
		{"stale read is serializable", []Txn{
			at(okT(ap("x", 1)), 0, 10),
			at(okT(rd("x")), 20, 30),
		}, false, nil},
		{"G0 needing real time: a later write ordered first", []Txn{
			at(okT(ap("x", 1)), 0, 10),
			at(okT(ap("x", 2)), 20, 30),
			at(okT(rd("x", 2, 1)), 40, 50),
		}, true, []AnomalyType{realtime(G0)}},
		{"G1c needing real time: a read of a write invoked after it completed", []Txn{
			at(okT(rd("x", 1)), 0, 10),
			at(okT(ap("x", 1)), 20, 30),
		}, true, []AnomalyType{realtime(G1c)}},
		{"info: an observed indeterminate append is in a G0 cycle", []Txn{
			infoT(ap("x", 1), ap("y", 1)),
			okT(ap("x", 2), ap("y", 2)),
			okT(rd("x", 1, 2), rd("y", 2, 1)),
		}, false, []AnomalyType{G0}},
		{"info: an indeterminate append may be read", []Txn{
			infoT(ap("x", 1)),
			at(okT(rd("x", 1)), 200, 300),
		}, true, nil},
		{"info: an indeterminate append may never happen", []Txn{
			at(infoT(ap("x", 1)), 0, 0),
			at(okT(rd("x")), 200, 300),
			at(okT(ap("x", 2)), 400, 500),
			at(okT(rd("x", 2)), 600, 700),
		}, true, nil},
		{"info: an indeterminate append may take effect after a later read", []Txn{
			at(infoT(ap("x", 1)), 0, 0),
			at(okT(rd("x")), 200, 300),
			at(okT(rd("x", 1)), 400, 500),
		}, true, nil},
		{"info: reads of an indeterminate transaction are ignored", []Txn{
			okT(ap("x", 1)),
			infoT(rd("x", 7, 7), ap("y", 1)),
		}, true, nil},
		{"info: never precedes in real time", []Txn{
			at(infoT(ap("x", 1)), 0, 5),
			at(okT(ap("x", 2)), 20, 30),
			at(okT(rd("x", 2, 1)), 40, 50),
		}, true, nil},
		{"info: is preceded in real time", []Txn{
			at(okT(ap("x", 2)), 0, 10),
			at(infoT(ap("x", 1)), 20, 0),
			at(okT(rd("x", 1, 2)), 40, 50),
		}, true, []AnomalyType{realtime(G0)}},
		{"info: an observed indeterminate transaction committed all its appends", []Txn{
			at(infoT(ap("x", 1), ap("y", 1)), 0, 0),
			at(okT(rd("x", 1)), 200, 300),
			at(okT(rd("y")), 400, 500),
		}, true, []AnomalyType{realtime(GSingle)}},
		{"a failed append unseen is fine", []Txn{
			failT(ap("x", 1)),
			okT(ap("x", 2)),
			okT(rd("x", 2)),
		}, true, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := Check(tc.h, Options{Strict: tc.strict})
			if got := res.Types(); !slices.Equal(got, sorted(tc.want)) {
				t.Fatalf("found %v, want %v\n%s", got, sorted(tc.want), res)
			}
			for _, a := range res.Anomalies {
				if len(a.Steps) == 0 || len(a.Txns) == 0 {
					t.Errorf("%s reported without explanation: %+v", a.Type, a)
				}
			}
		})
	}
}

func sorted(ts []AnomalyType) []AnomalyType {
	out := slices.Clone(ts)
	slices.Sort(out)
	if out == nil {
		out = []AnomalyType{}
	}
	return out
}

// A reported cycle is minimal and explained edge by edge: the write skew's
// cycle is exactly its two transactions, joined by the two rw edges that
// prove it.
func TestCheckCycleExplanation(t *testing.T) {
	h := []Txn{
		okT(ap("z", 1)), // unrelated noise
		okT(rd("x"), ap("y", 1)),
		okT(rd("y"), ap("x", 1)),
		okT(rd("z", 1)),
	}
	res := Check(h, Options{})
	if len(res.Anomalies) != 1 {
		t.Fatalf("want one anomaly, got:\n%s", res)
	}
	a := res.Anomalies[0]
	if a.Type != G2Item || !slices.Equal(a.Txns, []int{1, 2}) {
		t.Fatalf("want G2-item over T1 and T2, got %s %v", a.Type, a.Txns)
	}
	want := []string{
		"T1 -rw-> T2: T1 read x = [], missing 1, which T2 appended after it (no read holds it)",
		"T2 -rw-> T1: T2 read y = [], missing 1, which T1 appended after it (no read holds it)",
	}
	if !slices.Equal(a.Steps, want) {
		t.Fatalf("steps:\n%s\nwant:\n%s", strings.Join(a.Steps, "\n"), strings.Join(want, "\n"))
	}
	if s := res.String(); !strings.Contains(s, "T1 (process 0, ok, 0..100): r(x)=[] append(y, 1)") {
		t.Fatalf("report does not describe the transactions:\n%s", s)
	}
}

// Among several cycles through a component, the shortest is reported.
func TestCheckShortestCycle(t *testing.T) {
	// A long ww chain x: T0 -> T1 -> T2 -> T3 closed by a wr edge T3 -> T0
	// on y, and a short G1c T0 <-> T1 on z and w.
	h := []Txn{
		okT(ap("x", 0), rd("y", 3), ap("z", 0), rd("w", 1)),
		okT(ap("x", 1), ap("w", 1), rd("z", 0)),
		okT(ap("x", 2)),
		okT(ap("x", 3), ap("y", 3)),
		okT(rd("x", 0, 1, 2, 3)),
	}
	res := Check(h, Options{})
	for _, a := range res.Anomalies {
		if a.Type == G1c && len(a.Txns) != 2 {
			t.Fatalf("G1c cycle over %v, want the two-transaction one\n%s", a.Txns, res)
		}
	}
	if !res.Has(G1c) {
		t.Fatalf("no G1c found:\n%s", res)
	}
}

// A cycle through thousands of transactions is found whole (the SCC search
// is iterative, so depth is no limit).
func TestCheckLongCycle(t *testing.T) {
	const n = 5000
	h := make([]Txn, 0, n+1)
	order := make([]int, n)
	for i := range n {
		order[i] = i + 1
		h = append(h, okT(ap("x", i+1)))
	}
	h[0].Ops = append(h[0].Ops, rd("y", 1))     // T0 read Tn-1's append to y...
	h[n-1].Ops = append(h[n-1].Ops, ap("y", 1)) // ...which follows T0 in x's order
	h = append(h, okT(rd("x", order...)))
	res := Check(h, Options{})
	if len(res.Anomalies) != 1 || res.Anomalies[0].Type != G1c || len(res.Anomalies[0].Txns) != n {
		t.Fatalf("want one G1c through all %d writers; got %v", n, res.Types())
	}
}

// TestResultKeys: a cycle names no key of its own; Keys gives the keys
// its transactions appended to, for the report's final states.
func TestResultKeys(t *testing.T) {
	r := Check([]Txn{
		okT(rd("x"), rd("y", 1)),
		okT(ap("x", 1), ap("y", 1)),
		okT(rd("x", 1)),
		okT(ap("z", 1)),
	}, Options{})
	if !r.Has(GSingle) {
		t.Fatalf("no G-single: %v", r)
	}
	if got := r.Keys(); !slices.Equal(got, []string{"x", "y"}) {
		t.Fatalf("Keys() = %v, want [x y]", got)
	}
	if got := Check([]Txn{okT(ap("x", 1)), okT(rd("x", 1))}, Options{}).Keys(); len(got) != 0 {
		t.Fatalf("Keys() of a valid history = %v", got)
	}
}
