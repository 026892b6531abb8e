package tests

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shaledb/shale/client"
	"github.com/shaledb/shale/tests/internal/bank"
	"github.com/shaledb/shale/tests/internal/listappend"
	"github.com/shaledb/shale/tests/internal/shaletxn"
	"github.com/shaledb/shale/tests/internal/txnkv"
)

// The transactional workloads of the fault suite (bank, list-append) on a
// real cluster through client.Txn, checked by their checkers; and the
// same checkers catching a planted bug (commits that skip their read
// validation) on a real cluster.

// txnRun is one run of both workloads.
type txnRun struct {
	bankCfg     bank.Config
	laCfg       listappend.GenConfig
	bankSplits  bool // split the bank into a range per few accounts
	workers     int  // per workload
	ops         int  // per workload
	opTimeout   time.Duration
	bankHistory []bank.Op
	laHistory   []listappend.Txn
}

// run opens the bank (before any split: its setup writes every account
// in one transaction), splits it if asked, and runs both workloads.
func (r *txnRun) run(t *testing.T, cl *client.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	db := shaletxn.Txner{Client: func() *client.Client { return cl }}
	bw := bank.NewWorkload(r.bankCfg, db, shaletxn.Classify)
	if err := bw.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	if r.bankSplits {
		// A range per two accounts and per list-append key slot:
		// transfers, whole-bank reads and list-append transactions go
		// across ranges.
		starts := r.bankCfg.SplitKeys(2)
		for _, k := range append(starts, r.laCfg.SplitKeys()...) {
			if _, _, err := cl.Split(ctx, []byte(k)); err != nil {
				t.Fatalf("splitting at %s: %v", k, err)
			}
		}
		t.Logf("the bank's %d accounts are spread over %d ranges, the list-append's %d key slots over a range each",
			r.bankCfg.WithDefaults().Accounts, len(starts)+1, len(r.laCfg.SplitKeys())+1)
	}
	lw := listappend.NewWorkload(listappend.NewGenerator(r.laCfg), listappend.KVRunner{DB: db}, shaletxn.Classify)
	bw.StopAfter(r.ops)
	lw.StopAfter(r.ops)
	var wg sync.WaitGroup
	for i := range r.workers {
		wg.Add(2)
		go func() {
			defer wg.Done()
			bw.Worker(ctx, rand.New(rand.NewPCG(uint64(i), 1)), r.opTimeout)
		}()
		go func() {
			defer wg.Done()
			lw.Worker(ctx, rand.New(rand.NewPCG(uint64(i), 2)), r.opTimeout)
		}()
	}
	wg.Wait()
	r.bankHistory, r.laHistory = bw.History(), lw.History()
}

// outcomes counts the outcomes of a history's transactions, with the
// commonest error of the failed ones.
func outcomes[T any](h []T, outcome func(T) txnkv.Outcome, errOf func(T) string) string {
	n := map[txnkv.Outcome]int{}
	errs := map[string]int{}
	for _, o := range h {
		n[outcome(o)]++
		if e := errOf(o); e != "" {
			if i := strings.IndexByte(e, '"'); i > 0 {
				e = e[:i] + "..." // group errors that differ by key
			}
			errs[e]++
		}
	}
	top, topN := "", 0
	for e, c := range errs {
		if c > topN {
			top, topN = e, c
		}
	}
	return fmt.Sprintf("%d ok, %d failed, %d indeterminate (commonest error, %d times: %s)", n[txnkv.OK], n[txnkv.Fail], n[txnkv.Info], topN, top)
}

func bankOutcome(o bank.Op) txnkv.Outcome      { return o.Outcome }
func bankErr(o bank.Op) string                 { return o.Err }
func laOutcome(t listappend.Txn) txnkv.Outcome { return t.Outcome }
func laErr(t listappend.Txn) string            { return t.Err }
func committedTransfers(h []bank.Op) (n int) {
	for _, o := range h {
		if o.Kind == bank.Transfer && o.Outcome == txnkv.OK {
			n++
		}
	}
	return n
}

// TestTxnWorkloads runs the bank (20 accounts over 10 ranges, transfers
// between any two accounts, whole-bank reads across all ten) and
// list-append (a range per key slot) through client.Txn on three nodes:
// transactions across ranges. It holds them to their checkers: every
// whole-bank read sums to the total, and the list-append history has no
// anomaly of strict serializability.
func TestTxnWorkloads(t *testing.T) {
	c := newCluster(t, 3)
	cl := c.client()
	r := &txnRun{
		bankCfg:    bank.Config{Accounts: 20},
		laCfg:      listappend.GenConfig{Keys: 6},
		bankSplits: true,
		workers:    4, ops: 400, opTimeout: 20 * time.Second,
	}
	r.run(t, cl)
	t.Logf("bank: %s", outcomes(r.bankHistory, bankOutcome, bankErr))
	t.Logf("list-append: %s", outcomes(r.laHistory, laOutcome, laErr))
	br := bank.Check(r.bankCfg, r.bankHistory)
	if !br.Valid() {
		t.Errorf("bank:\n%s", br)
	}
	if br.Reads < 20 || committedTransfers(r.bankHistory) < 100 {
		t.Errorf("a weak bank history: %d reads checked, %d transfers committed", br.Reads, committedTransfers(r.bankHistory))
	}
	lr := listappend.Check(r.laHistory, listappend.Options{Strict: true})
	if !lr.Valid() {
		t.Errorf("list-append:\n%s", lr)
	}
	if lr.Committed < 100 {
		t.Errorf("a weak list-append history: %d committed transactions", lr.Committed)
	}
	t.Logf("bank: %d reads checked; list-append: %s", br.Reads, lr)
}

// setTxnFault turns the planted bug (commits skip their read validation,
// node/faults_on.go) on or off on every node of a faults cluster.
func setTxnFault(t *testing.T, c *testCluster, on bool) {
	t.Helper()
	for _, cn := range c.all() {
		method, u := http.MethodDelete, "http://"+cn.httpAddr+"/debug/faults/txn"
		if on {
			method, u = http.MethodPut, u+"?skip_read_validation=true"
		}
		req, err := http.NewRequest(method, u, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %s: %s", method, u, resp.Status)
		}
	}
}

// TestTxnPlantedBugCaught: with commits skipping their read validation
// on every node, concurrent transactions lose updates, and on the real
// cluster both checkers say so: the bank's totals break and list-append
// finds anomalies: with accounts and lists in one range (one-range
// commits), and spread over ranges (the bug skips the validation of
// transactions across ranges too).
func TestTxnPlantedBugCaught(t *testing.T) {
	c := newFaultsCluster(t, 3)
	cl := c.client()
	setTxnFault(t, c, true)
	for _, across := range []bool{false, true} {
		r := &txnRun{
			bankCfg: bank.Config{Accounts: 5, AllowNegative: true},
			laCfg:   listappend.GenConfig{Keys: 3},
			workers: 4, ops: 300, opTimeout: 20 * time.Second,
		}
		if across {
			r.bankCfg.KeyPrefix, r.laCfg.KeyPrefix, r.bankSplits = "bank-across/", "la-across/", true
		}
		r.run(t, cl)
		br := bank.Check(r.bankCfg, r.bankHistory)
		lr := listappend.Check(r.laHistory, listappend.Options{Strict: true})
		t.Logf("across ranges %v: bank: %s; %d of %d reads broke the total", across, outcomes(r.bankHistory, bankOutcome, bankErr), br.Bad, br.Reads)
		t.Logf("across ranges %v: list-append: %s; anomalies %v", across, outcomes(r.laHistory, laOutcome, laErr), lr.Types())
		if br.Valid() {
			t.Errorf("across ranges %v: the bank checker found nothing with read validation off", across)
		}
		if lr.Valid() {
			t.Errorf("across ranges %v: the list-append checker found nothing with read validation off", across)
		}
	}
}
