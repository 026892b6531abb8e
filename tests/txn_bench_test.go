package tests

import (
	"context"
	"fmt"
	"strconv"
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
		b.RunParallel(func(pb *testing.PB) {
			x, y := pair()
			if err := cl.Batch(ctx, client.PutOp(x, []byte("1000000")), client.PutOp(y, []byte("0"))); err != nil {
				b.Error(err)
				return
			}
			for pb.Next() {
				if err := cl.Txn(ctx, func(tx *client.Tx) error {
					rs, err := tx.BatchGet(ctx, [][]byte{x, y})
					if err != nil {
						return err
					}
					from, _ := strconv.Atoi(string(rs[0].Value))
					to, _ := strconv.Atoi(string(rs[1].Value))
					if err := tx.Put(x, strconv.AppendInt(nil, int64(from-1), 10)); err != nil {
						return err
					}
					return tx.Put(y, strconv.AppendInt(nil, int64(to+1), 10))
				}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
