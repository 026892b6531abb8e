package bank

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shaledb/shale/tests/internal/txnkv"
)

// ErrInsufficient aborts a transfer larger than its source's balance
// (when overdrafts are forbidden). Its transaction applied nothing.
var ErrInsufficient = errors.New("bank: insufficient funds")

// Workload runs transfers and whole-bank reads from concurrent workers on
// a txnkv.Txner and records the history for Check.
type Workload struct {
	cfg      Config
	keys     []string
	db       txnkv.Txner
	classify txnkv.Classifier
	start    time.Time
	procs    atomic.Int64
	quota    txnkv.Quota

	mu      sync.Mutex
	history []Op
}

// NewWorkload returns a workload on db for the bank cfg, classifying
// errors with classify (nil: txnkv.Classify, every error indeterminate).
// Times are recorded from now. Setup must run before the workers.
func NewWorkload(cfg Config, db txnkv.Txner, classify txnkv.Classifier) *Workload {
	if classify == nil {
		classify = txnkv.Classify
	}
	cfg = cfg.WithDefaults()
	return &Workload{cfg: cfg, keys: cfg.Keys(), db: db, classify: classify, start: time.Now()}
}

// Setup opens every account with its initial balance, in one transaction.
// Nothing else runs yet, so writing the balances again is harmless: an
// attempt that fails, indeterminate or not, is retried, up to
// setupAttempts times.
func (w *Workload) Setup(ctx context.Context) error {
	const setupAttempts = 10
	var err error
	for range setupAttempts {
		err = w.db.Txn(ctx, func(ctx context.Context, tx txnkv.Tx) error {
			for _, k := range w.keys {
				if err := tx.Put(ctx, k, encode(w.cfg.Initial)); err != nil {
					return err
				}
			}
			return nil
		})
		if err == nil || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("opening %d accounts: %w", len(w.keys), err)
	}
	return nil
}

// StopAfter makes the workers stop once n more operations have started
// among them.
func (w *Workload) StopAfter(n int) { w.quota.Set(n) }

func (w *Workload) now() int64 { return int64(time.Since(w.start)) }

// Next draws an operation: a whole-bank read, or a transfer of 1 to
// MaxTransfer between two distinct accounts.
func (w *Workload) Next(rng *rand.Rand) Op {
	if rng.Float64() < w.cfg.ReadShare {
		return Op{Kind: Read}
	}
	from := rng.IntN(len(w.keys))
	to := (from + 1 + rng.IntN(len(w.keys)-1)) % len(w.keys)
	return Op{Kind: Transfer, From: w.keys[from], To: w.keys[to], Amount: 1 + rng.Int64N(w.cfg.MaxTransfer),
		Locking: rng.IntN(2) == 0}
}

// Worker runs operations, each with the given timeout, until ctx ends (or
// the StopAfter limit is reached). It carries on as a new process after
// an indeterminate operation.
func (w *Workload) Worker(ctx context.Context, rng *rand.Rand, timeout time.Duration) {
	process := int(w.procs.Add(1))
	for ctx.Err() == nil && w.quota.Take() {
		o := w.RunOne(ctx, process, w.Next(rng), timeout)
		if o.Outcome == txnkv.Info {
			process = int(w.procs.Add(1))
		}
	}
}

// RunOne runs op (from Next) as one transaction of process, records it and
// returns it. A read that fails is recorded as failed whatever the error,
// as is a transfer refused for insufficient funds: neither changed
// anything.
func (w *Workload) RunOne(ctx context.Context, process int, op Op, timeout time.Duration) Op {
	tctx, cancel := context.WithTimeout(ctx, timeout)
	op.Process, op.Invoke = process, w.now()
	var err error
	if op.Kind == Read {
		op.Balances, op.Garbage, err = w.read(tctx)
	} else {
		err = w.transfer(tctx, op)
	}
	op.Complete = w.now()
	cancel()
	switch {
	case err == nil:
		op.Outcome = txnkv.OK
	case op.Kind == Read, errors.Is(err, ErrInsufficient):
		op.Outcome, op.Balances, op.Garbage = txnkv.Fail, nil, nil
	default:
		op.Outcome = w.classify(err)
	}
	if err != nil {
		op.Err = err.Error()
	}
	w.mu.Lock()
	w.history = append(w.history, op)
	w.mu.Unlock()
	return op
}

// read returns every account found, in one transaction, and apart the
// values found that are not balances (Check reports both).
func (w *Workload) read(ctx context.Context) (balances map[string]int64, garbage map[string]string, err error) {
	err = w.db.Txn(ctx, func(ctx context.Context, tx txnkv.Tx) error {
		// Only the attempt that commits counts.
		balances, garbage = make(map[string]int64, len(w.keys)), nil
		for _, k := range w.keys {
			v, found, err := tx.Get(ctx, k)
			if err != nil {
				return err
			}
			if !found {
				continue
			}
			b, err := decode(k, v)
			if err != nil {
				if garbage == nil {
					garbage = map[string]string{}
				}
				garbage[k] = string(v)
				continue
			}
			balances[k] = b
		}
		return nil
	})
	return balances, garbage, err
}

// transfer moves op.Amount from op.From to op.To in one transaction.
func (w *Workload) transfer(ctx context.Context, op Op) error {
	return w.db.Txn(ctx, func(ctx context.Context, tx txnkv.Tx) error {
		var bal [2]int64
		get := tx.Get
		if ltx, ok := tx.(txnkv.LockingTx); ok && op.Locking {
			// Locks taken one account at a time, in the transfer's
			// order: two transfers between the same accounts in
			// opposite directions deadlock, and one gives up.
			get = ltx.GetForUpdate
		}
		for i, k := range []string{op.From, op.To} {
			v, found, err := get(ctx, k)
			if err != nil {
				return err
			}
			if !found {
				return fmt.Errorf("bank: account %s is missing", k)
			}
			if bal[i], err = decode(k, v); err != nil {
				return err
			}
		}
		if bal[0] < op.Amount && !w.cfg.AllowNegative {
			return ErrInsufficient
		}
		if err := tx.Put(ctx, op.From, encode(bal[0]-op.Amount)); err != nil {
			return err
		}
		return tx.Put(ctx, op.To, encode(bal[1]+op.Amount))
	})
}

// History returns the operations recorded so far, in completion order.
func (w *Workload) History() []Op {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.history)
}

func encode(v int64) []byte { return strconv.AppendInt(nil, v, 10) }

func decode(key string, b []byte) (int64, error) {
	v, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bank: account %s holds %q, not a balance", key, b)
	}
	return v, nil
}
