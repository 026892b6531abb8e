package command

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/hlc"
)

func sampleCommands() []Command {
	h := Header{ProposerNode: 3, ProposalID: 1<<62 + 5, ClientID: 99, RequestSeq: 7, ProposerTime: -1,
		Timestamp: hlc.Timestamp{WallTime: 1 << 61, Logical: 3}}
	desc := &kvpb.RangeDescriptor{RangeId: 2, Generation: 4, NextReplicaId: 5,
		Replicas: []*kvpb.ReplicaDescriptor{{NodeId: 1, ReplicaId: 1}, {NodeId: 4, ReplicaId: 4, Type: kvpb.ReplicaType_REPLICA_TYPE_LEARNER}}}
	return []Command{
		{Header: h, Kind: KindPut, Mutations: []Mutation{{Kind: KindPut, Key: []byte("k"), Value: []byte("v")}}},
		{Header: h, Kind: KindPut, Mutations: []Mutation{{Kind: KindPut, Key: []byte("k"), Value: []byte{}}}},
		{Header: h, Kind: KindDelete, Mutations: []Mutation{{Kind: KindDelete, Key: []byte("k")}}},
		{Header: h, Kind: KindDeleteRange, Mutations: []Mutation{{Kind: KindDeleteRange, Key: []byte("a"), Value: []byte("z")}}},
		{Header: h, Kind: KindBatch, Mutations: []Mutation{
			{Kind: KindPut, Key: []byte("a"), Value: bytes.Repeat([]byte("x"), 300)},
			{Kind: KindDelete, Key: []byte("b")},
			{Kind: KindDeleteRange, Key: []byte("c"), Value: []byte("d")},
		}},
		{Header: h, Kind: KindCAS, CAS: CAS{Key: []byte("k"), ExpectAbsent: true, NewValue: []byte("n")}},
		{Header: h, Kind: KindCAS, CAS: CAS{Key: []byte("k"), Expected: []byte("o"), Delete: true}},
		{Header: Header{ProposerTime: 1 << 60}, Kind: KindDedupGC},
		{Header: h, Kind: KindPutNode, Node: &kvpb.NodeDescriptor{Address: "127.0.0.1:7004"}},
		{Header: h, Kind: KindPutDescriptor, Descriptor: desc},
		{Header: h, Kind: KindChangeReplicas, ExpectedGeneration: 3, Descriptor: desc},
		{Header: h, Kind: KindRemoveNode, NodeID: 4},
		{Header: h, Kind: KindFreeze, ExpectedGeneration: 9, LeftRangeID: 2, LeftGeneration: 7},
		{Header: h, Kind: KindUnfreeze, LeftRangeID: 2, LeftGeneration: 7},
		{Header: h, Kind: KindMerge, ExpectedGeneration: 7, FreezeIndex: 1 << 40, Right: desc},
		{Header: h, Kind: KindMergeAbort, ExpectedGeneration: 7, RightRangeID: 3},
		{Header: h, Kind: KindCAS, CAS: CAS{Key: []byte("k"), ExpectVersion: true, ExpectedVersion: hlc.Timestamp{WallTime: 77, Logical: 1}, NewValue: []byte("n")}},
		{Header: h, Kind: KindClose, Close: hlc.Timestamp{WallTime: 1 << 62, Logical: 9}},
		{Header: h, Kind: KindGC, GC: GC{Threshold: hlc.Timestamp{WallTime: 1 << 61, Logical: 3}, Start: []byte("a"), End: []byte("m"), MaxDeletes: 1000, MaxKeys: 1 << 20}},
		{Header: h, Kind: KindGC, GC: GC{Threshold: hlc.Timestamp{WallTime: 5}}},
		{Header: h, Kind: KindTSOWindow, TSOWindow: 1 << 61},
		{Header: h, Kind: KindProtect, Protect: Protect{Timestamp: hlc.Timestamp{WallTime: 1 << 60, Logical: 1}, Start: []byte("a"),
			End: []byte("b"), Expiry: 1 << 61, Window: int64(10e9), Description: "backup b1"}},
		{Header: h, Kind: KindProtect, Protect: Protect{Timestamp: hlc.Timestamp{WallTime: 5}, Expiry: 9, Window: 1}},
		{Header: h, Kind: KindProtect, Protect: Protect{ID: 7, Expiry: 1 << 61}},
		{Header: h, Kind: KindRelease, Protect: Protect{ID: 7}},
		{Header: h, Kind: KindRelease, Protect: Protect{ID: 7, ExpiredBy: 1 << 60}},
		{Header: h, Kind: KindLeaseGrant, Lease: Lease{TTLMillis: 10_000}},
		{Header: h, Kind: KindLeaseGrant, Lease: Lease{ID: 1 << 50, TTLMillis: 1}},
		{Header: h, Kind: KindLeaseRevoke, Lease: Lease{ID: 3}},
		{Header: h, Kind: KindLeaseRevoke, Lease: Lease{ID: 3, Expired: true}},
		{Header: h, Kind: KindLeaseRevoke, Lease: Lease{ID: 3, Expired: true, Term: 1 << 40}},
		{Header: h, Kind: KindLeaseAttach, Lease: Lease{ID: 3, Key: []byte("k")}},
		{Header: h, Kind: KindLeaseSwept, Lease: Lease{ID: 3}},
		{Header: h, Kind: KindLeasePut, Lease: Lease{ID: 3, Deadline: hlc.Timestamp{WallTime: 1 << 60, Logical: 2}},
			Mutations: []Mutation{{Kind: KindPut, Key: []byte("k"), Value: []byte("v")}}},
		{Header: h, Kind: KindLeaseDelete, Lease: Lease{ID: 3, Keys: [][]byte{[]byte("a"), {}, []byte("zz")}}},
		{Header: h, Kind: KindLeaseBatch, Mutations: []Mutation{
			{Kind: KindLeasePut, Key: []byte("a"), Value: []byte("1"), Lease: 3, Deadline: hlc.Timestamp{WallTime: 1 << 60, Logical: 2}},
			{Kind: KindPut, Key: []byte("b"), Value: []byte("2")},
			{Kind: KindDelete, Key: []byte("c")},
			{Kind: KindDeleteRange, Key: []byte("d"), Value: []byte("e")},
			{Kind: KindLeasePut, Key: []byte("f"), Value: []byte{}, Lease: 4, Deadline: hlc.Timestamp{WallTime: 9}}}},
		{Header: h, Kind: KindLeaseCAS, Lease: Lease{ID: 3, Deadline: hlc.Timestamp{WallTime: 1 << 60}},
			CAS: CAS{Key: []byte("k"), ExpectVersion: true, ExpectedVersion: hlc.Timestamp{WallTime: 77, Logical: 1}, NewValue: []byte("n")}},
		{Header: h, Kind: KindLeaseCAS, Lease: Lease{ID: 3, Deadline: hlc.Timestamp{WallTime: 5}},
			CAS: CAS{Key: []byte("k"), ExpectAbsent: true, NewValue: []byte("n")}},
		{Header: h, Kind: KindTxnCommit, Txn: TxnCommit{ReadTimestamp: hlc.Timestamp{WallTime: 1 << 60, Logical: 2},
			Reads: []TxnRead{{Key: []byte("a")}, {Key: []byte("b"), End: []byte("c"), Span: true}, {Key: []byte("d"), Span: true}}},
			Mutations: []Mutation{{Kind: KindPut, Key: []byte("a"), Value: []byte("1")}, {Kind: KindDeleteRange, Key: []byte("e"), Value: []byte("f")}}},
		{Header: h, Kind: KindTxnCommit, Txn: TxnCommit{ReadTimestamp: hlc.Timestamp{WallTime: 9}},
			Mutations: []Mutation{{Kind: KindDelete, Key: []byte("a")}}},
		{Header: h, Kind: KindTxnWrite, TxnWrite: TxnWrite{ID: TxnID{1, 2, 15: 16}, Record: []byte("rec")},
			Txn:       TxnCommit{ReadTimestamp: hlc.Timestamp{WallTime: 9}, Reads: []TxnRead{{Key: []byte("a")}, {Key: []byte("b"), End: []byte("c"), Span: true}}},
			Mutations: []Mutation{{Kind: KindPut, Key: []byte("a"), Value: []byte("1")}, {Kind: KindDelete, Key: []byte("b")}}},
		{Header: h, Kind: KindTxnWrite, TxnWrite: TxnWrite{ID: TxnID{1}, Record: []byte("a"), Stage: true,
			StageBound: hlc.Timestamp{WallTime: 1 << 60, Logical: 2}, Heartbeat: 1 << 61, StageKeys: [][]byte{[]byte("a"), []byte("z")}},
			Mutations: []Mutation{{Kind: KindPut, Key: []byte("a"), Value: []byte("1")}}},
		{Header: h, Kind: KindTxnWrite, TxnWrite: TxnWrite{ID: TxnID{1}, Record: []byte("a"), Stage: true,
			StageBound: hlc.Timestamp{WallTime: 1 << 60, Logical: 2}, Heartbeat: 1 << 61, StageKeys: [][]byte{[]byte("a"), []byte("z")},
			Resolve: []TxnResolve{{ID: TxnID{9}, Committed: true, CommitTimestamp: hlc.Timestamp{WallTime: 8}, Keys: [][]byte{[]byte("a")}},
				{ID: TxnID{10}, Committed: true, CommitTimestamp: hlc.Timestamp{WallTime: 7, Logical: 1}, Keys: [][]byte{[]byte("b"), []byte("c")}}}},
			Mutations: []Mutation{{Kind: KindPut, Key: []byte("a"), Value: []byte("1")}}},
		{Header: h, Kind: KindTxnWrite, TxnWrite: TxnWrite{ID: TxnID{2}, Record: []byte("q"),
			Resolve: []TxnResolve{{ID: TxnID{9}, Committed: true, CommitTimestamp: hlc.Timestamp{WallTime: 8}, Keys: [][]byte{[]byte("a")}}}},
			Txn:       TxnCommit{ReadTimestamp: hlc.Timestamp{WallTime: 9}, Reads: []TxnRead{{Key: []byte("a")}}},
			Mutations: []Mutation{{Kind: KindDelete, Key: []byte("a")}}},
		// The COMMITTED of transaction 9 carried (wire kind 36), beside a
		// plain fold.
		{Header: h, Kind: KindTxnWrite, TxnWrite: TxnWrite{ID: TxnID{2}, Record: []byte("q"), Stage: true,
			StageBound: hlc.Timestamp{WallTime: 5}, StageKeys: [][]byte{[]byte("a")},
			Resolve: []TxnResolve{{ID: TxnID{9}, Committed: true, CommitTimestamp: hlc.Timestamp{WallTime: 8}, Keys: [][]byte{[]byte("a")}, Record: []byte("a")},
				{ID: TxnID{10}, Committed: true, CommitTimestamp: hlc.Timestamp{WallTime: 7}, Keys: [][]byte{[]byte("b")}}},
			DeleteRecords: []TxnID{{11}, {12}}},
			Mutations: []Mutation{{Kind: KindPut, Key: []byte("a"), Value: []byte("1")}}},
		// Record deletions alone (kind 36, no fold).
		{Header: h, Kind: KindTxnWrite, TxnWrite: TxnWrite{ID: TxnID{2}, Record: []byte("q"), DeleteRecords: []TxnID{{13}}},
			Mutations: []Mutation{{Kind: KindPut, Key: []byte("a"), Value: []byte("1")}}},
		{Header: h, Kind: KindTxnResolve, TxnResolve: TxnResolve{ID: TxnID{7}, Committed: true,
			CommitTimestamp: hlc.Timestamp{WallTime: 1 << 60, Logical: 2}, Keys: [][]byte{[]byte("a"), {}}}},
		{Header: h, Kind: KindTxnResolve, TxnResolve: TxnResolve{ID: TxnID{7}, Keys: [][]byte{[]byte("a")}}},
		{Header: h, Kind: KindTxnWrite, TxnWrite: TxnWrite{ID: TxnID{3}, Record: []byte("r")},
			Txn: TxnCommit{ReadTimestamp: hlc.Timestamp{WallTime: 9}, Reads: []TxnRead{{Key: []byte("a")}}}},
		{Header: h, Kind: KindTxnRecord, TxnRecord: TxnRecordCmd{ID: TxnID{7}, Op: TxnStage, RecordKey: []byte("r"),
			Timestamp: hlc.Timestamp{WallTime: 1 << 60, Logical: 2}, Heartbeat: 1 << 61, Keys: [][]byte{[]byte("a"), []byte("b")}}},
		{Header: h, Kind: KindTxnRecord, TxnRecord: TxnRecordCmd{ID: TxnID{7}, Op: TxnDelete, RecordKey: []byte("r")}},
		{Header: h, Kind: KindTxnPrevent, TxnPrevent: TxnPrevent{ID: TxnID{7}, Timestamp: hlc.Timestamp{WallTime: 5}, Keys: [][]byte{[]byte("a")}}},
	}
}

func TestRoundTrip(t *testing.T) {
	for _, c := range sampleCommands() {
		data, err := c.Encode(nil)
		if err != nil {
			t.Fatalf("%v: encode: %v", c.Kind, err)
		}
		var got Command
		if err := Decode(data, &got); err != nil {
			t.Fatalf("%v: decode: %v", c.Kind, err)
		}
		if !equal(&c, &got) {
			t.Fatalf("%v: round trip\n got %+v\nwant %+v", c.Kind, got, c)
		}
	}
}

// TestFrozenEncoding pins the bytes of one command: a change here means old
// Raft logs no longer decode.
func TestFrozenEncoding(t *testing.T) {
	c := Command{Header: Header{ProposerNode: 1, ProposalID: 2, ClientID: 3, RequestSeq: 4, ProposerTime: 5},
		Kind: KindPut, Mutations: []Mutation{{Kind: KindPut, Key: []byte("k"), Value: []byte("v")}}}
	got, err := c.Encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	c.Timestamp = hlc.Timestamp{WallTime: 0x0102, Logical: 3}
	got, err = c.Encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{0x02, 1, 2, 3, 4, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 0, 0, 0, 3, 0x01, 1, 'k', 1, 'v'}
	if !bytes.Equal(got, want) {
		t.Fatalf("encoding changed:\n got %x\nwant %x", got, want)
	}
	r := Result{Code: CodeOK, Succeeded: true, Found: true, Value: []byte("v"), NodeID: 9}
	if got, want := r.Encode(nil), []byte{0x02, 0, 3, 9, 1, 'v', 0}; !bytes.Equal(got, want) {
		t.Fatalf("result encoding changed:\n got %x\nwant %x", got, want)
	}
	r.Version = hlc.Timestamp{WallTime: 1, Logical: 2}
	r.CurrentVersion, r.CurrentCreated = hlc.Timestamp{WallTime: 3}, hlc.Timestamp{WallTime: 4}
	want = []byte{0x02, 0, 0x0f, 9, 1, 'v', 0,
		0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2,
		0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0,
		0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0}
	if got := r.Encode(nil); !bytes.Equal(got, want) {
		t.Fatalf("result encoding with versions changed:\n got %x\nwant %x", got, want)
	}
}

// TestVersion1StillDecodes: Raft logs and dedup records written before
// command version 2 keep applying; a version 1 command's timestamp is its
// proposer time.
func TestVersion1StillDecodes(t *testing.T) {
	v1 := []byte{0x01, 1, 2, 3, 4, 5, 0, 0, 0, 0, 0, 0, 0, 0x01, 1, 'k', 1, 'v'}
	var c Command
	if err := Decode(v1, &c); err != nil {
		t.Fatal(err)
	}
	if c.Kind != KindPut || c.ProposerTime != 5 || c.Timestamp != (hlc.Timestamp{WallTime: 5}) ||
		string(c.Mutations[0].Key) != "k" || string(c.Mutations[0].Value) != "v" {
		t.Fatalf("version 1 command decoded as %+v", c)
	}
	if k, ok := PeekKind(v1); !ok || k != KindPut {
		t.Fatalf("PeekKind(version 1) = %v %v", k, ok)
	}
	// Version 2 only: the expect_version flag and close.
	casV1 := []byte{0x01, 1, 2, 3, 4, 5, 0, 0, 0, 0, 0, 0, 0, byte(KindCAS), casExpectVersion, 1, 'k', 0, 0}
	if err := Decode(casV1, &c); !errors.Is(err, ErrMalformed) {
		t.Fatalf("version 1 CAS with expect_version: %v", err)
	}
	closeV1 := append([]byte{0x01, 1, 2, 3, 4, 5, 0, 0, 0, 0, 0, 0, 0, byte(KindClose)}, make([]byte, 12)...)
	if err := Decode(closeV1, &c); !errors.Is(err, ErrMalformed) {
		t.Fatalf("version 1 close: %v", err)
	}
	res, err := DecodeResult([]byte{0x01, 0, 3, 9, 1, 'v', 0})
	if err != nil || !res.Succeeded || !res.Found || string(res.Value) != "v" || res.NodeID != 9 || !res.Version.IsZero() {
		t.Fatalf("version 1 result = %+v, %v", res, err)
	}
	if _, err := DecodeResult([]byte{0x01, 0, 0x04, 0, 0, 0}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("version 1 result with a version 2 flag: %v", err)
	}
}

func TestEncodeRefusesInvalid(t *testing.T) {
	for _, c := range []Command{
		{Kind: KindPut},
		{Kind: KindPut, Mutations: []Mutation{{Kind: KindDelete, Key: []byte("k")}}},
		{Kind: KindBatch},
		{Kind: KindBatch, Mutations: []Mutation{{Kind: KindCAS}}},
		{Kind: 200},
		{Kind: KindRemoveNode},
		{Kind: KindLeaseGrant, Lease: Lease{ID: 1}},
		{Kind: KindLeasePut, Lease: Lease{Deadline: hlc.Timestamp{WallTime: 1}}, Mutations: []Mutation{{Kind: KindPut, Key: []byte("k")}}},
		{Kind: KindLeasePut, Lease: Lease{ID: 1}, Mutations: []Mutation{{Kind: KindPut, Key: []byte("k")}}},
		{Kind: KindLeaseDelete, Lease: Lease{ID: 1}},
		{Kind: KindLeaseBatch, Mutations: []Mutation{{Kind: KindPut, Key: []byte("k")}}},
		{Kind: KindLeaseBatch, Mutations: []Mutation{{Kind: KindLeasePut, Key: []byte("k"), Deadline: hlc.Timestamp{WallTime: 1}}}},
		{Kind: KindLeaseBatch, Mutations: []Mutation{{Kind: KindLeasePut, Key: []byte("k"), Lease: 1}}},
		{Kind: KindBatch, Mutations: []Mutation{{Kind: KindLeasePut, Key: []byte("k"), Lease: 1, Deadline: hlc.Timestamp{WallTime: 1}}}},
		{Kind: KindLeaseCAS, Lease: Lease{ID: 1, Deadline: hlc.Timestamp{WallTime: 1}}, CAS: CAS{Key: []byte("k"), Delete: true}},
		{Kind: KindLeaseCAS, Lease: Lease{ID: 1}, CAS: CAS{Key: []byte("k")}},
		{Kind: KindGC, GC: GC{Threshold: hlc.Timestamp{WallTime: -1}}},
		{Kind: KindTxnWrite, Mutations: []Mutation{{Kind: KindDeleteRange, Key: []byte("a"), Value: []byte("b")}}},
		{Kind: KindTxnResolve, TxnResolve: TxnResolve{Committed: true}},
		{Kind: KindTxnRecord, TxnRecord: TxnRecordCmd{Op: 9}},
		{Kind: KindTxnPrevent},
	} {
		if _, err := c.Encode(nil); err == nil {
			t.Errorf("Encode(%+v) succeeded", c)
		}
	}
}

// TestDecodeNeverPanics feeds truncations and random corruptions of valid
// commands to Decode: each must decode or fail with ErrMalformed (or
// ErrUnknownVersion), never panic.
func TestDecodeNeverPanics(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range sampleCommands() {
		data, err := c.Encode(nil)
		if err != nil {
			t.Fatal(err)
		}
		for n := 0; n < len(data); n++ {
			var got Command
			if err := Decode(data[:n], &got); err == nil {
				t.Fatalf("%v: prefix of %d/%d bytes decoded", c.Kind, n, len(data))
			} else if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnknownVersion) {
				t.Fatalf("%v: prefix %d: unexpected error %v", c.Kind, n, err)
			}
		}
		for i := 0; i < 2000; i++ {
			mut := append([]byte(nil), data...)
			for j := 0; j < 1+rng.IntN(3); j++ {
				mut[rng.IntN(len(mut))] = byte(rng.Uint32())
			}
			var got Command
			if err := Decode(mut, &got); err != nil && !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnknownVersion) {
				t.Fatalf("unexpected error class: %v", err)
			}
		}
	}
	if err := Decode(append([]byte{0x03}, 0), new(Command)); !errors.Is(err, ErrUnknownVersion) {
		t.Fatalf("version 3: %v", err)
	}
	if err := Decode([]byte{0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, byte(KindBatch), 0xff, 0xff, 0xff, 0xff, 0x0f}, new(Command)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("huge batch count: %v", err)
	}
}

func TestResultRoundTrip(t *testing.T) {
	for _, r := range []Result{
		{},
		{Code: CodeOK, Succeeded: true, Found: true, Value: []byte("old"), NodeID: 4},
		{Code: CodeKeyOutOfRange, Message: "key \"z\" outside [a, m)"},
		{Version: hlc.Timestamp{WallTime: 10, Logical: 1}},
		{Found: true, Value: []byte("x"), CurrentVersion: hlc.Timestamp{WallTime: 8}, CurrentCreated: hlc.Timestamp{WallTime: 2, Logical: 5}},
	} {
		got, err := DecodeResult(r.Encode(nil))
		if err != nil {
			t.Fatal(err)
		}
		if got.Code != r.Code || got.Message != r.Message || got.Succeeded != r.Succeeded ||
			got.Found != r.Found || !bytes.Equal(got.Value, r.Value) || got.NodeID != r.NodeID ||
			got.Version != r.Version || got.CurrentVersion != r.CurrentVersion || got.CurrentCreated != r.CurrentCreated {
			t.Fatalf("round trip: got %+v want %+v", got, r)
		}
		if (got.Err() == nil) != (r.Code == CodeOK) {
			t.Fatalf("Err() = %v for code %v", got.Err(), r.Code)
		}
	}
	if _, err := DecodeResult([]byte{1, 0}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("short result: %v", err)
	}
	err := (&Result{Code: CodeDedupWindowExpired}).Err()
	if RejectionCode(err) != CodeDedupWindowExpired {
		t.Fatalf("RejectionCode(%v)", err)
	}
}

func equal(a, b *Command) bool {
	if a.Header != b.Header || a.Kind != b.Kind || len(a.Mutations) != len(b.Mutations) ||
		a.ExpectedGeneration != b.ExpectedGeneration || a.NodeID != b.NodeID ||
		a.LeftRangeID != b.LeftRangeID || a.LeftGeneration != b.LeftGeneration ||
		a.FreezeIndex != b.FreezeIndex || a.RightRangeID != b.RightRangeID || a.TSOWindow != b.TSOWindow || !proto.Equal(a.Right, b.Right) ||
		a.Close != b.Close || a.CAS.ExpectVersion != b.CAS.ExpectVersion || a.CAS.ExpectedVersion != b.CAS.ExpectedVersion {
		return false
	}
	for i := range a.Mutations {
		x, y := a.Mutations[i], b.Mutations[i]
		if x.Kind != y.Kind || !bytes.Equal(x.Key, y.Key) || !bytes.Equal(x.Value, y.Value) {
			return false
		}
	}
	if a.CAS.ExpectAbsent != b.CAS.ExpectAbsent || a.CAS.Delete != b.CAS.Delete ||
		!bytes.Equal(a.CAS.Key, b.CAS.Key) || !bytes.Equal(a.CAS.Expected, b.CAS.Expected) ||
		!bytes.Equal(a.CAS.NewValue, b.CAS.NewValue) {
		return false
	}
	if a.GC.Threshold != b.GC.Threshold || !bytes.Equal(a.GC.Start, b.GC.Start) || !bytes.Equal(a.GC.End, b.GC.End) ||
		a.GC.MaxDeletes != b.GC.MaxDeletes || a.GC.MaxKeys != b.GC.MaxKeys {
		return false
	}
	if a.Txn.ReadTimestamp != b.Txn.ReadTimestamp || len(a.Txn.Reads) != len(b.Txn.Reads) {
		return false
	}
	for i := range a.Txn.Reads {
		x, y := a.Txn.Reads[i], b.Txn.Reads[i]
		if x.Span != y.Span || !bytes.Equal(x.Key, y.Key) || !bytes.Equal(x.End, y.End) {
			return false
		}
	}
	return proto.Equal(a.Node, b.Node) && proto.Equal(a.Descriptor, b.Descriptor)
}

// TestPeekKind: the kind is read without decoding the body.
func TestPeekKind(t *testing.T) {
	for _, c := range sampleCommands() {
		data, err := c.Encode(nil)
		if err != nil {
			t.Fatal(err)
		}
		if k, ok := PeekKind(data); !ok || k != c.Kind {
			t.Fatalf("PeekKind = %v, %v; want %v", k, ok, c.Kind)
		}
	}
	if _, ok := PeekKind([]byte{Version, 0x80}); ok {
		t.Fatal("PeekKind of a truncated header succeeded")
	}
}
