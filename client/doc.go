// Package client is the Go client of Shale.
//
//	c, err := client.Dial(ctx, []string{"127.0.0.1:7379"}, nil)
//	if err != nil { ... }
//	defer c.Close()
//	err = c.Put(ctx, []byte("greeting"), []byte("hello"))
//	v, found, err := c.Get(ctx, []byte("greeting"))
//	for kv, err := range c.Scan(ctx, []byte("a"), []byte("z"), nil) { ... }
//
// The package imports only api/kvpb, hlc (the timestamp type, standard
// library only) and gRPC: it pulls neither the server nor cgo into an
// application.
//
// # Versions
//
// Every value is a version of its key, named by the Timestamp it was
// written at (docs/versions.md). GetVersioned returns a value with its
// Version and CreateVersion (the version that created the key), as do
// BatchGet's results and Scan's entries; PutVersioned, DeleteVersioned,
// DeleteRangeVersioned and BatchVersioned return the version they wrote
// (Put, Delete, ... are the same calls without it); CompareAndSwap can
// compare on version (IfVersion) and reports the versions in CASResult.
//
// A read is served at a timestamp. Without options it is the newest
// state, and linearizable; AtTimestamp(ts) reads as of ts, within the
// retention window (older: ErrHistoryCompacted); StaleRead(maxStaleness)
// lets any replica serve it at a timestamp at most that old (a follower
// read, spread over the replicas); ServedAt(&ts) reports
// the timestamp a read was served at, so that a later read AtTimestamp(ts)
// sees exactly the same. A Scan or BatchGet over many ranges reads every
// range and every page at one timestamp: the first answer's.
//
// The client keeps the highest timestamp it has seen (Observed) and sends
// it with every request, so that a write it makes after seeing a version
// gets a higher one, whichever range it goes to. ParseTimestamp and
// FormatTimestamp read and write timestamps as shalectl does.
//
// # Transactions
//
// Txn runs a function in a transaction (docs/transactions.md):
//
//	err := c.Txn(ctx, func(tx *client.Tx) error {
//		v, _, err := tx.Get(ctx, []byte("from"))
//		if err != nil { return err }
//		...
//		tx.Put([]byte("from"), newFrom)
//		return tx.Put([]byte("to"), newTo)
//	})
//
// Reads (Get, BatchGet, Scan) see one snapshot, the transaction's read
// timestamp (a fresh oracle timestamp taken at its first read, so every
// write acknowledged before that read began is in it), plus the
// transaction's own writes; writes (Put,
// Delete, DeleteRange) are buffered and committed when the function
// returns nil, only if nothing the transaction read changed since its
// snapshot. If something did, nothing is written and the function runs
// again at a new snapshot after a backoff (so it must be safe to run
// again), up to MaxTxnAttempts times. Committed transactions are strictly
// serializable. A function's error aborts the transaction and is returned.
//
// A transaction whose reads and writes are all in one range commits in one
// Raft proposal; one across ranges commits with parallel commits (intents
// and its record in one round of consensus, resolved after the
// acknowledgement), except that it cannot DeleteRange yet
// (ErrTxnSpansRanges, nothing applied). Limits: MaxTxnWrites, MaxTxnWriteBytes (ErrTxnTooLarge),
// MaxTxnDuration (ErrTxnAborted, "too old"). A Tx used after its
// function returned or from two goroutines at once fails with
// ErrTxnMisuse and the transaction does not commit.
//
// # Deadlines and retries
//
// Every request has a deadline: the context's, or Options.RequestTimeout.
// A request that the node answers with "not applied" (Unavailable with a
// retry hint, stale routing) or that could not be sent is retried with
// jittered exponential backoff, on the next endpoint first, until it
// succeeds or the deadline passes.
//
// Each attempt at one node has its own timeout below the deadline,
// Options.AttemptTimeout (1s; set it to about the cluster's election
// timeout), so that a node that is paused or stalled without dropping its
// connections costs one attempt, not the whole deadline: the request goes
// on to another replica and the node is avoided for a while, even when
// other replicas still name it leader. A write whose attempt timed out is
// retried with its identity (client_id, request_seq), which the cluster
// applies at most once; if no later attempt succeeds it is ErrAmbiguous.
// Leader hints are kept by Raft term, so a late answer naming an old
// leader never replaces a newer one.
//
// # Errors
//
// Every error is an *Error naming the operation and the endpoint, matching
// one sentinel with errors.Is:
//
//   - ErrInvalidArgument: refused as malformed or over a limit (Error.Limit
//     says which); never retried. Keys and values over Options.MaxKeySize
//     and MaxValueSize are refused before they are sent, and gRPC's own
//     message size cap is reported so too (limit grpc_max_message_size).
//   - ErrNotFound: an admin request named a node or range that does not
//     exist; nothing changed.
//   - ErrFailedPrecondition: what the request names exists but the
//     cluster's state does not allow it now (a node being removed or not
//     live, a node still holding replicas, the last range merged, a node
//     of another cluster); the message says what; not applied.
//   - ErrUnavailable: not applied; no node could serve it in time, or
//     the range has no quorum (the message names the unreachable nodes;
//     returned within about two election timeouts, not at the deadline).
//   - ErrAmbiguous: a write may or may not have been applied (the
//     connection broke or the deadline passed while it was in flight).
//   - ErrResourceExhausted: a node is out of disk; not applied.
//   - ErrInternal: a node failed (I/O error, corruption, bug); a write's
//     outcome is unknown.
//   - ErrHistoryCompacted: a read as of a timestamp older than the
//     history the cluster keeps (Error.Compacted names the threshold).
//   - ErrClockOffset: the node's clock is beyond the maximum offset from
//     the cluster's and it refused; it also matches ErrUnavailable, and
//     the client tries other nodes first.
//   - ErrTxnTooLarge, ErrTxnSpansRanges, ErrTxnMisuse (which also match
//     ErrInvalidArgument) and ErrTxnAborted (Error.Msg gives the reason):
//     a transaction that did not commit; nothing applied.
//   - ErrNotFound, ErrClosed, ErrBatchSpansRanges, ErrPermissionDenied:
//     not applied.
//
// Error.Outcome says what a failed write did: NotApplied (safe to retry)
// or OutcomeUnknown; errors.go holds the table for every kind. When the
// context ended, the error also matches context.DeadlineExceeded or
// context.Canceled. A missing key is not an error: Get reports found.
// Tests of code that handles these errors build them with NewError(kind,
// op, msg) and may set its exported fields.
//
// # Cluster state
//
// RangeInfo(ctx, key) names the range holding key: its span, replicas,
// leader and Raft term, in client-owned types; RangeList lists every
// range the same way. StatusOf asks every dialled endpoint, and
// NodeStatuses every registered node, for its status in parallel, each
// under its own timeout, so one paused node costs only its own answer. HotSpots asks every node for its
// busiest ranges and sampled keys the same way, and names single-key
// hotspots (HotKey.SingleKeyHotspot). The other admin calls (Status,
// Ranges, Nodes, ...) return the wire messages of api/kvpb as they are.
//
// # Multiplexing
//
// KV calls to a node share one KV.Multiplex stream per connection, which
// costs less CPU per call on both sides than a unary RPC each. Nothing
// changes for the caller: the same errors, retries and ambiguity (a write
// in flight when the stream broke is ErrAmbiguous, never resent silently).
// Against a node that does not offer it the client sends unary RPCs by
// itself; Options.DisableMultiplexing always does.
//
// docs/wire-protocol.md describes the protocol beneath.
package client
