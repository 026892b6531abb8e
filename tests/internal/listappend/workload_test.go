package listappend

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/shaledb/shale/tests/internal/txnkv"
)

// runWorkload runs the real workload (generator, KVRunner, recorder) with
// workers against db until n transactions have run.
func runWorkload(t *testing.T, db txnkv.Txner, workers, n int) []Txn {
	t.Helper()
	w := NewWorkload(NewGenerator(GenConfig{Keys: 4, MaxAppends: 16}), KVRunner{DB: db}, nil)
	w.StopAfter(n)
	var wg sync.WaitGroup
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.Worker(context.Background(), rand.New(rand.NewPCG(uint64(i), 3)), time.Minute)
		}()
	}
	wg.Wait()
	h := w.History()
	if len(h) != n {
		t.Fatalf("recorded %d transactions, want %d", len(h), n)
	}
	return h
}

// End to end on a correct store: transactions run one at a time, some
// ending indeterminate (committed or not), and the history passes the
// strict check.
func TestWorkloadOnSerialStore(t *testing.T) {
	h := runWorkload(t, txnkv.NewMemKV(txnkv.NoBug, 0.1, 1), 6, 2000)
	var info, nonEmptyReads int
	for _, tx := range h {
		if tx.Outcome == txnkv.Info {
			info++
		}
		for _, m := range tx.Ops {
			if m.Kind == Read && len(m.List) > 0 {
				nonEmptyReads++
			}
		}
	}
	if info == 0 || nonEmptyReads < 100 {
		t.Fatalf("a weak history: %d indeterminate transactions, %d non-empty reads", info, nonEmptyReads)
	}
	if res := Check(h, Options{Strict: true}); !res.Valid() {
		t.Fatalf("a serial store's history was flagged:\n%s", res)
	}
}

// End to end on a store that loses updates (snapshot reads, blind
// last-writer-wins commits): the checker finds it.
func TestWorkloadCatchesLostUpdates(t *testing.T) {
	h := runWorkload(t, txnkv.NewMemKV(txnkv.BugLostUpdate, 0, 1), 6, 2000)
	res := Check(h, Options{Strict: true})
	if res.Valid() {
		t.Fatalf("lost updates not found in %d transactions", len(h))
	}
	t.Logf("found %v", res.Types())
}

func TestListEncoding(t *testing.T) {
	for _, l := range [][]int{nil, {1}, {1, 22, 333}} {
		got, err := decodeList(encodeList(l))
		if err != nil || len(got) != len(l) {
			t.Fatalf("round trip of %v: %v, %v", l, got, err)
		}
	}
	if _, err := decodeList([]byte("1 x")); err == nil {
		t.Fatal("a corrupt list decoded")
	}
}

// A history survives JSON (the fault suite writes failing ones out).
func TestHistoryJSON(t *testing.T) {
	h := []Txn{{Process: 2, Outcome: txnkv.Info, Ops: []MicroOp{ap("x", 1), rd("y", 1, 2)}, Invoke: 5, Complete: 9, Err: "e"}}
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	var got []Txn
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, h) {
		t.Fatalf("round trip of %s: %+v, want %+v", b, got, h)
	}
}
