package tests

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/shaledb/shale/client"
)

// BenchmarkTxnOneRange compares one-range transactions with plain Batch
// writes on a 3-node cluster, every client on its own pair of keys of one
// range (no conflicts: the cost of the protocol, not of contention):
//
//   - batch: Batch(put a, put b), the baseline;
//   - txn-blind: Txn that puts a and b without reading (one call, like
//     the batch: no read timestamp is taken);
//   - txn-transfer: Txn that reads a and b and writes both (the bank's
//     transfer: a timestamp, two reads at it, a commit that validates
//     them).
//
// Run it alone on a quiet machine (docs/benchmarks.md, "Transactions"):
//
//	go test ./tests -run '^$' -bench TxnOneRange -benchtime 5s -cpu 64 -v
//
// -cpu sets the clients (RunParallel runs GOMAXPROCS of them).
func BenchmarkTxnOneRange(b *testing.B) {
	c := newCluster(b, 3)
	cl := c.client()
	ctx := context.Background()
	var next atomic.Int64
	pair := func() (x, y []byte) {
		n := next.Add(1)
		return []byte(fmt.Sprintf("bench/%06d/a", n)), []byte(fmt.Sprintf("bench/%06d/b", n))
	}
	val := []byte("100")
	b.Run("batch", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			x, y := pair()
			for pb.Next() {
				if err := cl.Batch(ctx, client.PutOp(x, val), client.PutOp(y, val)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("txn-blind", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			x, y := pair()
			for pb.Next() {
				if err := cl.Txn(ctx, func(tx *client.Tx) error {
					if err := tx.Put(x, val); err != nil {
						return err
					}
					return tx.Put(y, val)
				}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("txn-transfer", func(b *testing.B) {
		benchTransfers(ctx, b, c, cl, pair)
	})
}

// benchTransfers runs the bank's transfer (read both keys at R, write
// both) in parallel, every client on its own pair of keys from pair. It
// reports retries/commit: runs of the transaction's function beyond the
// first, per committed transfer (the clients share no keys, so a retry
// is the protocol's, not contention's: an attempt across ranges whose
// intents were pushed above its commit candidate used to be one). It
// also reports what a transfer costs the cluster, in counts that do not
// depend on the machine's load (docs/transactions.md, "What it costs"):
//
//   - proposals/op: entries handed to Raft on all nodes
//     (shale_raft_proposals_total), per committed transfer: the
//     transaction's commands and its resolution, and those of anyone
//     who had to resolve its intents for it;
//   - rpcs/op: KV and Txn calls served by all nodes (grpc_server_started_total,
//     multiplexed calls included, node-to-node pushes too), per committed
//     transfer;
//   - closes/op: the Close commands among the proposals (reads at a
//     fresh R on a range whose frontier is below it);
//   - intent-reads/op: reads that met another transaction's intent
//     (shale_txn_reads_met_intents_total): with every client on its own
//     keys, its previous transfer's, not yet resolved.
//
// The setup's writes are counted too (two per client, a small share at
// any useful b.N).
func benchTransfers(ctx context.Context, b *testing.B, c *testCluster, cl *client.Client, pair func() (x, y []byte)) {
	var attempts, commits atomic.Int64
	props0, rpcs0 := clusterCounts(c)
	closes0 := c.metricSum("shale_closed_timestamps_proposed_total")
	met0 := c.metricSum("shale_txn_reads_met_intents_total")
	defer func() {
		if n := commits.Load(); n > 0 {
			b.ReportMetric(float64(attempts.Load()-n)/float64(n), "retries/commit")
			props, rpcs := clusterCounts(c)
			b.ReportMetric((props-props0)/float64(n), "proposals/op")
			b.ReportMetric((rpcs-rpcs0)/float64(n), "rpcs/op")
			b.ReportMetric((c.metricSum("shale_closed_timestamps_proposed_total")-closes0)/float64(n), "closes/op")
			b.ReportMetric((c.metricSum("shale_txn_reads_met_intents_total")-met0)/float64(n), "intent-reads/op")
		}
	}()
	b.RunParallel(func(pb *testing.PB) {
		x, y := pair()
		if err := cl.Batch(ctx, client.PutOp(x, []byte("1000000"))); err != nil {
			b.Error(err)
			return
		}
		if err := cl.Batch(ctx, client.PutOp(y, []byte("0"))); err != nil {
			b.Error(err)
			return
		}
		for pb.Next() {
			if err := cl.Txn(ctx, func(tx *client.Tx) error {
				attempts.Add(1)
				return transfer(ctx, tx, x, y, 1)
			}); err != nil {
				b.Error(err)
				return
			}
			commits.Add(1)
		}
	})
}

// clusterCounts returns, summed over the running nodes, the entries
// handed to Raft and the KV and Txn calls served (unary and multiplexed;
// not the streams themselves).
func clusterCounts(c *testCluster) (proposals, rpcs float64) {
	for _, cn := range c.all() {
		if !cn.running() {
			continue
		}
		resp, err := http.Get("http://" + cn.httpAddr + "/metrics")
		if err != nil {
			c.t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			c.t.Fatal(err)
		}
		for _, line := range strings.Split(string(body), "\n") {
			sp := strings.LastIndexByte(line, ' ')
			if sp < 0 || strings.HasPrefix(line, "#") {
				continue
			}
			v, err := strconv.ParseFloat(line[sp+1:], 64)
			if err != nil {
				continue
			}
			switch {
			case strings.HasPrefix(line, "shale_raft_proposals_total "):
				proposals += v
			case strings.HasPrefix(line, "grpc_server_started_total{") && strings.Contains(line, `grpc_type="unary"`) &&
				(strings.Contains(line, `grpc_service="shale.kv.v1.KV"`) || strings.Contains(line, `grpc_service="shale.kv.v1.Txn"`)):
				rpcs += v
			}
		}
	}
	return proposals, rpcs
}

// transfer moves amount from x to y in tx.
func transfer(ctx context.Context, tx *client.Tx, x, y []byte, amount int) error {
	rs, err := tx.BatchGet(ctx, [][]byte{x, y})
	if err != nil {
		return err
	}
	from, _ := strconv.Atoi(string(rs[0].Value))
	to, _ := strconv.Atoi(string(rs[1].Value))
	if err := tx.Put(x, strconv.AppendInt(nil, int64(from-amount), 10)); err != nil {
		return err
	}
	return tx.Put(y, strconv.AppendInt(nil, int64(to+amount), 10))
}

// lockingTransfer is transfer with locking reads: both accounts' locks
// are taken (in key order) before the transaction's read timestamp.
func lockingTransfer(ctx context.Context, tx *client.Tx, x, y []byte, amount int) error {
	rs, err := tx.BatchGetForUpdate(ctx, [][]byte{x, y})
	if err != nil {
		return err
	}
	from, _ := strconv.Atoi(string(rs[0].Value))
	to, _ := strconv.Atoi(string(rs[1].Value))
	if err := tx.Put(x, strconv.AppendInt(nil, int64(from-amount), 10)); err != nil {
		return err
	}
	return tx.Put(y, strconv.AppendInt(nil, int64(to+amount), 10))
}

// BenchmarkTxnTwoRanges compares the transfer of BenchmarkTxnOneRange
// with the same transfer whose two keys lie in two ranges (parallel
// commits: intents on both ranges and the STAGING record in one round,
// resolution after the acknowledgement), on one 3-node cluster split in
// two, every client on its own pair of keys (no conflicts):
//
//   - txn-transfer: both keys in the left range (one proposal);
//   - txn-transfer-2ranges: one key in each range.
//
// Run it alone on a quiet machine (docs/benchmarks.md, "Transactions"):
//
//	go test ./tests -run '^$' -bench TxnTwoRanges -benchtime 5s -cpu 64 -v
func BenchmarkTxnTwoRanges(b *testing.B) {
	c := newCluster(b, 3)
	cl := c.client()
	ctx := context.Background()
	if _, _, err := cl.Split(ctx, []byte("bench2/r")); err != nil {
		b.Fatal(err)
	}
	var next atomic.Int64
	b.Run("txn-transfer", func(b *testing.B) {
		benchTransfers(ctx, b, c, cl, func() (x, y []byte) {
			n := next.Add(1)
			return []byte(fmt.Sprintf("bench2/l/%06d/a", n)), []byte(fmt.Sprintf("bench2/l/%06d/b", n))
		})
	})
	b.Run("txn-transfer-2ranges", func(b *testing.B) {
		benchTransfers(ctx, b, c, cl, func() (x, y []byte) {
			n := next.Add(1)
			return []byte(fmt.Sprintf("bench2/l/%06d/a", n)), []byte(fmt.Sprintf("bench2/r/%06d/b", n))
		})
	})
}

// BenchmarkTxnContention runs transfers between 10 hot accounts from 64
// clients at once, on a 3-node cluster: every transfer picks two
// accounts at random, so most attempts meet another's reads or intents.
// Its transfers read optimistically (Tx.BatchGet): one that meets
// another's write of a key it read runs again. The accounts are spread
// over two ranges, so about half the transfers commit across ranges. b.N
// is the number of transfers asked for; it reports
//
//   - commits/s: transfers committed per second of the run;
//   - retries/commit: attempts beyond the first, per committed transfer;
//   - aborts/commit: transfers given up (ErrTxnAborted after
//     MaxTxnAttempts), per committed transfer;
//   - waits/commit, wait-timeouts/commit, deadlocks/commit: the nodes'
//     lock waits (of writes on intents, and of locking reads), those
//     ended by their bound, and deadlocks broken, per commit.
//
// The total of the accounts is checked at the end. Run it alone on a
// quiet machine:
//
//	go test ./tests -run '^$' -bench 'TxnContention$' -benchtime 2000x -v
func BenchmarkTxnContention(b *testing.B) { benchTxnContention(b, false) }

// BenchmarkTxnContentionLocking is BenchmarkTxnContention with locking
// reads (Tx.BatchGetForUpdate): a transfer takes both accounts' locks
// before reading, waits in their queues behind the transfers ahead, and
// commits without running again (docs/transactions.md, "Locking reads").
func BenchmarkTxnContentionLocking(b *testing.B) { benchTxnContention(b, true) }

func benchTxnContention(b *testing.B, locking bool) {
	const clients, accounts, start = 64, 10, 1000000
	c := newCluster(b, 3)
	cl := c.client()
	ctx := context.Background()
	if _, _, err := cl.Split(ctx, []byte("hot/5")); err != nil {
		b.Fatal(err)
	}
	ks := make([][]byte, accounts)
	for i := range ks {
		ks[i] = []byte(fmt.Sprintf("hot/%d", i))
		if err := cl.Put(ctx, ks[i], []byte(strconv.Itoa(start))); err != nil {
			b.Fatal(err)
		}
	}
	var left, attempts, commits, aborts atomic.Int64
	left.Store(int64(b.N))
	metrics := func() (waits, timeouts, deadlocks float64) {
		return c.metricSum("shale_txn_lock_waits_total"), c.metricSum("shale_txn_lock_wait_timeouts_total"), c.metricSum("shale_txn_deadlocks_total")
	}
	w0, t0, d0 := metrics()
	b.ResetTimer()
	var wg sync.WaitGroup
	for w := 0; w < clients; w++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, 1))
			for left.Add(-1) >= 0 {
				i := rng.IntN(accounts)
				j := (i + 1 + rng.IntN(accounts-1)) % accounts
				err := cl.Txn(ctx, func(tx *client.Tx) error {
					attempts.Add(1)
					if locking {
						return lockingTransfer(ctx, tx, ks[i], ks[j], 1)
					}
					return transfer(ctx, tx, ks[i], ks[j], 1)
				})
				switch {
				case err == nil:
					commits.Add(1)
				case errors.Is(err, client.ErrTxnAborted):
					aborts.Add(1)
				default:
					b.Error(err)
					return
				}
			}
		}(uint64(w))
	}
	wg.Wait()
	b.StopTimer()
	n := commits.Load()
	if n == 0 {
		b.Fatal("no transfer committed")
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "commits/s")
	b.ReportMetric(float64(attempts.Load()-n-aborts.Load())/float64(n), "retries/commit")
	b.ReportMetric(float64(aborts.Load())/float64(n), "aborts/commit")
	w1, t1, d1 := metrics()
	b.ReportMetric((w1-w0)/float64(n), "waits/commit")
	b.ReportMetric((t1-t0)/float64(n), "wait-timeouts/commit")
	b.ReportMetric((d1-d0)/float64(n), "deadlocks/commit")
	total := 0
	if err := cl.Txn(ctx, func(tx *client.Tx) error {
		rs, err := tx.BatchGet(ctx, ks)
		if err != nil {
			return err
		}
		total = 0
		for _, r := range rs {
			v, err := strconv.Atoi(string(r.Value))
			if err != nil {
				return err
			}
			total += v
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	if total != accounts*start {
		b.Fatalf("the accounts hold %d in all, want %d", total, accounts*start)
	}
}
