package txnkv

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
)

// ErrAmbiguous is what MemKV returns for a transaction it made
// indeterminate on purpose: it may or may not have committed.
var ErrAmbiguous = errors.New("txnkv: commit outcome unknown (planted)")

// Bug selects a fault MemKV plants in its transactions.
type Bug int

const (
	// NoBug: transactions run one at a time on the current data, so every
	// history MemKV produces is strictly serializable.
	NoBug Bug = iota
	// BugLostUpdate: a transaction reads a snapshot taken when it starts
	// and its writes are installed at commit with no conflict check (last
	// writer wins), while other transactions run concurrently. Concurrent
	// read-modify-writes overwrite each other: lost appends in list-append,
	// money created or destroyed in the bank.
	BugLostUpdate
)

// MemKV is an in-process Txner for the workloads' and checkers' own tests
// (see the package doc): a map, transactions that see their own writes,
// and optionally a planted Bug and a share of indeterminate outcomes.
// It is safe for concurrent use.
type MemKV struct {
	bug Bug
	// ambiguous is the probability that a transaction's outcome is made
	// indeterminate (half the time after it committed, half before).
	ambiguous float64

	serial sync.Mutex // held for a whole transaction when bug == NoBug

	mu   sync.Mutex // guards data and rng
	data map[string][]byte
	rng  *rand.Rand
}

// NewMemKV returns an empty store with the given bug, which makes a share
// ambiguous (0 to 1) of transactions indeterminate; seed fixes those draws.
func NewMemKV(bug Bug, ambiguous float64, seed uint64) *MemKV {
	return &MemKV{bug: bug, ambiguous: ambiguous, data: map[string][]byte{},
		rng: rand.New(rand.NewPCG(seed, 0x6d656d6b76))}
}

// Txn implements Txner.
func (m *MemKV) Txn(ctx context.Context, fn func(ctx context.Context, tx Tx) error) error {
	if m.bug == NoBug {
		m.serial.Lock()
		defer m.serial.Unlock()
	}
	tx := &memTx{m: m, writes: map[string][]byte{}}
	if m.bug == BugLostUpdate {
		tx.snapshot = m.copyData()
	}
	if err := fn(ctx, tx); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	draw := m.rng.Float64()
	if draw < m.ambiguous/2 {
		return ErrAmbiguous // not applied, but the caller cannot know
	}
	for k, v := range tx.writes {
		m.data[k] = v
	}
	if draw < m.ambiguous {
		return ErrAmbiguous // applied, but the caller cannot know
	}
	return nil
}

func (m *MemKV) copyData() map[string][]byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := make(map[string][]byte, len(m.data))
	for k, v := range m.data {
		c[k] = v
	}
	return c
}

// memTx is one attempt: writes are buffered until commit, reads see them.
type memTx struct {
	m        *MemKV
	snapshot map[string][]byte // nil: read the current data
	writes   map[string][]byte
}

func (t *memTx) Get(_ context.Context, key string) ([]byte, bool, error) {
	if v, ok := t.writes[key]; ok {
		return v, true, nil
	}
	if t.snapshot != nil {
		// Let other transactions run in between, as they would while
		// this one waits on a network: the bug needs interleavings.
		runtime.Gosched()
		v, ok := t.snapshot[key]
		return v, ok, nil
	}
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	v, ok := t.m.data[key]
	return v, ok, nil
}

func (t *memTx) Put(_ context.Context, key string, value []byte) error {
	t.writes[key] = append([]byte(nil), value...)
	return nil
}
