package raft

import (
	"fmt"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/command"
)

// BenchmarkApplyPuts applies groups of 64 committed Put entries (no
// proposer waiting, no dedup) through a replica and its state machine,
// engine write included: the apply path's cost and allocations per group.
func BenchmarkApplyPuts(b *testing.B) {
	nodes := []*kvpb.NodeDescriptor{{NodeId: 1, Address: "a:1"}, {NodeId: 2, Address: "a:2"}, {NodeId: 3, Address: "a:3"}}
	r := applyOnlyReplica(b, 1, nodes)
	const group = 64
	idx := uint64(initialIndex)
	ents := make([]*pb.Entry, group)
	value := make([]byte, 100)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		for j := range ents {
			idx++
			c := command.Command{Kind: command.KindPut, Header: command.Header{ProposalID: idx},
				Mutations: []command.Mutation{{Kind: command.KindPut, Key: []byte(fmt.Sprintf("k%06d", j)), Value: value}}}
			data, err := c.Encode(nil)
			if err != nil {
				b.Fatal(err)
			}
			ents[j] = &pb.Entry{Index: new(idx), Term: new(uint64(initialTerm)), Type: pb.EntryNormal.Enum(), Data: data}
		}
		b.StartTimer()
		r.raftMu.Lock()
		if _, _, err := r.applyCommittedLocked(ents); err != nil {
			b.Fatal(err)
		}
		r.raftMu.Unlock()
	}
}
