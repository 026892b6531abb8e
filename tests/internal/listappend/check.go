package listappend

import (
	"sort"

	"github.com/shaledb/shale/tests/internal/txnkv"
)

// Options chooses what Check holds a history to.
type Options struct {
	// Strict adds real-time edges: strict serializability instead of
	// serializability. Its cycles are reported with -realtime classes.
	Strict bool
}

// Check infers every key's version order from h, builds the dependency
// graph of its committed transactions and reports every anomaly it proves
// (see the package doc). Transactions are named by their index in h
// ("T3"). Check does not modify h.
func Check(h []Txn, opts Options) Result {
	res, _, _ := analyze(h, opts)
	return res
}

// analyze is Check, also returning the graph and the cycles found in it
// (for the tests that hold the cycles to the graph).
func analyze(h []Txn, opts Options) (Result, *graph, []cycle) {
	res := Result{history: h}
	keys := indexKeys(h)
	observed := make([]bool, len(h))
	for _, s := range keys {
		res.Anomalies = append(res.Anomalies, s.duplicateAppends()...)
		res.Anomalies = append(res.Anomalies, s.inferOrder(h)...)
		res.Anomalies = append(res.Anomalies, s.observe(h, observed)...)
		res.Anomalies = append(res.Anomalies, s.intermediateReads(h)...)
	}
	res.Anomalies = append(res.Anomalies, internalReads(h)...)

	committed := make([]bool, len(h))
	for i, t := range h {
		committed[i] = t.Outcome == txnkv.OK || (t.Outcome == txnkv.Info && observed[i])
		if committed[i] {
			res.Committed++
		}
	}
	g := newGraph(len(h))
	for _, s := range keys {
		s.addKeyEdges(h, committed, g)
	}
	if opts.Strict {
		addRealtimeEdges(h, committed, g)
	}
	cycles, truncated := g.cycles(opts.Strict)
	for _, c := range cycles {
		res.Anomalies = append(res.Anomalies, c.anomaly())
	}
	res.Truncated = truncated
	res.Edges = g.count
	sort.SliceStable(res.Anomalies, func(i, j int) bool { return res.Anomalies[i].Type < res.Anomalies[j].Type })
	return res, g, cycles
}
