// Package bank is the fault suite's bank workload and its checker, for
// transactions: a fixed set of accounts, concurrent transfers between two
// of them, and reads of every balance in one transaction.
//
// A transfer moves money and never makes or destroys it, so in a
// serializable (indeed a snapshot-isolated) history every read of the
// whole bank sums to the initial total. Check holds each completed read to
// that, to holding every account and nothing else, and, when the workload
// forbids overdrafts, to no negative balance. A broken total means some
// read saw part of a transfer (a torn read: one side applied, not the
// other), or a transfer was lost or applied twice (two transfers from one
// balance both committed: a lost update). The first bad read is reported
// with the transfers running during it and the last good read before it,
// account by account, which usually points at the transfer involved.
//
// The bank cannot see anomalies that keep totals (a stale but consistent
// read is fine here); the list-append checker (tests/internal/listappend)
// is the one that finds those. The two run together in the fault suite.
//
// Half the transfers read their accounts with locking reads where the
// Tx has them (txnkv.LockingTx; Op.Locking), one account at a time.
//
// Transfers go between any two accounts; Config.SplitKeys gives the keys
// to split at to spread the accounts over shards, so that transfers and
// whole-bank reads are transactions across shards.
//
// Workload runs on any txnkv.Txner, such as a wrapper of client.Txn.
package bank
