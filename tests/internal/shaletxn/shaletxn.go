// Package shaletxn plugs Shale's transactions (client.Txn) into the
// transactional workloads of the fault suite: Txner implements
// txnkv.Txner over a client, and Classify tells the workloads which of
// the client's errors mean the transaction did not commit.
package shaletxn

import (
	"context"
	"errors"

	"github.com/shaledb/shale/client"
	"github.com/shaledb/shale/tests/internal/txnkv"
)

// Txner runs the workloads' transactions through client.Txn on the
// client Client returns at each transaction (the fault suite's sessions
// redial after membership changes).
type Txner struct {
	Client func() *client.Client
}

var (
	_ txnkv.Txner     = Txner{}
	_ txnkv.LockingTx = shaleTx{}
)

// Txn implements txnkv.Txner.
func (s Txner) Txn(ctx context.Context, fn func(context.Context, txnkv.Tx) error) error {
	return s.Client().Txn(ctx, func(tx *client.Tx) error { return fn(ctx, shaleTx{tx}) })
}

type shaleTx struct{ tx *client.Tx }

func (t shaleTx) Get(ctx context.Context, k string) ([]byte, bool, error) {
	return t.tx.Get(ctx, []byte(k))
}

func (t shaleTx) GetForUpdate(ctx context.Context, k string) ([]byte, bool, error) {
	return t.tx.GetForUpdate(ctx, []byte(k))
}

func (t shaleTx) Put(_ context.Context, k string, v []byte) error {
	return t.tx.Put([]byte(k), v)
}

// Classify maps an error of client.Txn to an outcome: the client's own
// errors say whether the commit may have applied (Error.Outcome: only an
// ambiguous commit, or an internal error on it, is unknown); anything
// else came from the workload's function or a read, before any commit,
// and applied nothing.
func Classify(err error) txnkv.Outcome {
	var ce *client.Error
	if errors.As(err, &ce) {
		if ce.Outcome() == client.OutcomeUnknown {
			return txnkv.Info
		}
		return txnkv.Fail
	}
	return txnkv.Fail
}
