// Package txnkv is the small surface the transactional workloads of the
// fault suite (tests/internal/listappend, tests/internal/bank) run on: a
// transaction that gets and puts string keys, retried and committed by
// whoever implements it. A client of Shale's transactions plugs in by
// implementing Txner in a few lines (wrap the client's Txn and its Tx);
// the workloads need nothing else.
//
// It also holds what the workloads share: how an attempt ended (Outcome),
// the default rule for classifying a client's error (Classify), and MemKV,
// an in-process reference store whose transactions run one at a time, with
// an optional planted bug, so that the checkers' own tests can drive the
// real workload code end to end and show both a clean run and a caught bug.
// MemKV stands in for no part of Shale: nothing here claims anything about
// Shale until a real client is plugged in.
package txnkv
