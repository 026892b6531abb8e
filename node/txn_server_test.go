package node

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/raft"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/rangesm"
	"github.com/shaledb/shale/storage"
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

// TestTxnFoldedCommitPath: the commit path of a transaction across
// ranges in as few proposals as the protocol allows, on one range: a
// Write that stages the record with its intents, a Record commit that
// resolves the intents with it, and a Resolve of intents already gone,
// as the coordinator's or a reader's arrives after the other's, that
// proposes nothing; a staging Write whose record was aborted writes
// nothing.
func TestTxnFoldedCommitPath(t *testing.T) {
	tn := startNode(t, "", Config{})
	txn := kvpb.NewTxnClient(tn.cc)
	put(t, tn, "a", "0")
	proposals := func() float64 { return sumOf(scrape(t, tn)["shale_raft_proposals_total"]) }
	// The node proposes on its own now and then (the oracle's windows),
	// so a count of 0 is looked for over a few tries.
	begin, err := txn.Begin(ctxT(t), &kvpb.TxnBeginRequest{})
	if err != nil {
		t.Fatal(err)
	}
	c0 := begin.GetReadTimestamp()
	bound := &kvpb.Timestamp{WallNanos: c0.GetWallNanos() + int64(time.Second)}
	id := []byte("0123456789abcdef")
	write := func(id []byte) *kvpb.TxnWriteResponse {
		t.Helper()
		w, err := txn.Write(ctxT(t), &kvpb.TxnWriteRequest{TxnId: id, RecordKey: []byte("a"), CommitTimestamp: c0,
			Mutations:  []*kvpb.Mutation{{Op: &kvpb.Mutation_Put{Put: &kvpb.PutOp{Key: []byte("a"), Value: []byte("1")}}}},
			StageBound: bound, StageKeys: [][]byte{[]byte("a"), []byte("z")}, HeartbeatUnixNanos: time.Now().UnixNano()})
		if err != nil {
			t.Fatalf("staging Write: %v", err)
		}
		return w
	}
	record := func(id []byte, op kvpb.TxnRecordOp, ts *kvpb.Timestamp, ks ...[]byte) *kvpb.TxnRecordResponse {
		t.Helper()
		rec, err := txn.Record(ctxT(t), &kvpb.TxnRecordRequest{TxnId: id, RecordKey: []byte("a"), Op: op, Timestamp: ts, Keys: ks})
		if err != nil {
			t.Fatalf("record %v: %v", op, err)
		}
		return rec
	}
	w := write(id)
	if !w.GetWritten() {
		t.Fatalf("staging Write: %v", w)
	}
	if rec := record(id, kvpb.TxnRecordOp_TXN_RECORD_QUERY, nil); rec.GetStatus() != kvpb.TxnStatus_TXN_STATUS_STAGING ||
		len(rec.GetKeys()) != 2 || rec.GetTimestamp().GetWallNanos() != bound.GetWallNanos() {
		t.Fatalf("record after the staging Write: %v", rec)
	}
	if rec := record(id, kvpb.TxnRecordOp_TXN_RECORD_COMMIT, w.GetVersion(), []byte("a")); rec.GetStatus() != kvpb.TxnStatus_TXN_STATUS_COMMITTED {
		t.Fatalf("commit: %v", rec)
	}
	if v, _ := get(t, tn, "a"); v != "1" {
		t.Fatalf("a = %q after the commit resolved it, want 1", v)
	}
	var n float64
	for try := 0; try < 5; try++ {
		before := proposals()
		if _, err := txn.Resolve(ctxT(t), &kvpb.TxnResolveRequest{TxnId: id, Committed: true, CommitTimestamp: w.GetVersion(),
			Keys: [][]byte{[]byte("a")}}); err != nil {
			t.Fatal(err)
		}
		if n = proposals() - before; n == 0 {
			break
		}
	}
	if n != 0 {
		t.Errorf("a resolution of intents already resolved proposed %v entries, want 0", n)
	}
	// A record aborted first (a pusher that took the coordinator for
	// gone): the staging Write writes nothing.
	other := []byte("fedcba9876543210")
	record(other, kvpb.TxnRecordOp_TXN_RECORD_ABORT, nil)
	if w := write(other); w.GetWritten() || w.GetReadChanged() == nil {
		t.Fatalf("staging Write on an aborted record: %v", w)
	}
	if _, err := txn.Write(ctxT(t), &kvpb.TxnWriteRequest{TxnId: other, RecordKey: []byte("zz"), CommitTimestamp: c0,
		Mutations:  []*kvpb.Mutation{{Op: &kvpb.Mutation_Put{Put: &kvpb.PutOp{Key: []byte("b"), Value: []byte("1")}}}},
		StageBound: bound}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a staging Write without the intents' keys: %v, want InvalidArgument", err)
	}
	if v, _ := get(t, tn, "a"); v != "1" {
		t.Fatalf("a = %q after the refused write, want 1", v)
	}
}

// TestResolveDuringMergeKeepsTheIntent: a resolution of intents the
// right-hand range held, served by the left-hand range while that range
// applies their merge, must not answer "resolved" while the intent
// stands. It did: replication publishes the merged descriptor before it
// writes the merge's batch (which moves the right-hand range's intents
// into the left-hand range's lock table), the resolution's read barrier
// waited for the commit index published before the merge, and its look
// at the lock table found nothing under the left-hand range's ID while
// the descriptor in memory covered the key: it took the missing entry
// for a resolved intent. The coordinator then deleted the record, and
// the next reader, finding the record missing, aborted it and dropped
// the committed write (a lost write in TestChaosShort/split-merge-storm;
// a split opens the same window the other way round, the intents moved
// in the engine before the shorter descriptor is published). A
// resolution answered without an error must leave no intent.
func TestResolveDuringMergeKeepsTheIntent(t *testing.T) {
	var onWrite atomic.Pointer[func(*storage.Batch)]
	tn := startNode(t, "", Config{raftTesting: raft.TestingKnobs{OnEngineWrite: func(_ uint64, b *storage.Batch) {
		if f := onWrite.Load(); f != nil {
			(*f)(b)
		}
	}}})
	ctx := ctxT(t)
	txn := kvpb.NewTxnClient(tn.cc)
	put(t, tn, "a", "0") // a leader first
	if _, err := tn.admin.Split(ctx, &kvpb.SplitRequest{SplitKey: []byte("m")}); err != nil {
		t.Fatal(err)
	}
	left, right := tn.n.rangeIDForKey([]byte("a")), tn.n.rangeIDForKey([]byte("z"))
	if left == right {
		t.Fatalf("a and z in one range (%d) after the split", left)
	}
	id := []byte("0123456789abcdef")
	w := stageAndCommitZ(t, ctx, txn, id, nil)
	resolve := func(rangeID uint64, timeout time.Duration) error {
		rctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		_, err := txn.Resolve(rctx, &kvpb.TxnResolveRequest{Header: &kvpb.RequestHeader{RangeId: rangeID}, TxnId: id,
			Committed: true, CommitTimestamp: w.GetVersion(), Keys: [][]byte{[]byte("z")}})
		return err
	}
	// When the left-hand range writes the merge's batch (the merged
	// descriptor published, the batch not yet in the engine), a
	// resolution of z arrives there; the batch waits for its answer, 1 s
	// at most (a resolution that proposes waits for the batch).
	merged := keys.MergedKey(left, right)
	var mu sync.Mutex // the hook runs on the replica's goroutine
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
		during = resolve(left, time.Second)
	}
	onWrite.Store(&hook)
	// A linearizable read of the left-hand range first, so that its
	// leader holds a lease through the merge (its barrier then waits for
	// the commit index published before the merge, as under load).
	if v, _ := get(t, tn, "a"); v != "0" {
		t.Fatalf("a = %q, want 0", v)
	}
	if _, err := tn.admin.Merge(ctx, &kvpb.MergeRequest{Key: []byte("a")}); err != nil {
		t.Fatalf("Merge: %v", err)
	}
	onWrite.Store(nil)
	mu.Lock()
	defer mu.Unlock()
	if !served {
		t.Fatal("no resolution was sent while the merge's batch was written")
	}
	_, held, err := rangesm.ReadIntent(tn.n.db, left, []byte("z"))
	if err != nil {
		t.Fatal(err)
	}
	if during == nil && held {
		t.Fatal("the resolution answered without an error while z's intent stands in the merged range's lock table")
	}
	t.Logf("the resolution during the merge: %v (intent held after: %v)", during, held)
	if err := resolve(0, 10*time.Second); err != nil {
		t.Fatalf("the resolution sent again: %v", err)
	}
	if _, held, err := rangesm.ReadIntent(tn.n.db, left, []byte("z")); err != nil || held {
		t.Fatalf("z's intent after the resolution sent again: held %v, %v", held, err)
	}
	if v, _ := get(t, tn, "z"); v != "1" {
		t.Fatalf("z = %q, want 1", v)
	}
}

// stageAndCommitZ writes transaction id's intent on z, staged with its
// record on z (the folded commit path), runs between (nil: nothing), and
// marks the record COMMITTED; it returns the write's answer.
func stageAndCommitZ(t *testing.T, ctx context.Context, txn kvpb.TxnClient, id []byte, between func()) *kvpb.TxnWriteResponse {
	t.Helper()
	begin, err := txn.Begin(ctx, &kvpb.TxnBeginRequest{})
	if err != nil {
		t.Fatal(err)
	}
	c0 := begin.GetReadTimestamp()
	w, err := txn.Write(ctx, &kvpb.TxnWriteRequest{TxnId: id, RecordKey: []byte("z"), CommitTimestamp: c0,
		Mutations:  []*kvpb.Mutation{{Op: &kvpb.Mutation_Put{Put: &kvpb.PutOp{Key: []byte("z"), Value: []byte("1")}}}},
		StageBound: &kvpb.Timestamp{WallNanos: c0.GetWallNanos() + int64(time.Second)}, StageKeys: [][]byte{[]byte("z")},
		HeartbeatUnixNanos: time.Now().UnixNano()})
	if err != nil || !w.GetWritten() {
		t.Fatalf("staging Write = %v, %v", w, err)
	}
	if between != nil {
		between()
	}
	rec, err := txn.Record(ctx, &kvpb.TxnRecordRequest{TxnId: id, RecordKey: []byte("z"), Op: kvpb.TxnRecordOp_TXN_RECORD_COMMIT,
		Timestamp: w.GetVersion()})
	if err != nil || rec.GetStatus() != kvpb.TxnStatus_TXN_STATUS_COMMITTED {
		t.Fatalf("commit = %v, %v", rec, err)
	}
	return w
}
