// Package sim is a deterministic simulator of a Shale cluster: N nodes in
// one process, each a real raft.Store on the real engine (storage.DB in a
// directory of its own), driven step by step from one goroutine by one
// seed (docs/testing.md, "Deterministic simulation").
//
// # What is simulated
//
//   - Time (Clock, a raft.Clock): it stands still until the simulator
//     moves it. Ticks, leases, proposer timestamps, retry waits and
//     context deadlines of the Stores all read it.
//   - The network (network.go, deliver.go: a raft.Transport per node):
//     every batch of Raft messages is delayed, dropped, duplicated or
//     reordered as the seed draws, links are cut both ways or one way,
//     snapshots travel in memory; messages are copied through their wire
//     encoding.
//   - The disk, as far as the Raft log goes: a Store in manual mode
//     (raft.Config.Manual) writes its log only when the simulator calls
//     StepLogWrite, after a drawn fsync latency (sometimes a stall); a
//     crash before that loses the queued writes, as a power loss loses
//     an unsynced write, and the node restarts from what its engine holds.
//   - Processes: crashes and restarts, and pauses (a stopped process:
//     no round, tick or log write; what reaches it waits, and is read
//     in a burst when it resumes).
//   - Clients: put, get (through ReadBarrier and rangesm.Reader, as the
//     node's request path does), compare-and-swap and delete-range on a
//     few keys, retried on NotLeader and, with their client ID and
//     request sequence, after an ambiguous outcome; and, one at a time,
//     leader transfers, splits, merges and replica changes.
//
// # What is checked
//
// At most one leader per term, no entry applied twice by a replica, the
// same entry at each index on every replica, the same data on replicas
// at the same applied index, and a history linearizable key by key
// (porcupine, with final reads of every key so that a lost acknowledged
// write shows). A node's fatal error or a panic is a violation too.
//
// # Determinism
//
// Each Store runs in manual mode: no processing loop, log writer, ticker
// or worker goroutine; the simulator runs every round, log write and tick
// itself. The rest runs on goroutines (the clients' blocking calls, the
// administrative operation, snapshot senders and receivers, the Store's
// few internal goroutines, AfterFunc callbacks). The simulator runs inside
// a testing/synctest bubble and, after every step, waits until all of
// them are blocked again (synctest.Wait) before it draws the next step.
// Each client attempt is one call on its own goroutine, which only
// reports its outcome: retries are decided by the simulator. Only one
// administrative operation runs at a time. Clock timers fire one at a
// time, each followed by a wait. The transports only queue what they are
// asked to send; the simulator takes the queue in a canonical order
// before drawing anything. crypto/rand is seeded (testing/cryptotest),
// because etcd-io/raft draws its election timeouts from it. A manual
// Store takes its queued replicas in range order.
//
// Not deterministic, and not relied on: the order in which goroutines
// woken by the same step run (a step that completes a client's call and
// the administrative operation's call at once lets both run; only the
// administrative one calls into a Store again, so the order does not
// show); the engine's internals (its background flushes and compactions
// run on its own threads: they change no result); Go's map iteration
// inside the Store (the simulator sorts what it sees). TestSameSeedSameTrace
// checks that two runs of one seed give the same trace. The trace (every
// step, delivery and outcome, as text, and its hash) is built only when
// Options.Log is set: a replay (-seed) and that test set it; the many
// seeds of TestSimulation do not, which saves their cost.
//
// # Transcripts
//
// TestTranscript runs the scripted scenarios of testdata/transcript
// (cockroachdb/datadriven): proposal outcomes, leases, read barriers and
// the merge gate step by step, on a network whose only faults are the
// script's partitions and a disk that never stalls (and, for the merge
// gate, a replica whose apply the script holds behind its log:
// raft.TestingKnobs.HoldApply), each command's printed
// outcome compared with the file's (docs/testing.md, "Transcript
// tests").
//
// # What is not simulated
//
// Loss of unsynced engine writes other than the Raft log's: apply
// batches are written without sync and survive a simulated crash (the
// engine's fault-injection env can drop unsynced data, but its C API
// exposes only I/O delays: a power-loss call, closing the database and
// dropping what was not synced, is what is missing). Clock skew and drift
// between nodes (one clock drives all). The node layer's gRPC servers,
// routing through meta and request limits (clients call the Stores).
package sim
