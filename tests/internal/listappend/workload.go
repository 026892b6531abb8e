package listappend

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shaledb/shale/tests/internal/txnkv"
)

// Runner runs list-append transactions: the one thing the workload needs
// from a transactional client.
type Runner interface {
	// RunTxn runs ops atomically and returns a copy of them with every
	// Read's List set to what it read (an absent key reads as empty).
	// A nil error means the transaction committed.
	RunTxn(ctx context.Context, ops []MicroOp) ([]MicroOp, error)
}

// KVRunner runs list-append transactions on a key-value transaction: each
// list is one value (its elements in decimal, space-separated), an append
// is a read-modify-write of it. This is how the workload runs on Shale's
// client.Txn, or any store with get/put transactions.
type KVRunner struct{ DB txnkv.Txner }

// RunTxn implements Runner.
func (r KVRunner) RunTxn(ctx context.Context, ops []MicroOp) ([]MicroOp, error) {
	var out []MicroOp
	err := r.DB.Txn(ctx, func(ctx context.Context, tx txnkv.Tx) error {
		out = slices.Clone(ops) // only the attempt that commits counts
		for i := range out {
			m := &out[i]
			v, _, err := tx.Get(ctx, m.Key)
			if err != nil {
				return err
			}
			list, err := decodeList(v)
			if err != nil {
				return fmt.Errorf("key %s: %w", m.Key, err)
			}
			if m.Kind == Read {
				m.List = list
				continue
			}
			if err := tx.Put(ctx, m.Key, encodeList(append(list, m.Value))); err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}

func encodeList(l []int) []byte {
	parts := make([]string, len(l))
	for i, v := range l {
		parts[i] = strconv.Itoa(v)
	}
	return []byte(strings.Join(parts, " "))
}

// DecodeList decodes a key's value as KVRunner stores its list (a report
// reads keys' final states with it).
func DecodeList(b []byte) ([]int, error) { return decodeList(b) }

func decodeList(b []byte) ([]int, error) {
	fields := strings.Fields(string(b))
	l := make([]int, 0, len(fields))
	for _, f := range fields {
		v, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("value %q is not a list of integers", b)
		}
		l = append(l, v)
	}
	return l, nil
}

// Workload runs generated transactions through a Runner from concurrent
// workers and records the history for Check.
type Workload struct {
	gen      *Generator
	run      Runner
	classify txnkv.Classifier
	start    time.Time
	procs    atomic.Int64
	quota    txnkv.Quota

	mu      sync.Mutex
	history []Txn
}

// NewWorkload returns a workload that draws transactions from gen, runs
// them with run and classifies their errors with classify (nil:
// txnkv.Classify, every error indeterminate). Times are recorded from now.
func NewWorkload(gen *Generator, run Runner, classify txnkv.Classifier) *Workload {
	if classify == nil {
		classify = txnkv.Classify
	}
	return &Workload{gen: gen, run: run, classify: classify, start: time.Now()}
}

func (w *Workload) now() int64 { return int64(time.Since(w.start)) }

// StopAfter makes the workers stop once n more transactions have started
// among them.
func (w *Workload) StopAfter(n int) { w.quota.Set(n) }

// Worker runs transactions, each with the given timeout, until ctx ends
// (or the StopAfter limit is reached). It carries on as a new process
// after an indeterminate transaction.
func (w *Workload) Worker(ctx context.Context, rng *rand.Rand, timeout time.Duration) {
	process := int(w.procs.Add(1))
	for ctx.Err() == nil && w.quota.Take() {
		t := w.RunOne(ctx, process, w.gen.Next(rng), timeout)
		if t.Outcome == txnkv.Info {
			process = int(w.procs.Add(1))
		}
	}
}

// RunOne runs ops as one transaction of process, records it and returns
// it. A read-only transaction that fails is recorded as failed whatever
// the error (it changed nothing either way).
func (w *Workload) RunOne(ctx context.Context, process int, ops []MicroOp, timeout time.Duration) Txn {
	tctx, cancel := context.WithTimeout(ctx, timeout)
	t := Txn{Process: process, Invoke: w.now()}
	res, err := w.run.RunTxn(tctx, ops)
	t.Complete = w.now()
	cancel()
	switch {
	case err == nil:
		t.Outcome, t.Ops = txnkv.OK, res
	case readOnly(ops):
		t.Outcome, t.Ops, t.Err = txnkv.Fail, ops, err.Error()
	default:
		t.Outcome, t.Ops, t.Err = w.classify(err), ops, err.Error()
	}
	w.mu.Lock()
	w.history = append(w.history, t)
	w.mu.Unlock()
	return t
}

func readOnly(ops []MicroOp) bool {
	for _, m := range ops {
		if m.Kind == Append {
			return false
		}
	}
	return true
}

// History returns the transactions recorded so far, in completion order.
func (w *Workload) History() []Txn {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.history)
}
