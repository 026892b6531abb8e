package listappend

import (
	"fmt"
	"strings"
)

// EdgeType is a dependency between two committed transactions. Several
// types may join one pair.
type EdgeType uint8

const (
	// WW: the source installed a version of a key and the target the one
	// after it (or, for an append no read observed, some later one).
	WW EdgeType = 1 << iota
	// WR: the target read a list whose last element the source appended.
	WR
	// RW (anti-dependency): the source read a list and the target
	// appended the element that came next, which the source did not see.
	RW
	// RT (real time): the source completed before the target was invoked.
	RT
)

func (e EdgeType) String() string {
	var parts []string
	for _, n := range []struct {
		t    EdgeType
		name string
	}{{WW, "ww"}, {WR, "wr"}, {RW, "rw"}, {RT, "rt"}} {
		if e&n.t != 0 {
			parts = append(parts, n.name)
		}
	}
	return strings.Join(parts, "+")
}

// MarshalText names the edge type (for maps keyed by it in reports).
func (e EdgeType) MarshalText() ([]byte, error) { return []byte(e.String()), nil }

// edge is one dependency, with what writes the sentence that proves it
// (called only for the edges of a report: most edges are never shown).
type edge struct {
	to  int
	typ EdgeType
	why func() string
}

// graph is the dependency graph over a history's transactions (indexed as
// in the history; transactions not committed have no edges).
type graph struct {
	out   [][]edge
	dedup map[edgeKey]bool
	count map[EdgeType]int
}

type edgeKey struct {
	from, to int
	typ      EdgeType
}

func newGraph(n int) *graph {
	return &graph{out: make([][]edge, n), dedup: make(map[edgeKey]bool, 4*n), count: map[EdgeType]int{}}
}

// add records from -typ-> to, unless it is a self-loop or already there
// (the first explanation is kept).
func (g *graph) add(from, to int, typ EdgeType, why func() string) {
	if from == to {
		return
	}
	k := edgeKey{from, to, typ}
	if g.dedup[k] {
		return
	}
	g.dedup[k] = true
	g.count[typ]++
	g.out[from] = append(g.out[from], edge{to: to, typ: typ, why: why})
}

// step formats one edge of a cycle.
func step(from int, e edge) string {
	return fmt.Sprintf("T%d -%s-> T%d: %s", from, e.typ, e.to, e.why())
}

// formatList prints a read, eliding all but its last few elements (the
// ones an explanation is about).
func formatList(l []int) string {
	const tail = 4
	if len(l) <= tail {
		return fmt.Sprint(l)
	}
	s := fmt.Sprint(l[len(l)-tail:])
	return "[.. " + s[1:]
}
