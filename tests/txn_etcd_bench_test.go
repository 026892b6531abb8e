package tests

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shaledb/shale/client"
)

// BenchmarkTxnTransferVsEtcd runs the bank's transfer side by side on a
// 3-node Shale cluster and a 3-member etcd (issue 20: at 64 clients,
// Shale's rate at least twice etcd's), one system after the other on the
// same machine. Every client moves 1 from its own account a to its own
// account b, over and over (no conflicts between clients: the cost of the
// protocols, not of contention):
//
//   - shale: client.Txn reading both balances at its snapshot and putting
//     both, a in the left range and b in the right one of a cluster split
//     in two (a transaction across ranges: parallel commits);
//   - etcd: one Txn reading both balances (one revision), then a Txn
//     whose compares are both keys' mod revisions as read and whose
//     then-branch puts both, again from the reads when a compare failed.
//     etcd holds every key in one Raft group: its best case.
//
// b.N is the number of transfers of each system, shared by
// SHALE_TXN_CLIENTS (64) clients; each reports transfers/s and
// retries/transfer (Shale: runs of the function beyond the first; etcd:
// failed compares). The
// etcd binary is $SHALE_ETCD_BIN, else etcd on the PATH (skipped when
// neither is found). Run it alone on a quiet machine
// (docs/benchmarks.md, "Transactions"):
//
//	SHALE_ETCD_BIN=build/etcd37/etcd go test ./tests -run '^$' -bench TxnTransferVsEtcd -benchtime 20000x -count 3 -v
func BenchmarkTxnTransferVsEtcd(b *testing.B) {
	clients := envInt("SHALE_TXN_CLIENTS", 64)
	b.Run("shale", func(b *testing.B) {
		c := newCluster(b, 3)
		cl := c.client()
		ctx := context.Background()
		if _, _, err := cl.Split(ctx, []byte("vs/r")); err != nil {
			b.Fatal(err)
		}
		accounts := func(i int) (x, y []byte) {
			return []byte(fmt.Sprintf("vs/l/%04d", i)), []byte(fmt.Sprintf("vs/r/%04d", i))
		}
		for i := range clients {
			x, y := accounts(i)
			if err := cl.Put(ctx, x, []byte("1000000")); err != nil {
				b.Fatal(err)
			}
			if err := cl.Put(ctx, y, []byte("0")); err != nil {
				b.Fatal(err)
			}
		}
		runTransfers(b, clients, func(i int) (int, error) {
			x, y := accounts(i)
			runs := 0
			err := cl.Txn(ctx, func(tx *client.Tx) error {
				runs++
				return transfer(ctx, tx, x, y, 1)
			})
			return runs - 1, err
		})
	})
	b.Run("etcd", func(b *testing.B) {
		s := newEtcdWatchSystem(b)
		ctx := context.Background()
		accounts := func(i int) (x, y string) {
			return fmt.Sprintf("vs/l/%04d", i), fmt.Sprintf("vs/r/%04d", i)
		}
		for i := range clients {
			x, y := accounts(i)
			if err := s.put(ctx, x, "1000000"); err != nil {
				b.Fatal(err)
			}
			if err := s.put(ctx, y, "0"); err != nil {
				b.Fatal(err)
			}
		}
		runTransfers(b, clients, func(i int) (int, error) {
			x, y := accounts(i)
			return etcdTransfer(ctx, s.cl(), x, y, 1)
		})
	})
}

// runTransfers runs b.N calls of one (each a transfer of client i, which
// answers its retries) from clients goroutines and reports transfers/s
// and retries/transfer.
func runTransfers(b *testing.B, clients int, one func(i int) (retries int, err error)) {
	var left, retries atomic.Int64
	left.Store(int64(b.N))
	b.ResetTimer()
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for left.Add(-1) >= 0 {
				r, err := one(i)
				if err != nil {
					b.Error(err)
					return
				}
				retries.Add(int64(r))
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "transfers/s")
	b.ReportMetric(float64(retries.Load())/float64(b.N), "retries/transfer")
}

// etcdTransfer moves amount from x to y the way an etcd application does
// it: read both balances in one Txn (one revision), then a Txn that puts
// both only if neither key's mod revision changed; when one did, read
// again (bounded, as client.Txn is).
func etcdTransfer(ctx context.Context, cl *clientv3.Client, x, y string, amount int) (int, error) {
	for attempt := 0; attempt < client.MaxTxnAttempts; attempt++ {
		rd, err := cl.Txn(ctx).Then(clientv3.OpGet(x), clientv3.OpGet(y)).Commit()
		if err != nil {
			return attempt, err
		}
		var bal [2]int
		var rev [2]int64
		for i, r := range rd.Responses {
			kvs := r.GetResponseRange().GetKvs()
			if len(kvs) != 1 {
				return attempt, fmt.Errorf("account %d of %s, %s: %d values", i, x, y, len(kvs))
			}
			if bal[i], err = strconv.Atoi(string(kvs[0].Value)); err != nil {
				return attempt, err
			}
			rev[i] = kvs[0].ModRevision
		}
		wr, err := cl.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(x), "=", rev[0]), clientv3.Compare(clientv3.ModRevision(y), "=", rev[1])).
			Then(clientv3.OpPut(x, strconv.Itoa(bal[0]-amount)), clientv3.OpPut(y, strconv.Itoa(bal[1]+amount))).
			Commit()
		if err != nil {
			return attempt, err
		}
		if wr.Succeeded {
			return attempt, nil
		}
	}
	return client.MaxTxnAttempts, fmt.Errorf("transfer %s -> %s: a balance changed on each of %d attempts", x, y, client.MaxTxnAttempts)
}
