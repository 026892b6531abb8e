package sim

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"sort"

	"github.com/anishathalye/porcupine"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/storage"
)

// The checkers. After every step:
//   - at most one leader per term: no two nodes' replicas of a range
//     report themselves leader in the same term;
// on every applied entry (raft.TestingKnobs.OnApply):
//   - no entry applied twice: each replica applies strictly increasing
//     indexes (from the applied index it had when its node started);
//   - one entry per index: every replica applies the same entry (term and
//     data) at a given index of a range;
// every few hundred steps and at the end:
//   - replicas of a range at the same applied index (and descriptor
//     generation) hold the same replicated state: the range-local keys a
//     snapshot carries and the range's data;
// at the end:
//   - the client history is linearizable, key by key (porcupine, a
//     register with put, get, CAS and delete): with the final reads of
//     every key this also shows that no acknowledged write was lost.

type replicaKey struct{ node, rangeID uint64 }
type entryKey struct{ rangeID, index uint64 }
type termKey struct{ rangeID, term uint64 }

type checker struct {
	s       *Sim
	applied map[replicaKey]uint64
	entries map[entryKey]uint64 // hash of term and data
	leaders map[termKey]uint64  // node
	steps   int
}

func newChecker(s *Sim) *checker {
	return &checker{s: s, applied: map[replicaKey]uint64{}, entries: map[entryKey]uint64{}, leaders: map[termKey]uint64{}}
}

// nodeStarted records where each replica of a (re)started node resumes
// applying.
func (c *checker) nodeStarted(nd *node) {
	for k := range c.applied {
		if k.node == nd.id {
			delete(c.applied, k)
		}
	}
	for _, r := range nd.store.Replicas() {
		c.applied[replicaKey{nd.id, r.RangeID()}] = r.AppliedIndex()
	}
}

// onApply is the OnApply hook: it runs on the simulator's goroutine,
// inside a round.
func (c *checker) onApply(nodeID, rangeID uint64, ents []*pb.Entry) {
	k := replicaKey{nodeID, rangeID}
	for _, e := range ents {
		last, ok := c.applied[k]
		if ok && e.GetIndex() <= last {
			c.s.violate("node %d applied entry %d of range %d twice (it had applied up to %d)", nodeID, e.GetIndex(), rangeID, last)
		}
		c.applied[k] = e.GetIndex()
		h := fnv.New64a()
		fmt.Fprintf(h, "%d/%d/", e.GetTerm(), e.GetType())
		h.Write(e.GetData())
		ek := entryKey{rangeID, e.GetIndex()}
		if prev, ok := c.entries[ek]; ok && prev != h.Sum64() {
			c.s.violate("node %d applied a different entry at index %d of range %d (term %d) than another node", nodeID, e.GetIndex(), rangeID, e.GetTerm())
		} else if !ok {
			c.entries[ek] = h.Sum64()
		}
	}
}

// afterStep checks the leaders, and the replicas' data now and then.
func (c *checker) afterStep() {
	c.steps++
	for _, nd := range c.s.nodes {
		if !nd.up {
			continue
		}
		for _, r := range nd.store.Replicas() {
			term, leader := r.Term()
			if !leader {
				continue
			}
			k := termKey{r.RangeID(), term}
			if prev, ok := c.leaders[k]; ok && prev != nd.id {
				c.s.violate("two leaders of range %d in term %d: nodes %d and %d", r.RangeID(), term, prev, nd.id)
			}
			c.leaders[k] = nd.id
		}
	}
	if c.steps%500 == 0 {
		c.checkReplicas(false)
	}
}

// checkReplicas compares the data of replicas at the same applied index.
func (c *checker) checkReplicas(final bool) {
	type group struct{ rangeID, applied, gen uint64 }
	seen := map[group]struct {
		node uint64
		hash uint64
	}{}
	compared := 0
	for _, nd := range c.s.nodes {
		if !nd.up {
			continue
		}
		for _, r := range nd.store.Replicas() {
			st := r.Status()
			if st.Descriptor == nil || len(st.Descriptor.GetReplicas()) == 0 {
				continue
			}
			h, err := spanHash(nd.db, keys.ReplicatedSpans(st.Descriptor)...)
			if err != nil {
				c.s.violate("node %d: reading range %d: %v", nd.id, st.RangeID, err)
				continue
			}
			g := group{st.RangeID, st.Applied, st.Descriptor.GetGeneration()}
			if prev, ok := seen[g]; ok {
				compared++
				if prev.hash != h {
					c.s.violate("range %d at applied index %d: node %d and node %d hold different data", st.RangeID, st.Applied, prev.node, nd.id)
				}
				continue
			}
			seen[g] = struct {
				node uint64
				hash uint64
			}{nd.id, h}
		}
	}
	if final {
		c.s.tracef("final replica check: %d comparisons", compared)
	}
}

// spanHash hashes every key and value in spans.
func spanHash(db *storage.DB, spans ...keys.Span) (uint64, error) {
	h := fnv.New64a()
	var n [2 * binary.MaxVarintLen64]byte
	for _, sp := range spans {
		it, err := db.NewIter(&storage.IterOptions{LowerBound: sp.Start, UpperBound: sp.End})
		if err != nil {
			return 0, err
		}
		for ok := it.First(); ok; ok = it.Next() {
			k, v := it.UnsafeKey(), it.UnsafeValue()
			b := binary.AppendUvarint(n[:0], uint64(len(k)))
			b = binary.AppendUvarint(b, uint64(len(v)))
			h.Write(b)
			h.Write(k)
			h.Write(v)
		}
		err = it.Error()
		it.Close()
		if err != nil {
			return 0, err
		}
	}
	return h.Sum64(), nil
}

// checkHistory checks the client history with porcupine.
func (c *checker) checkHistory() {
	var hist []porcupine.Operation
	for _, o := range c.s.wl.ops {
		if !o.ok && !o.unknown {
			continue // definitely not applied (or a read that failed)
		}
		call := o.call.Sub(epoch).Nanoseconds()
		ret := o.ret.Sub(epoch).Nanoseconds()
		if o.unknown {
			ret = math.MaxInt64 - 1
		}
		out := regOutput{Unknown: o.unknown, Found: o.found, Value: o.got, Swapped: o.swapped}
		add := func(key string, in regInput) {
			in.Key = key
			hist = append(hist, porcupine.Operation{ClientId: o.id, Input: in, Output: out, Call: call, Return: ret})
		}
		switch o.kind {
		case opGet:
			add(o.key, regInput{Kind: opGet})
		case opPut:
			add(o.key, regInput{Kind: opPut, Value: o.value})
		case opCAS:
			add(o.key, regInput{Kind: opCAS, Value: o.value, Expect: o.expect, ExpectAbsent: o.expectAbsent})
		case opDeleteRange:
			for _, k := range c.s.wl.keys {
				if k >= o.key && k < o.end {
					add(k, regInput{Kind: opDeleteRange})
				}
			}
		}
	}
	sort.SliceStable(hist, func(i, j int) bool { return hist[i].Call < hist[j].Call })
	res, info := porcupine.CheckOperationsVerbose(registerModel, hist, 0)
	if res != porcupine.Ok {
		c.s.violate("the history of %d operations is not linearizable: %s", len(hist), describeIllegal(info, hist))
	}
}

// describeIllegal names the keys whose histories failed.
func describeIllegal(info porcupine.LinearizationInfo, hist []porcupine.Operation) string {
	byKey := map[string][]porcupine.Operation{}
	for _, o := range hist {
		k := o.Input.(regInput).Key
		byKey[k] = append(byKey[k], o)
	}
	var bad []string
	for k, ops := range byKey {
		if !porcupine.CheckOperations(registerModel, ops) {
			bad = append(bad, k)
		}
	}
	sort.Strings(bad)
	out := fmt.Sprintf("keys %v", bad)
	if len(bad) > 0 {
		for _, o := range byKey[bad[0]] {
			out += "\n    " + fmt.Sprintf("[%d,%d] op %d ", o.Call/1e3, o.Return/1e3, o.ClientId) + registerModel.DescribeOperation(o.Input, o.Output)
		}
	}
	return out
}
