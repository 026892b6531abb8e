package client

import (
	"testing"

	"github.com/shaledb/shale/api/kvpb"
)

// A read is covered only when it is a point read of a key the
// transaction writes in the same range; a scanned span (its gaps are not
// locked) and a range only read are refreshed.
func TestToRefreshCoversOnlyPointReadsOfWrittenKeys(t *testing.T) {
	put := func(k string) *kvpb.Mutation {
		return &kvpb.Mutation{Op: &kvpb.Mutation_Put{Put: &kvpb.PutOp{Key: []byte(k), Value: []byte("v")}}}
	}
	point := func(k string) *kvpb.TxnRead { return &kvpb.TxnRead{Key: []byte(k)} }
	span := &kvpb.TxnRead{Key: []byte("a"), EndKey: []byte("c"), Span: true}
	transfer := []*txnGroup{
		{muts: []*kvpb.Mutation{put("a")}, reads: []*kvpb.TxnRead{point("a")}},
		{muts: []*kvpb.Mutation{put("n")}, reads: []*kvpb.TxnRead{point("n")}},
	}
	if refresh, covered := toRefresh(transfer); !covered || len(refresh) != 0 {
		t.Fatalf("a transfer: %d groups to refresh, covered %v", len(refresh), covered)
	}
	blind := []*txnGroup{{muts: []*kvpb.Mutation{put("a")}}, {muts: []*kvpb.Mutation{put("n")}}}
	if _, covered := toRefresh(blind); !covered {
		t.Fatal("blind writes are not covered")
	}
	mixed := []*txnGroup{
		{muts: []*kvpb.Mutation{put("a")}, reads: []*kvpb.TxnRead{point("a"), point("b"), span}},
		{reads: []*kvpb.TxnRead{point("x")}},
		{muts: []*kvpb.Mutation{put("n")}, reads: []*kvpb.TxnRead{point("n")}},
	}
	refresh, covered := toRefresh(mixed)
	if covered || len(refresh) != 2 || len(refresh[0].reads) != 2 || string(refresh[0].reads[0].GetKey()) != "b" ||
		!refresh[0].reads[1].GetSpan() || string(refresh[1].reads[0].GetKey()) != "x" || len(refresh[0].muts) != 0 {
		t.Fatalf("mixed: covered %v, refresh %+v", covered, refresh)
	}
}
