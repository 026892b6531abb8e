package listappend

// components returns the strongly connected components with more than one
// transaction of the subgraph of g made of the edges whose type is in
// types (Tarjan's algorithm, iterative so that a long chain of
// dependencies cannot exhaust the stack), and comp, mapping each node to
// its component's index or -1. Only these components can hold a cycle of
// those edges: self-loops are never added.
func (g *graph) components(types EdgeType) (comps [][]int, comp []int) {
	n := len(g.out)
	const unvisited = -1
	index := make([]int, n)
	low := make([]int, n)
	onStack := make([]bool, n)
	comp = make([]int, n)
	for i := range index {
		index[i], comp[i] = unvisited, -1
	}
	var stack []int
	next := 0
	type frame struct{ node, edge int }
	for root := range n {
		if index[root] != unvisited || len(g.out[root]) == 0 {
			continue
		}
		calls := []frame{{root, 0}}
		index[root], low[root] = next, next
		next++
		stack = append(stack, root)
		onStack[root] = true
		for len(calls) > 0 {
			f := &calls[len(calls)-1]
			v := f.node
			if f.edge < len(g.out[v]) {
				e := g.out[v][f.edge]
				f.edge++
				if e.typ&types == 0 {
					continue
				}
				w := e.to
				switch {
				case index[w] == unvisited:
					index[w], low[w] = next, next
					next++
					stack = append(stack, w)
					onStack[w] = true
					calls = append(calls, frame{w, 0})
				case onStack[w]:
					low[v] = min(low[v], index[w])
				}
				continue
			}
			// v is done: pop it, and close its component if it is a root.
			calls = calls[:len(calls)-1]
			if len(calls) > 0 {
				p := calls[len(calls)-1].node
				low[p] = min(low[p], low[v])
			}
			if low[v] != index[v] {
				continue
			}
			var members []int
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				members = append(members, w)
				if w == v {
					break
				}
			}
			if len(members) > 1 {
				for _, m := range members {
					comp[m] = len(comps)
				}
				comps = append(comps, members)
			}
		}
	}
	return comps, comp
}
