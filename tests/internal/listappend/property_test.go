package listappend

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/shaledb/shale/tests/internal/txnkv"
)

// simulate runs n generated transactions from procs concurrent processes
// against in-memory lists. Each transaction takes effect atomically at one
// instant between its invocation and its completion (or, when it aborts,
// never), so the history is strictly serializable by construction. A share
// of the transactions end indeterminate (committed or not) or failed.
func simulate(rng *rand.Rand, n, procs int, cfg GenConfig) []Txn {
	gen := NewGenerator(cfg)
	lists := map[string][]int{}
	type proc struct {
		txn     *Txn
		applied bool
		aborted bool
	}
	ps := make([]proc, procs)
	var h []Txn
	started := 0
	for clock := int64(1); started < n || slices.ContainsFunc(ps, func(p proc) bool { return p.txn != nil }); clock++ {
		p := &ps[rng.IntN(procs)]
		switch {
		case p.txn == nil && started < n:
			started++
			p.txn = &Txn{Process: rng.IntN(1000), Ops: gen.Next(rng), Invoke: clock}
		case p.txn == nil:
		case !p.applied && !p.aborted && rng.IntN(10) == 0:
			p.aborted = true
		case !p.applied && !p.aborted:
			p.applied = true
			for i := range p.txn.Ops {
				m := &p.txn.Ops[i]
				if m.Kind == Read {
					m.List = slices.Clone(lists[m.Key])
				} else {
					lists[m.Key] = append(lists[m.Key], m.Value)
				}
			}
		default:
			t := *p.txn
			t.Complete = clock
			switch {
			case rng.IntN(8) == 0: // indeterminate, committed or not
				t.Outcome = txnkv.Info
				clearReads(t.Ops)
			case p.aborted:
				t.Outcome = txnkv.Fail
				clearReads(t.Ops)
			}
			h = append(h, t)
			*p = proc{}
		}
	}
	return h
}

func clearReads(ops []MicroOp) {
	for i := range ops {
		ops[i].List = nil
	}
}

// Property: every strictly serializable history passes the strict check,
// over many random shapes (few or many keys and processes, short and long
// transactions, read-heavy and write-heavy).
func TestCheckRandomStrictSerializable(t *testing.T) {
	for seed := range uint64(100) {
		rng := rand.New(rand.NewPCG(seed, 1))
		cfg := GenConfig{Keys: 1 + rng.IntN(6), MaxOps: 1 + rng.IntN(6), ReadShare: 0.2 + 0.6*rng.Float64(), MaxAppends: 4 + rng.IntN(20)}
		h := simulate(rng, 150, 1+rng.IntN(8), cfg)
		if res := Check(h, Options{Strict: true}); !res.Valid() {
			t.Fatalf("seed %d (%+v): a strictly serializable history was flagged:\n%s", seed, cfg, res)
		}
	}
}

// Property: a serializable history that ignores real time (transactions
// take effect in an order unrelated to when they ran) passes the
// serializable check; most such histories fail the strict one, and each
// failure is a -realtime class, never a plain cycle.
func TestCheckRandomSerializable(t *testing.T) {
	strictFailures := 0
	for seed := range uint64(60) {
		rng := rand.New(rand.NewPCG(seed, 2))
		h := simulate(rng, 120, 4, GenConfig{Keys: 3, MaxOps: 3})
		// Reassign the intervals at random: the serial order stays, real
		// time no longer agrees with it.
		for i := range h {
			h[i].Invoke = int64(rng.IntN(1000))
			h[i].Complete = h[i].Invoke + 1 + int64(rng.IntN(5))
		}
		if res := Check(h, Options{}); !res.Valid() {
			t.Fatalf("seed %d: a serializable history was flagged:\n%s", seed, res)
		}
		res := Check(h, Options{Strict: true})
		if !res.Valid() {
			strictFailures++
		}
		for _, a := range res.Anomalies {
			switch a.Type {
			case realtime(G0), realtime(G1c), realtime(GSingle), realtime(G2Item):
			default:
				t.Fatalf("seed %d: %s in a serializable history:\n%s", seed, a.Type, res)
			}
		}
	}
	if strictFailures < 30 {
		t.Fatalf("only %d of 60 histories with scrambled real time failed the strict check", strictFailures)
	}
}

// Every cycle reported is a closed walk of edges that are in the graph,
// and its class is the one its edge types give: the checker reports no
// cycle it did not find. Histories come from the lost-update store, which
// produces cycles of every class.
func TestCyclesAreInTheGraph(t *testing.T) {
	classes := map[AnomalyType]bool{}
	for seed := range uint64(5) {
		h := runWorkload(t, txnkv.NewMemKV(txnkv.BugLostUpdate, 0.05, seed), 6, 400)
		_, g, cycles := analyze(h, Options{Strict: true})
		for _, c := range cycles {
			classes[c.classify()] = true
			if len(c.nodes) < 2 || len(c.nodes) != len(c.edges) {
				t.Fatalf("malformed cycle %+v", c)
			}
			for i, e := range c.edges {
				from, to := c.nodes[i], c.nodes[(i+1)%len(c.nodes)]
				if e.to != to || !g.dedup[edgeKey{from, to, e.typ}] {
					t.Fatalf("cycle %v: no %s edge T%d -> T%d in the graph", c.nodes, e.typ, from, to)
				}
			}
		}
	}
	if len(classes) < 3 {
		t.Fatalf("only %v found; the test needs varied cycles", classes)
	}
}
