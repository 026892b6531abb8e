// Package raft is Shale's replication layer: multi-Raft on etcd-io/raft,
// one Raft group per range, every group of a node hosted by one Store.
//
// Replication moves log entries; it does not know what they mean. It hands
// committed entries to each replica's range state machine through the one
// interface of package apply (raft/apply/statemachine.go), built by the
// Factory in Config.StateMachines (the production one is rangesm's). What
// is here:
//
//   - Store and Replica (store.go, replica.go): the replicas of a node,
//     loaded from the engine, each a RawNode behind a raftMu.
//   - Rounds (scheduler.go, store_round.go, replica_ready.go,
//     replica_raft.go): a worker pool drains the ranges with work; the log
//     writes of every range in a round go in one engine batch with one
//     fsync (logwriter.go); messages go out grouped per peer.
//   - Applying (apply.go, apply_round.go): committed entries go through
//     the state machine (MayApply, the merge gate, then Apply); the client
//     writes of every range a worker handles in a round reach the engine
//     in one write.
//   - Proposals (proposal.go), reads and leases (read.go), membership
//     (confchange.go), snapshots (snapshot.go), log truncation
//     (truncate.go), a full disk (diskfull.go).
//   - The range lifecycle as replication sees it: split and merge
//     coordination (split.go, merge.go), meta updates (meta.go), bootstrap
//     (bootstrap.go). The apply halves of splits and merges are the state
//     machine's; replication creates and retires the replicas (sm_host.go).
//
// The Store takes from its caller everything outside it (the seams a
// deterministic simulator replaces, see sim/): its engine (Config.Engine,
// which can be opened over the engine's fault-injecting file layer), its
// clock (Config.Clock, clock.go: the only source of time in this package,
// which TestNoClockOutsideClock enforces), its transport
// (Config.NewTransport, transport_seam.go; the gRPC one in raft/transport
// by default) and, for a simulator, the driving of its rounds
// (Config.Manual, manual.go).
//
// Subpackages: apply (the interface to the state machine), logstore
// (raft.Storage over the engine), transport (gRPC streams between nodes),
// keys (the engine keyspace). Design and reasons: docs/replication.md.
package raft
