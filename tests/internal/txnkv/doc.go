// Package txnkv is the small surface the transactional workloads of the
// fault suite (tests/internal/listappend, tests/internal/bank) run on: a
// transaction that gets and puts string keys, retried and committed by
// whoever implements it. A client of Shale's transactions plugs in by
// implementing Txner in a few lines (wrap the client's Txn and its Tx);
// the workloads need nothing else.
//
// Wiring Shale's transactions in, assuming client.Txn as issue 20 describes
// it (a function of a *client.Tx with Get and Put, retried on conflicts):
//
//	type shaleTxner struct{ c *client.Client }
//
//	func (s shaleTxner) Txn(ctx context.Context, fn func(context.Context, txnkv.Tx) error) error {
//		return s.c.Txn(ctx, func(tx *client.Tx) error { return fn(ctx, shaleTx{tx}) })
//	}
//
//	type shaleTx struct{ tx *client.Tx }
//
//	func (t shaleTx) Get(ctx context.Context, k string) ([]byte, bool, error) {
//		return t.tx.Get(ctx, []byte(k))
//	}
//	func (t shaleTx) Put(ctx context.Context, k string, v []byte) error {
//		return t.tx.Put(ctx, []byte(k), v)
//	}
//
// then listappend.NewWorkload(gen, listappend.KVRunner{DB: shaleTxner{c}},
// classify) and bank.NewWorkload(cfg, shaleTxner{c}, classify), with a
// Classifier that knows which of the client's errors mean "not applied".
// In the fault suite the Txner should take the worker's session client at
// each transaction, since the membership nemesis redials it.
//
// It also holds what the workloads share: how an attempt ended (Outcome),
// the default rule for classifying a client's error (Classify), and MemKV,
// an in-process reference store whose transactions run one at a time, with
// an optional planted bug, so that the checkers' own tests can drive the
// real workload code end to end and show both a clean run and a caught bug.
// MemKV stands in for no part of Shale: nothing here claims anything about
// Shale until a real client is plugged in.
package txnkv
