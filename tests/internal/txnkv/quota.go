package txnkv

import "sync/atomic"

// Quota is how many more transactions a workload's workers may start
// among them, for runs sized by work rather than by time. The zero Quota
// is unlimited; it is safe for concurrent use.
type Quota struct {
	set  atomic.Bool
	left atomic.Int64
}

// Set limits the workers to n more transactions.
func (q *Quota) Set(n int) {
	q.left.Store(int64(n))
	q.set.Store(true)
}

// Take reports whether a worker may start another transaction, and counts
// it.
func (q *Quota) Take() bool {
	return !q.set.Load() || q.left.Add(-1) >= 0
}
