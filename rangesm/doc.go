// Package rangesm is the range state machine: what a range's committed
// commands mean and the replicated state they change. Replication (raft/)
// hands it committed entries through raft/apply's StateMachine; it never
// sees the network, the Raft log or a clock (tests/deps_test.go TestLayers
// enforces the direction).
//
// What is here:
//
//   - command/: the versioned encoding of commands and their results, the
//     language proposals are written in.
//   - Evaluation (apply.go): client writes (Put, Delete, DeleteRange,
//     Batch, CompareAndSwap) checked against the range's span and staged
//     into the apply batch; every decision depends only on the entry and
//     the applied state, so replicas stay identical.
//   - Deduplication (dedup.go, dedup_cache.go): a client write applies at
//     most once per (client_id, request_seq).
//   - The overlay (overlay.go): reads of the batch being applied see its
//     own writes.
//   - Meta (meta.go): the node registry, range descriptors and counters of
//     the meta range; applying their commands, and reading them
//     (apply.MetaReader); meta_index.go finds a descriptor by range ID.
//   - Configuration changes, splits and merges as applied (confchange.go,
//     split.go, merge.go): the descriptor, the right-hand range's state,
//     the freeze and the take-over of a merge, and the merge gate
//     (MayApply).
//   - Change feeds (feed.go): while a range is watched, the changes its
//     writes make, handed to the node's FeedSink with each published
//     batch (docs/watch.md).
//   - One-range transactions (txn.go) and, for transactions across
//     ranges, the lock table and its intents (intent.go): txn_write and
//     txn_resolve, and the checks every write command and read makes.
//   - The read path (read.go): Reader reads applied user data; the node
//     serves Get, BatchGet and Scan through it after replication's read
//     barrier, with the serving range's lock table (Reader.WithLocks).
//
// A Factory (range.go) makes one Range per replica; every method of a Range
// runs under its replica's raftMu. Formats: docs/formats.md.
package rangesm
