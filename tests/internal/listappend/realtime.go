package listappend

import (
	"fmt"
	"sort"

	"github.com/shaledb/shale/tests/internal/txnkv"
)

// addRealtimeEdges adds T1 -rt-> T2 wherever committed T1 completed before
// committed T2 was invoked, reduced so that the edges number about the
// concurrency times the transactions rather than its square, while still
// joining every such pair by a path of rt edges. It keeps a frontier: the
// completed transactions not yet known to precede a later completed one.
// An invocation gets an edge from each member of the frontier; a
// completion removes from the frontier what was in it at its own
// invocation (those now reach the frontier through it) and joins it.
// Indeterminate transactions never complete: they get edges in, none out.
// An invocation at the same instant as a completion is not after it.
func addRealtimeEdges(h []Txn, committed []bool, g *graph) {
	type event struct {
		at       int64
		txn      int
		complete bool
	}
	var events []event
	for i, t := range h {
		if !committed[i] {
			continue
		}
		events = append(events, event{t.Invoke, i, false})
		if t.Outcome == txnkv.OK {
			events = append(events, event{t.Complete, i, true})
		}
	}
	sort.Slice(events, func(i, j int) bool {
		a, b := events[i], events[j]
		if a.at != b.at {
			return a.at < b.at
		}
		if a.complete != b.complete {
			return !a.complete // invocations first: equal times are concurrent
		}
		return a.txn < b.txn
	})
	frontier := map[int]bool{}
	atInvoke := map[int][]int{}
	for _, e := range events {
		if !e.complete {
			prev := make([]int, 0, len(frontier))
			for f := range frontier {
				prev = append(prev, f)
			}
			sort.Ints(prev)
			atInvoke[e.txn] = prev
			for _, f := range prev {
				a, b := h[f], h[e.txn]
				g.add(f, e.txn, RT, func() string {
					return fmt.Sprintf("T%d completed at %d, before T%d was invoked at %d", f, a.Complete, e.txn, b.Invoke)
				})
			}
			continue
		}
		for _, f := range atInvoke[e.txn] {
			delete(frontier, f)
		}
		delete(atInvoke, e.txn)
		frontier[e.txn] = true
	}
}
