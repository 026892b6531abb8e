package jepsen

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shaledb/shale/client"
	"github.com/shaledb/shale/tests/internal/bank"
	"github.com/shaledb/shale/tests/internal/listappend"
	"github.com/shaledb/shale/tests/internal/shaletxn"
	"github.com/shaledb/shale/tests/internal/txnkv"
)

// The transactional workloads (docs/testing.md, "Checkers for
// transactions") under every nemesis: the bank, its 20 accounts split
// over 10 ranges, and list-append, both through client.Txn, checked after
// the run (list-append with real-time edges: strict serializability).
// Only one-range transactions commit so far (docs/transactions.md), so
// transfers stay within groups of two accounts, a range each
// (bank.Config.Group); whole-bank reads read all ten ranges.

// txnOpTimeout bounds one transaction (its retries included).
const txnOpTimeout = 5 * time.Second

type txnWorkloads struct {
	bankCfg bank.Config
	bank    *bank.Workload
	la      *listappend.Workload
	// sessions are the workers' clients; next turns among them.
	sessions []*session
	next     atomic.Uint64
}

// client returns the next worker session's client (txnkv.Txner asks
// for one at each transaction).
func (w *txnWorkloads) client() *client.Client {
	return w.sessions[w.next.Add(1)%uint64(len(w.sessions))].get()
}

// setupTxnWorkloads opens the bank (in one transaction) and splits the
// bank into ranges of two accounts and the list-append keys into a range
// per key slot, so that transfers, whole-bank reads and list-append
// transactions are transactions across ranges. It returns the number of
// splits made.
func setupTxnWorkloads(cl *client.Client, sessions []*session, timeout time.Duration) (*txnWorkloads, int, error) {
	w := &txnWorkloads{bankCfg: bank.Config{Accounts: 20}, sessions: sessions}
	db := shaletxn.Txner{Client: w.client}
	w.bank = bank.NewWorkload(w.bankCfg, db, shaletxn.Classify)
	laCfg := listappend.GenConfig{Keys: 6}
	w.la = listappend.NewWorkload(listappend.NewGenerator(laCfg), listappend.KVRunner{DB: db}, shaletxn.Classify)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := w.bank.Setup(ctx); err != nil {
		return nil, 0, err
	}
	splits := 0
	for _, k := range append(w.bankCfg.SplitKeys(2), laCfg.SplitKeys()...) {
		key := []byte(k)
		for {
			_, _, err := cl.Split(ctx, key)
			if err == nil {
				splits++
				break
			}
			if ri, e := cl.RangeInfo(ctx, key); e == nil && string(ri.StartKey) == string(key) {
				break // an earlier attempt made it
			}
			if ctx.Err() != nil {
				return nil, splits, fmt.Errorf("splitting the bank at %s: %w", key, err)
			}
			pause(ctx, 100*time.Millisecond)
		}
	}
	return w, splits, nil
}

// run starts workers of each workload until ctx ends; wg tracks them.
func (w *txnWorkloads) run(ctx context.Context, wg *sync.WaitGroup, workers int, seed uint64) {
	for i := range workers {
		wg.Add(2)
		go func() {
			defer wg.Done()
			w.bank.Worker(ctx, rand.New(rand.NewPCG(seed, uint64(2000+i))), txnOpTimeout)
		}()
		go func() {
			defer wg.Done()
			w.la.Worker(ctx, rand.New(rand.NewPCG(seed, uint64(3000+i))), txnOpTimeout)
		}()
	}
}

// txnCheck is what the checkers found.
type txnCheck struct {
	ops, committed, transfers int
	reads, badReads           int
	anomalies                 int
	problems                  []string
	summary                   string
}

// check holds the histories to the checkers, and the run to having
// committed something of each kind.
func (w *txnWorkloads) check() txnCheck {
	var c txnCheck
	bh, lh := w.bank.History(), w.la.History()
	c.ops = len(bh) + len(lh)
	for _, o := range bh {
		if o.Outcome == txnkv.OK {
			c.committed++
			if o.Kind == bank.Transfer {
				c.transfers++
			}
		}
	}
	br := bank.Check(w.bankCfg, bh)
	c.reads, c.badReads = br.Reads, br.Bad
	if !br.Valid() {
		c.problems = append(c.problems, "bank: "+br.String())
	}
	lr := listappend.Check(lh, listappend.Options{Strict: true})
	c.anomalies = len(lr.Anomalies)
	c.committed += lr.Committed
	if !lr.Valid() {
		c.problems = append(c.problems, "list-append: "+lr.String()+w.finalLists(lr.Keys()))
	}
	// Validity: something of each was checked.
	if br.Reads == 0 || c.transfers == 0 || lr.Committed == 0 {
		c.problems = append(c.problems, fmt.Sprintf("invalid run: the transactional workloads committed %d whole-bank reads, %d transfers and %d list-append transactions (need 1 of each)",
			br.Reads, c.transfers, lr.Committed))
	}
	c.summary = fmt.Sprintf("bank: %d ops, %d reads checked (%d bad), %d transfers committed; list-append: %d ops, %d committed, %d anomalies",
		len(bh), br.Reads, br.Bad, c.transfers, len(lh), lr.Committed, c.anomalies)
	return c
}

// finalLists reads the final state of list-append keys after the run (at
// most 8), for the report of an anomaly: an element a committed
// transaction appended that is missing from the final list was lost (a
// committed write dropped), one present was hidden from the reads that
// missed it (a read at a wrong timestamp). The version names the
// commit timestamp to look for in the nodes' logs.
func (w *txnWorkloads) finalLists(ks []string) string {
	var b strings.Builder
	b.WriteString("\n  final state of the keys involved (linearizable reads after the run):")
	for i, k := range ks {
		if i == 8 {
			fmt.Fprintf(&b, "\n    ... %d more", len(ks)-i)
			break
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		res, err := w.client().GetVersioned(ctx, []byte(k))
		cancel()
		switch {
		case err != nil:
			fmt.Fprintf(&b, "\n    %s: read failed: %v", k, err)
		case !res.Found:
			fmt.Fprintf(&b, "\n    %s: missing", k)
		default:
			l, err := listappend.DecodeList(res.Value)
			if err != nil {
				fmt.Fprintf(&b, "\n    %s: %v (version %v)", k, err, res.Version)
			} else {
				fmt.Fprintf(&b, "\n    %s = %v (version %v, created %v)", k, l, res.Version, res.CreateVersion)
			}
		}
	}
	return b.String()
}
