package tests

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/shaledb/shale/api/kvpb"
)

// TestTxnWriteAnsweredContended: a transaction's Write is answered
// contended when, as it is answered, someone waits on the leader for a
// key it wrote (here a locking read queued behind the writer's own lock,
// which the write ends, and now behind its intent), and not contended
// when nobody waits. The coordinator resolves a contended range's intents
// as soon as it commits instead of leaving them foldDelay for a later
// write of its own to carry (client/txn_across.go, finish): the waiter
// waits for exactly that resolution (docs/transactions.md, "Waiting and
// deadlocks").
func TestTxnWriteAnsweredContended(t *testing.T) {
	c := newCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	newID := func() []byte {
		id := make([]byte, 16)
		rand.Read(id)
		return id
	}
	begin, err := rawTxn(t, c, ctx, func(tc kvpb.TxnClient) (*kvpb.TxnBeginResponse, error) {
		return tc.Begin(ctx, &kvpb.TxnBeginRequest{Header: &kvpb.RequestHeader{}})
	})
	if err != nil {
		t.Fatal(err)
	}
	lock := func(ctx context.Context, id, k []byte) (*kvpb.TxnLockResponse, error) {
		return rawTxn(t, c, ctx, func(tc kvpb.TxnClient) (*kvpb.TxnLockResponse, error) {
			return tc.Lock(ctx, &kvpb.TxnLockRequest{Header: &kvpb.RequestHeader{}, TxnId: id, HomeKey: k,
				Priority: begin.GetReadTimestamp(), Keys: [][]byte{k}})
		})
	}
	write := func(id, k []byte) *kvpb.TxnWriteResponse {
		resp, err := rawTxn(t, c, ctx, func(tc kvpb.TxnClient) (*kvpb.TxnWriteResponse, error) {
			return tc.Write(ctx, &kvpb.TxnWriteRequest{Header: &kvpb.RequestHeader{}, TxnId: id, RecordKey: k,
				Mutations:       []*kvpb.Mutation{{Op: &kvpb.Mutation_Put{Put: &kvpb.PutOp{Key: k, Value: []byte("v")}}}},
				CommitTimestamp: begin.GetReadTimestamp()})
		})
		if err != nil || !resp.GetWritten() {
			t.Fatalf("write of %s: %v %v", k, resp, err)
		}
		return resp
	}

	// Nobody waits: not contended.
	if resp := write(newID(), []byte("cw/free")); resp.GetContended() {
		t.Fatal("a write nobody waits for was answered contended")
	}

	// The holder locks k; a second transaction queues for the lock.
	k := []byte("cw/hot")
	holder, waiter := newID(), newID()
	if resp, err := lock(ctx, holder, k); err != nil || resp.GetLocked() != 1 {
		t.Fatalf("the holder's lock: %v %v", resp, err)
	}
	w0 := c.metricSum("shale_txn_lock_waits_total")
	wctx, stopWaiter := context.WithCancel(ctx)
	defer stopWaiter()
	go func() { _, _ = lock(wctx, waiter, k) }()
	for c.metricSum("shale_txn_lock_waits_total") == w0 {
		select {
		case <-ctx.Done():
			t.Fatal("the second lock never queued")
		case <-time.After(10 * time.Millisecond):
		}
	}
	if resp := write(holder, k); !resp.GetContended() {
		t.Fatal("the holder's write was not answered contended with a locking read queued for its key")
	}
}
