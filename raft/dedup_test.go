package raft

import (
	"fmt"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/command"
	pb "go.etcd.io/raft/v3/raftpb"
)

// TestDedupRetriesThroughTheCache applies client writes out of order and
// retries them: in the same batch, in later batches, after the cache was
// emptied by a DedupGC in the middle of a batch (so that it reloads from
// an engine that must first receive the staged records), and after the
// cache was dropped. Every first attempt is a CAS that can succeed only
// once, so a retry that applied again would answer Succeeded=false.
func TestDedupRetriesThroughTheCache(t *testing.T) {
	nodes := []*kvpb.NodeDescriptor{{NodeId: 1, Address: "a:1"}, {NodeId: 2, Address: "a:2"}, {NodeId: 3, Address: "a:3"}}
	r := applyOnlyReplica(t, 1, nodes)
	idx := uint64(initialIndex)
	prop := uint64(0)
	entry := func(c *command.Command) *pb.Entry {
		prop++
		c.ProposalID = prop
		if c.ProposerTime == 0 {
			c.ProposerTime = int64(1000 + prop)
		}
		data, err := c.Encode(nil)
		if err != nil {
			t.Fatal(err)
		}
		idx++
		return &pb.Entry{Index: new(idx), Term: new(uint64(initialTerm)), Type: pb.EntryNormal.Enum(), Data: data}
	}
	cas := func(client, seq uint64) *pb.Entry {
		return entry(&command.Command{Kind: command.KindCAS, Header: command.Header{ClientID: client, RequestSeq: seq},
			CAS: command.CAS{Key: []byte(fmt.Sprintf("k-%d-%d", client, seq)), ExpectAbsent: true, NewValue: []byte("v")}})
	}
	// A DedupGC with a cutoff before every record: it deletes nothing.
	gc := func() *pb.Entry {
		return entry(&command.Command{Kind: command.KindDedupGC, Header: command.Header{ProposerTime: 1}})
	}
	apply := func(ents ...*pb.Entry) []command.Result {
		return applyInChunks(t, r, ents, func() int { return len(ents) })
	}
	check := func(what string, res []command.Result, want ...bool) {
		t.Helper()
		for i, w := range want {
			if res[i].Code != command.CodeOK {
				t.Fatalf("%s: entry %d: code %v (%s)", what, i, res[i].Code, res[i].Message)
			}
			if res[i].Succeeded != w {
				t.Fatalf("%s: entry %d: Succeeded=%v, want %v", what, i, res[i].Succeeded, w)
			}
		}
	}
	// Out of order, with retries in the same batch.
	check("first batch", apply(cas(1, 10), cas(1, 5), cas(1, 10), cas(2, 3), cas(1, 7), cas(1, 5)),
		true, true, true, true, true, true)
	// Retries in a later batch, and a seq never used below the highest.
	check("second batch", apply(cas(1, 7), cas(1, 6), cas(1, 6), cas(2, 3), cas(1, 11)),
		true, true, true, true, true)
	// A DedupGC in the middle of a batch empties the cache after the
	// records before it were staged; the retries after it must find them.
	res := apply(cas(1, 20), cas(3, 1), gc(), cas(1, 20), cas(3, 1), cas(1, 10), cas(1, 21))
	check("batch with a GC", append(res[:2:2], res[3:]...), true, true, true, true, true, true)
	// A command that is no client write and writes nothing here (RemoveNode
	// outside the meta range) also empties the cache, with the records
	// before it still only staged.
	removeNode := entry(&command.Command{Kind: command.KindRemoveNode, NodeID: 9})
	res = apply(cas(4, 1), cas(1, 22), removeNode, cas(4, 1), cas(1, 22))
	check("batch with a RemoveNode", append(res[:2:2], res[3:]...), true, true, true, true)
	// A cold cache (as after a restart).
	r.raftMu.Lock()
	if err := r.sm.Restore(); err != nil {
		t.Fatal(err)
	}
	r.raftMu.Unlock()
	check("cold cache", apply(cas(1, 21), cas(1, 20), cas(1, 6), cas(2, 3), cas(2, 4)),
		true, true, true, true, true)
	var m dto.Metric
	if err := r.store.metrics.dedupHits.Write(&m); err != nil {
		t.Fatal(err)
	}
	if hits := m.GetCounter().GetValue(); hits != 14 {
		t.Fatalf("%v dedup hits, want 14 (the retries)", hits)
	}
}
