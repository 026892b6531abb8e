package txnkv

import "context"

// Tx is one attempt of a transaction: reads at the transaction's snapshot
// and buffered writes, as client.Tx offers them. A Tx is used by one
// goroutine and only inside the function given to Txner.Txn.
type Tx interface {
	// Get returns key's value and whether it exists.
	Get(ctx context.Context, key string) (value []byte, found bool, err error)
	// Put sets key to value when the transaction commits.
	Put(ctx context.Context, key string, value []byte) error
}

// LockingTx is a Tx with locking reads (client.Tx.GetForUpdate): the
// read of a key the transaction will write, after taking its lock. A
// workload uses it where its Tx has it, Get otherwise.
type LockingTx interface {
	Tx
	GetForUpdate(ctx context.Context, key string) (value []byte, found bool, err error)
}

// Txner runs transactions. Txn runs fn in a new transaction and commits it
// when fn returns nil; an error from fn aborts it (nothing is applied) and
// is returned. Txn may run fn more than once (retrying a conflict): fn must
// be safe to run again, and only the attempt that committed counts, so fn
// must reset whatever it records at each call.
type Txner interface {
	Txn(ctx context.Context, fn func(ctx context.Context, tx Tx) error) error
}
