package listappend

import "sort"

// Budgets of the cycle search in one component, per class: BFS visits in
// all, and further attempts after a first cycle (looking for a shorter
// one). A valid history has no component, so these only bound the time
// spent explaining a broken one.
const (
	visitBudget      = 500_000
	attemptsAfterHit = 32
)

// cycle is a closed walk: edges[i] leads from nodes[i] to nodes[i+1]
// (the last back to nodes[0]).
type cycle struct {
	nodes []int
	edges []edge
}

// classify names a cycle by the edges it uses (see AnomalyType).
func (c cycle) classify() AnomalyType {
	var wr, rw, rt int
	for _, e := range c.edges {
		switch e.typ {
		case WR:
			wr++
		case RW:
			rw++
		case RT:
			rt++
		}
	}
	t := G0
	switch {
	case rw == 1:
		t = GSingle
	case rw > 1:
		t = G2Item
	case wr > 0:
		t = G1c
	}
	if rt > 0 {
		t = realtime(t)
	}
	return t
}

func (c cycle) anomaly() Anomaly {
	a := Anomaly{Type: c.classify(), Txns: append([]int(nil), c.nodes...)}
	for i, e := range c.edges {
		a.Steps = append(a.Steps, step(c.nodes[i], e))
	}
	return a
}

// search is one class's cycle search: cycles through an edge of type
// required whose other edges all have types in mask.
type search struct{ required, mask EdgeType }

// searches lists the classes in the order they are looked for, from the
// strongest (G0 rules out even read uncommitted) down. The G-single search
// allows no rw edge besides the required one, so its cycles have exactly
// one; the G2-item search allows more.
var searches = []search{
	{WW, WW},
	{WR, WW | WR},
	{RW, WW | WR},
	{RW, WW | WR | RW},
}

// realtimeSearches are the cycles that also need a real-time edge.
var realtimeSearches = []search{
	{RT, WW | RT},
	{RT, WW | WR | RT},
	{RT, WW | WR | RW | RT},
}

// cycleFinder searches one graph's components, reusing its BFS arrays.
type cycleFinder struct {
	g      *graph
	seen   []int // BFS stamp per node
	parent []int
	stamp  int
	visits int // left in the current budget
}

func newCycleFinder(g *graph) *cycleFinder {
	n := len(g.out)
	return &cycleFinder{g: g, seen: make([]int, n), parent: make([]int, n)}
}

// find returns the shortest cycle it finds for s among members (one
// component of the whole graph), and whether the budget ran out before
// every candidate edge was tried. comp maps nodes to the components of the
// subgraph of s's edge types: only an edge inside one can be on a cycle.
func (f *cycleFinder) find(members []int, s search, comp []int) (best cycle, found, truncated bool) {
	f.visits = visitBudget
	after := 0
	for _, a := range members {
		for _, e := range f.g.out[a] {
			if e.typ != s.required || comp[a] < 0 || comp[e.to] != comp[a] {
				continue
			}
			if f.visits <= 0 || (found && after >= attemptsAfterHit) {
				return best, found, f.visits <= 0
			}
			path, ok := f.path(e.to, a, comp, s.mask)
			if !ok {
				continue
			}
			if found {
				after++
			}
			if !found || len(path) < len(best.nodes) {
				best = f.closeCycle(a, e, path, s.mask)
				found = true
				if len(best.nodes) == 2 {
					return best, true, false
				}
			}
		}
	}
	return best, found, false
}

// path returns the shortest path from src to dst inside src's component
// (comp maps nodes to components) using edges whose types are in mask, as
// its nodes (src first, dst last).
func (f *cycleFinder) path(src, dst int, comp []int, mask EdgeType) ([]int, bool) {
	c := comp[src]
	f.stamp++
	f.seen[src] = f.stamp
	f.parent[src] = -1
	queue := []int{src}
	for len(queue) > 0 && f.visits > 0 {
		v := queue[0]
		queue = queue[1:]
		f.visits--
		if v == dst {
			var p []int
			for x := dst; x >= 0; x = f.parent[x] {
				p = append(p, x)
			}
			for i, j := 0, len(p)-1; i < j; i, j = i+1, j-1 {
				p[i], p[j] = p[j], p[i]
			}
			return p, true
		}
		for _, e := range f.g.out[v] {
			if e.typ&mask == 0 || comp[e.to] != c || f.seen[e.to] == f.stamp {
				continue
			}
			f.seen[e.to] = f.stamp
			f.parent[e.to] = v
			queue = append(queue, e.to)
		}
	}
	return nil, false
}

// closeCycle builds the cycle a -first-> path[0] ... path[last] = a,
// choosing for each hop of the path the weakest edge type mask allows
// (ww before wr before rw before rt), so that the cycle is classified by
// the least it needs.
func (f *cycleFinder) closeCycle(a int, first edge, path []int, mask EdgeType) cycle {
	c := cycle{nodes: []int{a}, edges: []edge{first}}
	for i := 0; i+1 < len(path); i++ {
		var best edge
		for _, e := range f.g.out[path[i]] {
			if e.to == path[i+1] && e.typ&mask != 0 && (best.typ == 0 || e.typ < best.typ) {
				best = e
			}
		}
		c.nodes = append(c.nodes, path[i])
		c.edges = append(c.edges, best)
	}
	return c
}

// cycles reports, for each component, one cycle of each class it finds
// (sorted by class), and whether any search ran out of budget. Each search
// looks only inside the components of the subgraph of the edge types it
// may use, where every cycle of its class lies: a class absent from a
// history costs one Tarjan pass, not a search from each edge. Every
// component yields at least one cycle: if the class searches all ran out,
// a search through any of its edges with every type allowed cannot fail.
func (g *graph) cycles(strict bool) ([]cycle, bool) {
	all := WW | WR | RW
	ss := searches
	if strict {
		all |= RT
		ss = append(append([]search(nil), searches...), realtimeSearches...)
	}
	comps, comp := g.components(all)
	sub := make([][]int, len(ss)) // per search: node -> component of its subgraph
	for i, s := range ss {
		_, sub[i] = g.components(s.mask | s.required)
	}
	f := newCycleFinder(g)
	var out []cycle
	anyTruncated := false
	for _, members := range comps {
		sort.Ints(members)
		found := map[AnomalyType]bool{}
		for i, s := range ss {
			cy, ok, truncated := f.find(members, s, sub[i])
			anyTruncated = anyTruncated || truncated
			if ok && !found[cy.classify()] {
				found[cy.classify()] = true
				out = append(out, cy)
			}
		}
		if len(found) == 0 {
			out = append(out, f.anyCycle(members, comp))
		}
	}
	return out, anyTruncated
}

// anyCycle returns a cycle through the first edge inside the component of
// members (comp maps nodes to components).
func (f *cycleFinder) anyCycle(members []int, comp []int) cycle {
	all := WW | WR | RW | RT
	for _, a := range members {
		for _, e := range f.g.out[a] {
			if comp[e.to] != comp[a] {
				continue
			}
			f.visits = len(f.g.out) + 1 // a full BFS: it must succeed
			if path, ok := f.path(e.to, a, comp, all); ok {
				return f.closeCycle(a, e, path, all)
			}
		}
	}
	panic("listappend: a strongly connected component without a cycle")
}
