package tests

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shaledb/shale/client"
)

// TestTxnLockingReadsSerialize runs two transfers over the same two
// accounts with locking reads (Tx.BatchGetForUpdate) on a 3-node
// cluster, with the accounts in one range and in two: T1 takes both
// locks and holds them until T2 is seen waiting for them (the nodes'
// lock-wait counter), then commits; T2 then takes the locks, reads what
// T1 committed and commits. Each function runs once: with optimistic
// reads T2 would have read the old balances and run again. In the third
// case T2 reads another key before locking, one key at a time: its read
// timestamp, older than T1's commit, moves forward when it takes the
// locks (Tx.GetForUpdate's refresh).
func TestTxnLockingReadsSerialize(t *testing.T) {
	c := newCluster(t, 3)
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, _, err := cl.Split(ctx, []byte("lk/m")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, x, y string
		// readFirst: T2 reads another key first, then locks one key at
		// a time (its read timestamp is older than T1's commit: the
		// locks move it forward).
		readFirst bool
	}{
		{"one range", "lk/a", "lk/b", false},
		{"two ranges", "lk/c", "lk/z", false},
		{"locking after a read", "lk/d", "lk/y", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x, y := []byte(tc.x), []byte(tc.y)
			for _, k := range [][]byte{x, y} {
				if err := cl.Put(ctx, k, []byte("100")); err != nil {
					t.Fatal(err)
				}
			}
			var runs1, runs2 atomic.Int32
			locked, release := make(chan struct{}), make(chan struct{})
			var wg sync.WaitGroup
			errs := make(chan error, 2)
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- cl.Txn(ctx, func(tx *client.Tx) error {
					runs1.Add(1)
					rs, err := tx.BatchGetForUpdate(ctx, [][]byte{x, y})
					if err != nil {
						return err
					}
					if runs1.Load() == 1 {
						close(locked)
						<-release
					}
					return putTransfer(tx, x, y, rs[0].Value, rs[1].Value, 10)
				})
			}()
			<-locked
			waits0 := c.metricSum("shale_txn_lock_waits_total")
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- cl.Txn(ctx, func(tx *client.Tx) error {
					runs2.Add(1)
					if tc.readFirst {
						if _, _, err := tx.Get(ctx, []byte("lk/other")); err != nil {
							return err
						}
						yv, _, err := tx.GetForUpdate(ctx, y)
						if err != nil {
							return err
						}
						xv, _, err := tx.GetForUpdate(ctx, x)
						if err != nil {
							return err
						}
						return putTransfer(tx, y, x, yv, xv, 1)
					}
					rs, err := tx.BatchGetForUpdate(ctx, [][]byte{y, x})
					if err != nil {
						return err
					}
					return putTransfer(tx, y, x, rs[0].Value, rs[1].Value, 1)
				})
			}()
			waitFor(t, 10*time.Second, "the second transfer to wait for the first's locks", func() bool {
				return c.metricSum("shale_txn_lock_waits_total") > waits0
			})
			close(release)
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			if r1, r2 := runs1.Load(), runs2.Load(); r1 != 1 || r2 != 1 {
				t.Fatalf("the transfers ran %d and %d times, want once each (a locking read waits instead of running again)", r1, r2)
			}
			for k, want := range map[string]string{tc.x: "91", tc.y: "109"} {
				v, _, err := cl.Get(ctx, []byte(k))
				if err != nil {
					t.Fatal(err)
				}
				if string(v) != want {
					t.Fatalf("%s = %s, want %s", k, v, want)
				}
			}
		})
	}
}

// putTransfer writes a transfer of amount from x (holding xv) to y
// (holding yv).
func putTransfer(tx *client.Tx, x, y, xv, yv []byte, amount int) error {
	from, _ := strconv.Atoi(string(xv))
	to, _ := strconv.Atoi(string(yv))
	if err := tx.Put(x, strconv.AppendInt(nil, int64(from-amount), 10)); err != nil {
		return err
	}
	return tx.Put(y, strconv.AppendInt(nil, int64(to+amount), 10))
}

// TestTxnLockingDeadlockBroken makes two transactions lock two keys (in
// two ranges) in opposite orders with Tx.GetForUpdate, each taking its
// first lock before either asks for its second: a deadlock of locking
// reads. The push graph finds it and the younger gives up (its
// GetForUpdate fails with ErrTxnAborted, "deadlock", and Txn runs it
// again); both transactions commit, and the nodes count the deadlock.
func TestTxnLockingDeadlockBroken(t *testing.T) {
	c := newCluster(t, 3)
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, _, err := cl.Split(ctx, []byte("ld/m")); err != nil {
		t.Fatal(err)
	}
	a, z := []byte("ld/a"), []byte("ld/z")
	for _, k := range [][]byte{a, z} {
		if err := cl.Put(ctx, k, []byte("100")); err != nil {
			t.Fatal(err)
		}
	}
	d0 := c.metricSum("shale_txn_deadlocks_total")
	var both sync.WaitGroup // both hold their first lock
	both.Add(2)
	var deadlocked atomic.Int32
	run := func(first, second []byte) error {
		var runs atomic.Int32
		return cl.Txn(ctx, func(tx *client.Tx) error {
			n := runs.Add(1)
			fv, _, err := tx.GetForUpdate(ctx, first)
			if err != nil {
				return err
			}
			if n == 1 {
				both.Done()
				both.Wait()
			}
			sv, _, err := tx.GetForUpdate(ctx, second)
			if errors.Is(err, client.ErrTxnAborted) {
				deadlocked.Add(1)
			}
			if err != nil {
				return err
			}
			return putTransfer(tx, first, second, fv, sv, 1)
		})
	}
	errs := make(chan error, 2)
	start := time.Now()
	go func() { errs <- run(a, z) }()
	go func() { errs <- run(z, a) }()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := deadlocked.Load(); got != 1 {
		t.Fatalf("%d locking reads gave up a deadlock, want 1", got)
	}
	if d := c.metricSum("shale_txn_deadlocks_total") - d0; d < 1 {
		t.Fatalf("the nodes counted %v deadlocks, want at least 1", d)
	}
	total := 0
	for _, k := range [][]byte{a, z} {
		v, _, err := cl.Get(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(string(v))
		total += n
	}
	if total != 200 {
		t.Fatalf("the two keys hold %d, want 200", total)
	}
	t.Logf("deadlock broken and both committed in %v", time.Since(start).Round(time.Millisecond))
}
