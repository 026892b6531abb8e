package tests

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/client"
)

// rawTxn sends one Txn call to each node of c in turn until one serves
// it (the range's leader), for a test that plays a transaction's
// coordinator itself.
func rawTxn[T any](t *testing.T, c *testCluster, ctx context.Context, call func(kvpb.TxnClient) (T, error)) (T, error) {
	t.Helper()
	var zero T
	var errs []error
	for round := 0; round < 20; round++ {
		for _, cn := range c.all() {
			cc, err := grpc.NewClient("passthrough:///"+cn.grpcAddr, grpc.WithTransportCredentials(c.dialCreds()))
			if err != nil {
				t.Fatal(err)
			}
			out, err := call(kvpb.NewTxnClient(cc))
			cc.Close()
			if err == nil {
				return out, nil
			}
			errs = append(errs, err)
		}
		select {
		case <-ctx.Done():
			return zero, errors.Join(append(errs, ctx.Err())...)
		case <-time.After(50 * time.Millisecond):
		}
	}
	return zero, errors.Join(errs...)
}

// TestTxnDeadlockBroken builds a deadlock of two transactions across two
// ranges on a 3-node cluster, playing both coordinators through the Txn
// service: T1 holds an intent on a (left range), T2 on z (right range),
// both records STAGING and heartbeating; then T1 writes z and T2 writes
// a, each waiting on the other's intent. The push graph finds the cycle
// and the younger, T2, gives up (its Write answered with a deadlock
// conflict) well before the wait's bound; once T2's coordinator aborts
// it, T1's waiting Write goes in and T1 commits.
func TestTxnDeadlockBroken(t *testing.T) {
	c := newCluster(t, 3)
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, _, err := cl.Split(ctx, []byte("dl/m")); err != nil {
		t.Fatal(err)
	}
	a, z := []byte("dl/a"), []byte("dl/z")
	for _, k := range [][]byte{a, z} {
		if err := cl.Put(ctx, k, []byte("0")); err != nil {
			t.Fatal(err)
		}
	}
	type txn struct {
		id     []byte
		record []byte
		c0     *kvpb.Timestamp
	}
	begin := func(record []byte) txn {
		b, err := rawTxn(t, c, ctx, func(tc kvpb.TxnClient) (*kvpb.TxnBeginResponse, error) {
			return tc.Begin(ctx, &kvpb.TxnBeginRequest{Header: &kvpb.RequestHeader{}})
		})
		if err != nil {
			t.Fatal(err)
		}
		id := make([]byte, 16)
		rand.Read(id)
		return txn{id: id, record: record, c0: b.GetReadTimestamp()}
	}
	put := func(k []byte, v string) []*kvpb.Mutation {
		return []*kvpb.Mutation{{Op: &kvpb.Mutation_Put{Put: &kvpb.PutOp{Key: k, Value: []byte(v)}}}}
	}
	write := func(ctx context.Context, tx txn, k []byte, v string) (*kvpb.TxnWriteResponse, error) {
		return rawTxn(t, c, ctx, func(tc kvpb.TxnClient) (*kvpb.TxnWriteResponse, error) {
			return tc.Write(ctx, &kvpb.TxnWriteRequest{Header: &kvpb.RequestHeader{}, TxnId: tx.id, RecordKey: tx.record,
				Mutations: put(k, v), CommitTimestamp: tx.c0})
		})
	}
	record := func(tx txn, op kvpb.TxnRecordOp, ts *kvpb.Timestamp) *kvpb.TxnRecordResponse {
		var ks [][]byte // the intents' keys, for a stage (a commit's would be resolved with it)
		if op == kvpb.TxnRecordOp_TXN_RECORD_STAGE {
			ks = [][]byte{a, z}
		}
		rec, err := rawTxn(t, c, ctx, func(tc kvpb.TxnClient) (*kvpb.TxnRecordResponse, error) {
			return tc.Record(ctx, &kvpb.TxnRecordRequest{Header: &kvpb.RequestHeader{}, TxnId: tx.id, RecordKey: tx.record, Op: op,
				Timestamp: ts, HeartbeatUnixNanos: time.Now().UnixNano(), Keys: ks})
		})
		if err != nil {
			t.Fatalf("record op %v: %v", op, err)
		}
		return rec
	}
	resolve := func(tx txn, committed bool, k []byte) {
		_, err := rawTxn(t, c, ctx, func(tc kvpb.TxnClient) (*kvpb.TxnResolveResponse, error) {
			return tc.Resolve(ctx, &kvpb.TxnResolveRequest{Header: &kvpb.RequestHeader{}, TxnId: tx.id, Committed: committed,
				CommitTimestamp: tx.c0, Keys: [][]byte{k}})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	t1 := begin(a)
	t2 := begin(z) // younger: the later commit candidate
	var t1First *kvpb.Timestamp
	for _, s := range []struct {
		tx txn
		k  []byte
	}{{t1, a}, {t2, z}} {
		resp, err := write(ctx, s.tx, s.k, "first")
		if err != nil || !resp.GetWritten() {
			t.Fatalf("first intent on %s: %v %v", s.k, resp, err)
		}
		if s.k[3] == 'a' {
			t1First = resp.GetVersion()
		}
		if rec := record(s.tx, kvpb.TxnRecordOp_TXN_RECORD_STAGE, s.tx.c0); rec.GetStatus() != kvpb.TxnStatus_TXN_STATUS_STAGING {
			t.Fatalf("stage: %v", rec)
		}
	}
	// Both coordinators alive: heartbeats until the end.
	hbCtx, stopHB := context.WithCancel(ctx)
	defer stopHB()
	for _, tx := range []txn{t1, t2} {
		go func() {
			tick := time.NewTicker(500 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-hbCtx.Done():
					return
				case <-tick.C:
					_, _ = rawTxn(t, c, hbCtx, func(tc kvpb.TxnClient) (*kvpb.TxnRecordResponse, error) {
						return tc.Record(hbCtx, &kvpb.TxnRecordRequest{Header: &kvpb.RequestHeader{}, TxnId: tx.id, RecordKey: tx.record,
							Op: kvpb.TxnRecordOp_TXN_RECORD_HEARTBEAT, HeartbeatUnixNanos: time.Now().UnixNano()})
					})
				}
			}
		}()
	}
	before := c.metricSum("shale_txn_deadlocks_total")
	type answer struct {
		resp *kvpb.TxnWriteResponse
		err  error
		took time.Duration
	}
	// Each Write may wait up to three quarters of its 8 s deadline: an
	// answer well under that came from the push graph, not the bound.
	send := func(tx txn, k []byte) <-chan answer {
		ch := make(chan answer, 1)
		go func() {
			wctx, cancel := context.WithTimeout(ctx, 8*time.Second)
			defer cancel()
			start := time.Now()
			resp, err := write(wctx, tx, k, "second")
			ch <- answer{resp, err, time.Since(start)}
		}()
		return ch
	}
	ans1, ans2 := send(t1, z), send(t2, a)
	var got2 answer
	select {
	case got2 = <-ans2:
	case got1 := <-ans1:
		t.Fatalf("the older transaction's write was answered first: %+v", got1)
	}
	if got2.err != nil || got2.resp.GetWritten() || !strings.Contains(got2.resp.GetReadChanged().GetReason(), "deadlock") {
		t.Fatalf("the younger transaction's write: %v %v, want a deadlock conflict", got2.resp, got2.err)
	}
	if got2.took > 4*time.Second {
		t.Fatalf("the deadlock was broken after %v, by the wait's bound rather than the push graph", got2.took)
	}
	t.Logf("deadlock broken in %v: %s", got2.took.Round(time.Millisecond), got2.resp.GetReadChanged().GetReason())
	if n := c.metricSum("shale_txn_deadlocks_total"); n <= before {
		t.Fatalf("shale_txn_deadlocks_total %v, was %v", n, before)
	}
	// T2's coordinator gives up its attempt: T1's write, waiting on
	// T2's intent on z, goes in as soon as that intent is dropped.
	if rec := record(t2, kvpb.TxnRecordOp_TXN_RECORD_ABORT, nil); rec.GetStatus() != kvpb.TxnStatus_TXN_STATUS_ABORTED {
		t.Fatalf("abort of the younger: %v", rec)
	}
	resolve(t2, false, z)
	got1 := <-ans1
	if got1.err != nil || !got1.resp.GetWritten() {
		t.Fatalf("the older transaction's write after the younger gave up: %v %v", got1.resp, got1.err)
	}
	// T1 commits at the higher of its intents' versions (its write on z
	// went in above T2's, so above C0).
	ct := got1.resp.GetVersion()
	if f := t1First; f.GetWallNanos() > ct.GetWallNanos() || (f.GetWallNanos() == ct.GetWallNanos() && f.GetLogical() > ct.GetLogical()) {
		ct = f
	}
	t1.c0 = ct
	if rec := record(t1, kvpb.TxnRecordOp_TXN_RECORD_COMMIT, ct); rec.GetStatus() != kvpb.TxnStatus_TXN_STATUS_COMMITTED {
		t.Fatalf("commit of the older: %v", rec)
	}
	stopHB()
	resolve(t1, true, a)
	resolve(t1, true, z)
	for k, want := range map[string]string{"dl/a": "first", "dl/z": "second"} {
		v, _, err := cl.Get(ctx, []byte(k))
		if err != nil || string(v) != want {
			t.Fatalf("%s after the older committed: %q %v, want %q", k, v, err, want)
		}
	}
}

// BenchmarkTxnContentionBlind runs blind transfers (each transaction
// puts two of 10 hot accounts, one in each of two ranges, without
// reading them) from 64 clients on a 3-node cluster: every conflict is
// on an intent, which a write waits for in the key's queue instead of
// aborting its attempt (docs/transactions.md, "Waiting and deadlocks"),
// and two transactions putting the same two accounts in opposite orders
// deadlock, which the push graph breaks. b.N is the number of
// transactions; it reports retries/commit (runs of the function beyond
// the first), and the nodes' lock waits, wait timeouts and deadlocks
// broken per commit. Counts, not timing, are what to compare on a shared
// machine:
//
//	go test ./tests -run '^$' -bench TxnContentionBlind -benchtime 300x -v
func BenchmarkTxnContentionBlind(b *testing.B) {
	const clients, accounts = 64, 10
	c := newCluster(b, 3)
	cl := c.client()
	ctx := context.Background()
	if _, _, err := cl.Split(ctx, []byte("hot/5")); err != nil {
		b.Fatal(err)
	}
	ks := make([][]byte, accounts)
	for i := range ks {
		ks[i] = []byte(fmt.Sprintf("hot/%d", i))
	}
	metrics := func() (waits, timeouts, deadlocks float64) {
		return c.metricSum("shale_txn_lock_waits_total"), c.metricSum("shale_txn_lock_wait_timeouts_total"), c.metricSum("shale_txn_deadlocks_total")
	}
	w0, t0, d0 := metrics()
	var left, runs, commits atomic.Int64
	left.Store(int64(b.N))
	b.ResetTimer()
	var wg sync.WaitGroup
	for w := 0; w < clients; w++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := mrand.New(mrand.NewPCG(seed, 2))
			for n := left.Add(-1); n >= 0; n = left.Add(-1) {
				i := rng.IntN(accounts / 2)            // left range
				j := accounts/2 + rng.IntN(accounts/2) // right range
				if rng.IntN(2) == 0 {
					i, j = j, i // the record on either side
				}
				v := []byte(strconv.FormatInt(n, 10))
				err := cl.Txn(ctx, func(tx *client.Tx) error {
					runs.Add(1)
					if err := tx.Put(ks[i], v); err != nil {
						return err
					}
					return tx.Put(ks[j], v)
				})
				if err != nil {
					b.Error(err)
					return
				}
				commits.Add(1)
			}
		}(uint64(w))
	}
	wg.Wait()
	b.StopTimer()
	n := float64(commits.Load())
	if n == 0 {
		b.Fatal("no transaction committed")
	}
	w1, t1, d1 := metrics()
	b.ReportMetric(float64(runs.Load())/n-1, "retries/commit")
	b.ReportMetric((w1-w0)/n, "waits/commit")
	b.ReportMetric((t1-t0)/n, "wait-timeouts/commit")
	b.ReportMetric((d1-d0)/n, "deadlocks/commit")
}
