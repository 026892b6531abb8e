package bank

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/shaledb/shale/tests/internal/txnkv"
)

// runWorkload opens the bank on db and runs n operations from workers.
func runWorkload(t *testing.T, cfg Config, db txnkv.Txner, workers, n int) []Op {
	t.Helper()
	w := NewWorkload(cfg, db, nil)
	if err := w.Setup(context.Background()); err != nil {
		t.Fatal(err)
	}
	w.StopAfter(n)
	var wg sync.WaitGroup
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.Worker(context.Background(), rand.New(rand.NewPCG(uint64(i), 4)), time.Minute)
		}()
	}
	wg.Wait()
	h := w.History()
	if len(h) != n {
		t.Fatalf("recorded %d operations, want %d", len(h), n)
	}
	return h
}

// End to end on a correct store, with indeterminate outcomes and
// overdrafts refused: every read holds.
func TestWorkloadOnSerialStore(t *testing.T) {
	cfg := Config{Accounts: 5, Initial: 10, MaxTransfer: 8}
	h := runWorkload(t, cfg, txnkv.NewMemKV(txnkv.NoBug, 0.1, 1), 6, 2000)
	var refused, info, transfers int
	for _, o := range h {
		switch {
		case o.Kind == Read:
		case o.Err == ErrInsufficient.Error():
			refused++
		case o.Outcome == txnkv.Info:
			info++
		case o.Outcome == txnkv.OK:
			transfers++
		}
	}
	if refused == 0 || info == 0 || transfers < 500 {
		t.Fatalf("a weak history: %d transfers, %d refused, %d indeterminate", transfers, refused, info)
	}
	res := Check(cfg, h)
	if !res.Valid() || res.Reads < 200 {
		t.Fatalf("want at least 200 good reads:\n%s", res)
	}
}

// End to end on a store that loses updates: the checker finds a read
// whose total is off.
func TestWorkloadCatchesLostUpdates(t *testing.T) {
	cfg := Config{Accounts: 5, Initial: 10, MaxTransfer: 8}
	res := Check(cfg, runWorkload(t, cfg, txnkv.NewMemKV(txnkv.BugLostUpdate, 0, 1), 6, 2000))
	if res.Valid() {
		t.Fatalf("lost updates not found:\n%s", res)
	}
	t.Logf("%s", res)
}

// The split points are every n-th account, and transfers go between any
// two distinct accounts, across those splits.
func TestWorkloadSplitKeys(t *testing.T) {
	cfg := Config{Accounts: 7}
	if got := cfg.SplitKeys(3); len(got) != 2 || got[0] != "bank/003" || got[1] != "bank/006" {
		t.Fatalf("SplitKeys = %v", got)
	}
	w := NewWorkload(Config{Accounts: 7, ReadShare: 0.01}, txnkv.NewMemKV(txnkv.NoBug, 0, 1), nil)
	rng := rand.New(rand.NewPCG(1, 2))
	transfers, across := 0, 0
	for range 2000 {
		op := w.Next(rng)
		if op.Kind != Transfer {
			continue
		}
		transfers++
		f, _ := strconv.Atoi(op.From[len("bank/"):])
		to, _ := strconv.Atoi(op.To[len("bank/"):])
		if f == to {
			t.Fatalf("transfer %s -> %s to itself", op.From, op.To)
		}
		if f/3 != to/3 {
			across++
		}
	}
	if transfers < 1000 || across < transfers/2 {
		t.Fatalf("%d transfers drawn, %d across splits", transfers, across)
	}
}
