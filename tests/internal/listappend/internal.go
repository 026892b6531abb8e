package listappend

import (
	"fmt"
	"slices"

	"github.com/shaledb/shale/tests/internal/txnkv"
)

// internalReads checks each ok transaction against itself: a read of a key
// must end with the transaction's own earlier appends to it, and after a
// first read it must equal that read plus the appends since. A failure
// means the transaction did not see its own writes, or saw the key change
// under it.
func internalReads(h []Txn) []Anomaly {
	var out []Anomaly
	for i, t := range h {
		if t.Outcome != txnkv.OK {
			continue
		}
		type state struct {
			known bool  // a read fixed the whole list
			list  []int // the list as the transaction should now see it (known) or its own appends (not known)
		}
		keys := map[string]*state{}
		for _, m := range t.Ops {
			s := keys[m.Key]
			if s == nil {
				s = &state{}
				keys[m.Key] = s
			}
			if m.Kind == Append {
				s.list = append(s.list, m.Value)
				continue
			}
			ok := slices.Equal(m.List, s.list)
			if !s.known {
				ok = len(m.List) >= len(s.list) && slices.Equal(m.List[len(m.List)-len(s.list):], s.list)
			}
			if !ok {
				want := fmt.Sprintf("%v", s.list)
				if !s.known {
					want = fmt.Sprintf("a list ending in %v", s.list)
				}
				out = append(out, Anomaly{Type: Internal, Key: m.Key, Txns: []int{i},
					Steps: []string{fmt.Sprintf("T%d read %s = %v where its own earlier operations imply %s", i, m.Key, m.List, want)}})
			}
			s.known, s.list = true, slices.Clone(m.List)
		}
	}
	return out
}
