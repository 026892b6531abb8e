// Package node is the Shale server: it opens the engine, bootstraps or
// joins a cluster, hosts the node's replicas (a raft.Store whose state
// machines are rangesm's) and serves the KV and Admin gRPC services
// (api/kvpb), the node-to-node Raft transport, and HTTP /healthz, /metrics
// and /debug/pprof.
//
// # Request path
//
// Every KV request passes the same stages, each in its own file:
//
//  1. Validation (validate.go, limits.go): the one place requests are
//     checked against the protocol and the Limits. A refused request is an
//     InvalidArgument naming the field and limit; nothing is read or
//     written.
//  2. Routing (route.go): the request's range (by range_id, or by key)
//     must have an initialized replica on this node, and its keys must lie
//     in the range's current span; otherwise RangeNotFound or
//     RangeKeyMismatch, with the descriptors the client needs to retry.
//  3. Writes (eval.go, kv_server.go): a write becomes a command
//     (command/) carrying the request's client_id and request_seq,
//     proposed through the range's Raft group and evaluated at apply time
//     on every replica by the range state machine; the answer is the
//     applied result. Log order makes a CompareAndSwap atomic with respect
//     to every other write, without latches.
//  4. Reads (read.go): a linearizable read waits for replication's read
//     barrier (ReadIndex or the leader lease), a stale one takes what the
//     replica has applied; then the state machine's read path
//     (rangesm.Reader) reads the applied data.
//
// # Errors
//
// errors.go and route.go map every failure to the gRPC code and detail of
// docs/wire-protocol.md, so that a client always knows whether a write was
// applied, was not, or may have been. Admin operations that must run
// elsewhere (on a range's leader, on a node holding meta) are forwarded
// once (forward.go).
//
// # Around the request path
//
// Cluster membership and identity (cluster.go, identity.go, heartbeat.go,
// liveness.go), sharding (splitter.go, merger.go, placement.go, load.go,
// hot.go), the disk and memory guards (disk.go, memory.go), security
// (security.go, auth.go, tls.go) and metrics (metrics.go) each have their
// own files; docs/architecture.md maps them.
package node
