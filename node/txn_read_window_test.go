package node

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/raft"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/storage"
)

// TestReadDuringMergeMeetsTheIntent: a read of a key the right-hand range
// held, served by the left-hand range while that range writes their
// merge's batch, at a timestamp at or above the key's intent, must not
// answer as if there were no intent. It did: the merged descriptor was
// published before the batch that moves the right-hand range's intents
// into the left-hand range's lock table was written, so the read found
// the key in range and no intent under the left-hand range's ID, and
// answered without the write of a transaction committed below it (a
// hidden write, the G-single shape list-append reports). The
// descriptor now grows only once the batch is in the engine (raft
// apply.go): the read is sent the old descriptor and goes elsewhere.
func TestReadDuringMergeMeetsTheIntent(t *testing.T) {
	var onWrite atomic.Pointer[func(*storage.Batch)]
	tn := startNode(t, "", Config{raftTesting: raft.TestingKnobs{OnEngineWrite: func(_ uint64, b *storage.Batch) {
		if f := onWrite.Load(); f != nil {
			(*f)(b)
		}
	}}})
	ctx := ctxT(t)
	txn := kvpb.NewTxnClient(tn.cc)
	put(t, tn, "a", "0")
	if _, err := tn.admin.Split(ctx, &kvpb.SplitRequest{SplitKey: []byte("m")}); err != nil {
		t.Fatal(err)
	}
	left, right := tn.n.rangeIDForKey([]byte("a")), tn.n.rangeIDForKey([]byte("z"))
	id := []byte("0123456789abcdef")
	var pa *kvpb.PutResponse
	w := stageAndCommitZ(t, ctx, txn, id, func() {
		// The left-hand range's frontier above the intent's p.
		var err error
		if pa, err = tn.kv.Put(ctx, &kvpb.PutRequest{Key: []byte("a"), Value: []byte("1")}); err != nil {
			t.Fatal(err)
		}
	})
	merged := keys.MergedKey(left, right)
	var mu sync.Mutex
	var got *kvpb.GetResponse
	var during error
	served := false
	hook := func(b *storage.Batch) {
		mu.Lock()
		defer mu.Unlock()
		if served {
			return
		}
		if !putsKey(b, merged) {
			return
		}
		served = true
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		got, during = tn.kv.Get(rctx, &kvpb.GetRequest{Header: &kvpb.RequestHeader{RangeId: left, ReadTimestamp: pa.GetVersion()}, Key: []byte("z")})
	}
	onWrite.Store(&hook)
	if _, err := tn.admin.Merge(ctx, &kvpb.MergeRequest{Key: []byte("a")}); err != nil {
		t.Fatalf("Merge: %v", err)
	}
	onWrite.Store(nil)
	mu.Lock()
	defer mu.Unlock()
	if !served {
		t.Fatal("no read was sent while the merge's batch was written")
	}
	t.Logf("read of z at %v (intent at %v, committed) during the merge: %v, %v", pa.GetVersion(), w.GetVersion(), got, during)
	if during == nil && string(got.GetValue()) != "1" {
		t.Fatalf("the read at %v answered %q (found %v) past z's intent at %v of a committed transaction", pa.GetVersion(), got.GetValue(), got.GetFound(), w.GetVersion())
	}
}

// TestRecordQueryAfterMergeIsNotMissing: a QUERY of a transaction record
// whose read barrier passed on the right-hand range before that range
// merged into its left-hand neighbour, and whose read of the record came
// after the merge, must not answer "missing": the merge moved the record
// to the left-hand range's ID. It did: the record was looked up under
// the right-hand range's ID and the key checked against the retired
// replica's descriptor, which still covered it. The query here is
// answered from the right-hand replica taken before the merge, as it is
// when the merge applies between its barrier and its read.
func TestRecordQueryAfterMergeIsNotMissing(t *testing.T) {
	tn := startNode(t, "", Config{})
	ctx := ctxT(t)
	txn := kvpb.NewTxnClient(tn.cc)
	put(t, tn, "a", "0")
	if _, err := tn.admin.Split(ctx, &kvpb.SplitRequest{SplitKey: []byte("m")}); err != nil {
		t.Fatal(err)
	}
	right := tn.n.rangeIDForKey([]byte("z"))
	begin, err := txn.Begin(ctx, &kvpb.TxnBeginRequest{})
	if err != nil {
		t.Fatal(err)
	}
	c0 := begin.GetReadTimestamp()
	id := command.TxnID{0x51}
	w, err := txn.Write(ctx, &kvpb.TxnWriteRequest{TxnId: id[:], RecordKey: []byte("z"), CommitTimestamp: c0,
		Mutations:  []*kvpb.Mutation{{Op: &kvpb.Mutation_Put{Put: &kvpb.PutOp{Key: []byte("z"), Value: []byte("1")}}}},
		StageBound: &kvpb.Timestamp{WallNanos: c0.GetWallNanos() + int64(time.Second)}, StageKeys: [][]byte{[]byte("z")},
		HeartbeatUnixNanos: time.Now().UnixNano()})
	if err != nil || !w.GetWritten() {
		t.Fatalf("staging Write = %v, %v", w, err)
	}
	rr, err := tn.n.store.Replica(right)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := tn.n.readBarrier(ctx, "TxnRecord", rr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tn.admin.Merge(ctx, &kvpb.MergeRequest{Key: []byte("a")}); err != nil {
		t.Fatalf("Merge: %v", err)
	}
	resp, err := tn.n.queriedRecord("TxnRecord", &kvpb.RequestHeader{}, rr, idx, id, []byte("z"))
	if err == nil {
		t.Fatalf("the query read after the merge answered %v from the merged-away range", resp.GetStatus())
	}
	t.Logf("the query read after the merge: %v", err)
	rec, err := txn.Record(ctx, &kvpb.TxnRecordRequest{TxnId: id[:], RecordKey: []byte("z"), Op: kvpb.TxnRecordOp_TXN_RECORD_QUERY})
	if err != nil || rec.GetStatus() != kvpb.TxnStatus_TXN_STATUS_STAGING {
		t.Fatalf("the query sent again = %v, %v; want STAGING", rec, err)
	}
}
