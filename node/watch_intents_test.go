package node

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shaledb/shale/api/kvpb"
)

// TestWatchPushesAbandonedIntent: an intent whose coordinator died before
// writing its record holds the range's feed back; with no reader or
// writer meeting it, the range's leader pushes it once it is older than
// txnExpiry, so a watcher gets the later write of another key. Without
// the push the watcher would wait for good.
func TestWatchPushesAbandonedIntent(t *testing.T) {
	tn := startNode(t, "", Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The range's leader serves the watch: until one is elected the
	// stream ends with NotLeader, and the test opens it again.
	var s kvpb.Watch_WatchClient
	for {
		var err error
		if s, err = kvpb.NewWatchClient(tn.cc).Watch(ctx, &kvpb.WatchRequest{StartKey: []byte("w/"), EndKey: []byte("w0")}); err != nil {
			t.Fatal(err)
		}
		// The stream's first notice: it is registered.
		_, err = s.Recv()
		if err == nil {
			break
		}
		if status.Code(err) != codes.FailedPrecondition || ctx.Err() != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	txn := kvpb.NewTxnClient(tn.cc)
	begin, err := txn.Begin(ctx, &kvpb.TxnBeginRequest{})
	if err != nil {
		t.Fatal(err)
	}
	id := make([]byte, 16)
	rand.Read(id)
	// A coordinator's intent, and then nothing: no record is ever staged.
	w, err := txn.Write(ctx, &kvpb.TxnWriteRequest{TxnId: id, RecordKey: []byte("w/locked"),
		Mutations: []*kvpb.Mutation{putOp([]byte("w/locked"), []byte("never"))}, CommitTimestamp: begin.GetReadTimestamp()})
	if err != nil || !w.GetWritten() {
		t.Fatalf("Write = %v, %v", w, err)
	}
	put(t, tn, "w/other", "1")
	start := time.Now()
	for {
		resp, err := s.Recv()
		if err != nil {
			t.Fatalf("waiting for w/other's event (%v after the put): %v", time.Since(start), err)
		}
		for _, e := range resp.GetEvents() {
			if string(e.GetKey()) == "w/locked" {
				t.Fatalf("the abandoned intent was delivered as a value: %v", e)
			}
			if string(e.GetKey()) == "w/other" {
				if d := time.Since(start); d > txnExpiry+10*time.Second {
					t.Fatalf("w/other's event came %v after the put", d)
				}
				return
			}
		}
	}
}
