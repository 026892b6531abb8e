// Package node is the Shale server: it serves the KV and Admin gRPC
// services (api/kvpb) over the node's engine, plus HTTP /healthz, /metrics
// and /debug/pprof.
//
// # Request path
//
// Every request passes through the same stages, each in its own file:
//
//  1. Routing (node.go checkRange): the request's range must be one this
//     node holds. On a single node that is range 1, which covers the whole
//     key space (range 0 in a request means "route by key").
//  2. Validation (validate.go, limits.go): the one place requests are
//     checked against the protocol and the Limits. A refused request is an
//     InvalidArgument status naming the field and limit; nothing is read
//     or written.
//  3. Evaluation (eval.go): a write becomes a writeCmd, the engine batch
//     that carries it out plus the latches it needs. User keys are stored
//     under the 0x03 prefix of the engine keyspace (raft/keys).
//  4. Commit (commit.go): a Committer makes the batch durable and visible.
//     Here it is a synced engine write; with replication it becomes a Raft
//     proposal, and nothing above this stage changes.
//
// Reads skip 3 and 4 and read the engine directly; Scan and BatchGet read
// one consistent view each.
//
// # Atomicity
//
// A Batch is one engine batch, so it applies entirely or not at all.
// CompareAndSwap holds its key's latch exclusively from its read to the end
// of its commit, while blind writes hold theirs shared (latch.go), so no
// write lands between a CompareAndSwap's comparison and its write.
//
// # Errors
//
// errors.go maps every failure to the gRPC code and detail of
// docs/wire-protocol.md, so that a client always knows whether a write was
// applied, was not, or may have been.
package node
