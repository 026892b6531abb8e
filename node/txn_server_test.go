package node

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/shaledb/shale/api/kvpb"
)

// TestTxnService: Begin gives a timestamp a read can be served at; Commit
// applies when the reads are unchanged, answers read_changed (not an
// error, nothing written) when one changed, and refuses malformed
// requests with InvalidArgument, nothing written.
func TestTxnService(t *testing.T) {
	tn := startNode(t, "", Config{})
	txn := kvpb.NewTxnClient(tn.cc)
	put(t, tn, "a", "1")
	begin, err := txn.Begin(ctxT(t), &kvpb.TxnBeginRequest{})
	if err != nil || begin.GetReadTimestamp() == nil {
		t.Fatalf("Begin = %v, %v", begin, err)
	}
	rts := begin.GetReadTimestamp()
	if _, err := tn.kv.Get(ctxT(t), &kvpb.GetRequest{Header: &kvpb.RequestHeader{ReadTimestamp: rts}, Key: []byte("a")}); err != nil {
		t.Fatalf("Get at the read timestamp: %v", err)
	}
	putA := func(v string) []*kvpb.Mutation {
		return []*kvpb.Mutation{{Op: &kvpb.Mutation_Put{Put: &kvpb.PutOp{Key: []byte("a"), Value: []byte(v)}}}}
	}
	reads := []*kvpb.TxnRead{{Key: []byte("a")}, {Key: []byte("b"), EndKey: []byte("c"), Span: true}}
	resp, err := txn.Commit(ctxT(t), &kvpb.TxnCommitRequest{ReadTimestamp: rts, Reads: reads, Mutations: putA("2")})
	if err != nil || !resp.GetCommitted() || resp.GetVersion() == nil {
		t.Fatalf("Commit of unchanged reads = %v, %v", resp, err)
	}
	// The same snapshot again: a now has a version above it.
	resp, err = txn.Commit(ctxT(t), &kvpb.TxnCommitRequest{ReadTimestamp: rts, Reads: reads, Mutations: putA("3")})
	if err != nil || resp.GetCommitted() || string(resp.GetReadChanged().GetKey()) != "a" {
		t.Fatalf("Commit of a changed read = %v, %v", resp, err)
	}
	if v, _ := get(t, tn, "a"); v != "2" {
		t.Fatalf("a = %q after a refused commit", v)
	}
	for name, req := range map[string]*kvpb.TxnCommitRequest{
		"no mutations":           {ReadTimestamp: rts, Reads: reads},
		"reads without a time":   {Reads: reads, Mutations: putA("4")},
		"empty read key":         {ReadTimestamp: rts, Reads: []*kvpb.TxnRead{{}}, Mutations: putA("4")},
		"read span start >= end": {ReadTimestamp: rts, Reads: []*kvpb.TxnRead{{Key: []byte("z"), EndKey: []byte("b"), Span: true}}, Mutations: putA("4")},
		"a leased put":           {ReadTimestamp: rts, Reads: reads, Mutations: []*kvpb.Mutation{{Op: &kvpb.Mutation_Put{Put: &kvpb.PutOp{Key: []byte("a"), Value: []byte("4"), Lease: 7}}}}},
		// Refused by the state machine, not the server: reads claimed at
		// a time the range never served (above its frontier).
		"reads in the future": {ReadTimestamp: &kvpb.Timestamp{WallNanos: time.Now().Add(time.Hour).UnixNano()}, Reads: reads, Mutations: putA("4")},
	} {
		if _, err := txn.Commit(ctxT(t), req); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: err = %v, want InvalidArgument", name, err)
		}
	}
	if v, _ := get(t, tn, "a"); v != "2" {
		t.Fatalf("a = %q after refused requests", v)
	}
}

// TestTxnOverMux: Begin and Commit ride a Multiplex stream, served by
// the Txn service's handlers.
func TestTxnOverMux(t *testing.T) {
	tn := startNode(t, "", Config{})
	m := openMux(t, tn.kv)
	begin := m.call(kvpb.MuxMethod_MUX_METHOD_TXN_BEGIN, &kvpb.TxnBeginRequest{}, time.Minute)
	m.send(begin)
	var br kvpb.TxnBeginResponse
	if r := m.recv(1)[begin.CallId]; r.GetStatus() != nil {
		t.Fatalf("Begin: %v", r.GetStatus())
	} else if err := proto.Unmarshal(r.GetResponse(), &br); err != nil || br.GetReadTimestamp() == nil {
		t.Fatalf("Begin = %v, %v", &br, err)
	}
	if _, err := tn.kv.Get(ctxT(t), &kvpb.GetRequest{Header: &kvpb.RequestHeader{ReadTimestamp: br.GetReadTimestamp()}, Key: []byte("a")}); err != nil {
		t.Fatalf("Get at the read timestamp: %v", err)
	}
	commit := m.call(kvpb.MuxMethod_MUX_METHOD_TXN_COMMIT, &kvpb.TxnCommitRequest{
		ReadTimestamp: br.GetReadTimestamp(), Reads: []*kvpb.TxnRead{{Key: []byte("a")}},
		Mutations: []*kvpb.Mutation{{Op: &kvpb.Mutation_Put{Put: &kvpb.PutOp{Key: []byte("a"), Value: []byte("1")}}}},
	}, time.Minute)
	m.send(commit)
	var cr kvpb.TxnCommitResponse
	if r := m.recv(1)[commit.CallId]; r.GetStatus() != nil {
		t.Fatalf("Commit: %v", r.GetStatus())
	} else if err := proto.Unmarshal(r.GetResponse(), &cr); err != nil || !cr.GetCommitted() {
		t.Fatalf("Commit = %v, %v", &cr, err)
	}
	if v, _ := get(t, tn, "a"); v != "1" {
		t.Fatalf("a = %q after a multiplexed commit", v)
	}
}
