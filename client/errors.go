package client

import (
	"errors"
	"fmt"
	"time"

	"github.com/shaledb/shale/api/kvpb"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Sentinel errors. Every error a Client method returns is an *Error that
// matches one of them with errors.Is (and, for deadlines and cancellation,
// the context's error too). docs/wire-protocol.md explains each.
//
// What each says about a write (Error.Outcome returns it):
//
//	kind                  write outcome
//	ErrInvalidArgument    not applied
//	ErrUnavailable        not applied
//	ErrAmbiguous          unknown: read to find out, or retry if idempotent
//	ErrResourceExhausted  not applied
//	ErrInternal           unknown for a write (see below); reads change nothing
//	ErrNotFound           not applied
//	ErrClosed             not applied (never sent)
//	ErrBatchSpansRanges   not applied
//	ErrPermissionDenied   not applied
//	ErrFailedPrecondition not applied
//	ErrHistoryCompacted   not applied (a read)
//	ErrClockOffset        not applied
//	ErrTxnTooLarge        not applied (a transaction)
//	ErrTxnAborted         not applied (a transaction)
//	ErrTxnSpansRanges     not applied (a transaction)
//	ErrTxnMisuse          not applied (a transaction)
//
// ErrInternal on a write is unknown because it reports a failure the node
// did not expect (an engine or replication error outside the documented
// ones, a panic caught by the server): it may have come after the write
// was proposed. A node's refusal before acting (gRPC FailedPrecondition
// without routing details) is ErrFailedPrecondition, not applied.
var (
	// ErrInvalidArgument: the request was refused as malformed or over a
	// limit; it was not applied and retrying it will not help.
	// Error.Limit names the limit when there is one.
	ErrInvalidArgument = errors.New("client: invalid argument")
	// ErrUnavailable: no node could serve the request before the deadline,
	// or the range has no quorum (the nodes said so: the message names the
	// unreachable ones). It was NOT applied.
	ErrUnavailable = errors.New("client: unavailable")
	// ErrAmbiguous: a write may or may not have been applied (the
	// connection broke or the deadline passed while it was in flight).
	// Read the key to find out, or retry if the write is idempotent.
	ErrAmbiguous = errors.New("client: result is ambiguous")
	// ErrResourceExhausted: a node is out of a resource (a full disk); the
	// request was not applied.
	ErrResourceExhausted = errors.New("client: resource exhausted")
	// ErrInternal: a node failed in a way that is not the caller's fault
	// (an engine I/O error, corruption, a bug). Reads changed nothing and
	// may be retried; a write's outcome is unknown (Error.Outcome).
	ErrInternal = errors.New("client: internal error")
	// ErrNotFound: the request named something that does not exist: a
	// node or range unknown to the cluster (admin requests). A missing key
	// is not an error: Get answers found == false, BatchGet Found ==
	// false. Nothing was changed.
	ErrNotFound = errors.New("client: not found")
	// ErrClosed: the Client is closed.
	ErrClosed = errors.New("client: closed")
	// ErrBatchSpansRanges: an atomic Batch named keys of more than one
	// range. Such an error also matches ErrInvalidArgument; nothing was
	// applied. Split the batch by range, or write its keys one by one.
	ErrBatchSpansRanges = errors.New("client: batch spans more than one range")
	// ErrFailedPrecondition: the request named things that exist, but
	// the cluster's state does not allow it now (an admin request: the
	// target node is being removed or not live, the node still holds
	// replicas, the range has no neighbour to merge with, a change
	// computed from a state that has changed since; or a node of another
	// cluster). It was not applied; the message says what stands in the
	// way. Retry only once that has changed.
	ErrFailedPrecondition = errors.New("client: failed precondition")
	// ErrPermissionDenied: the node did not accept the client's
	// credentials (no or an unknown certificate or token: gRPC code
	// Unauthenticated), or their role does not allow the request
	// (PermissionDenied). It was not applied; retrying will not help.
	ErrPermissionDenied = errors.New("client: permission denied")
	// ErrHistoryCompacted: a read as of a timestamp (AtTimestamp, or a
	// long multi-range read whose first answer came longer ago than the
	// retention window) asked for history the cluster no longer keeps:
	// the versions below the range's GC threshold are gone.
	// Error.Compacted names the range and its threshold. Retrying at the
	// same timestamp will not help; read at a later one.
	ErrHistoryCompacted = errors.New("client: history compacted")
	// ErrClockOffset: the node's clock is farther than the maximum clock
	// offset from the cluster's, so it serves nothing that needs a
	// timestamp (docs/versions.md). Not applied; the client tries other
	// nodes until the deadline, and only the last answer is reported.
	// Error.ClockOffset has the measurement. It also matches
	// ErrUnavailable.
	ErrClockOffset = errors.New("client: node clock offset beyond the maximum")
	// ErrTxnTooLarge: a transaction is over its limits (MaxTxnWrites
	// writes, MaxTxnWriteBytes of keys and values, MaxTxnReads reads in a
	// transaction that writes; docs/transactions.md). Nothing was applied. It also matches
	// ErrInvalidArgument.
	ErrTxnTooLarge = errors.New("client: transaction too large")
	// ErrTxnAborted: a transaction did not commit and Txn stopped
	// retrying it; Error.Msg gives the reason (its reads kept changing
	// under it for every attempt Txn allows, or it ran longer than
	// MaxTxnDuration). Nothing was applied.
	ErrTxnAborted = errors.New("client: transaction aborted")
	// ErrTxnSpansRanges: a transaction across ranges deleted a span
	// (DeleteRange), which only a transaction within one range may do yet
	// (docs/transactions.md). Nothing was applied. It also matches
	// ErrInvalidArgument.
	ErrTxnSpansRanges = errors.New("client: transaction spans more than one range")
	// ErrTxnMisuse: a Tx was used after its function returned, or from two
	// goroutines at once. The transaction is not committed. It also
	// matches ErrInvalidArgument.
	ErrTxnMisuse = errors.New("client: transaction misused")
)

// Error describes a failed request: the operation, the endpoint that gave
// the answer, and what the node said. Build one in a test with NewError;
// its exported fields may then be set as the test needs.
type Error struct {
	Op       string     // the client method, e.g. "Put"
	Endpoint string     // the endpoint tried last
	Code     codes.Code // the gRPC status code
	Msg      string     // the node's message (or the transport's)
	// Limit is set when the request exceeded a documented limit.
	Limit *kvpb.LimitExceeded
	// Compacted is set with ErrHistoryCompacted: the range, the
	// timestamp asked for and the range's GC threshold.
	Compacted *kvpb.HistoryCompacted
	// ClockOffset is set with ErrClockOffset: the node and its offset.
	ClockOffset *kvpb.ClockOffset
	// Write says the request changes data; with Code it decides Outcome
	// for ErrInternal.
	Write bool

	kind  error // the sentinel
	cause error // the underlying error (a status or context error)
}

func (e *Error) Error() string {
	s := "client: " + e.Op
	if e.Endpoint != "" {
		s += ": " + e.Endpoint
	}
	switch e.kind {
	case ErrAmbiguous:
		s += ": outcome unknown"
	case ErrUnavailable:
		s += ": unavailable"
	case ErrPermissionDenied:
		s += ": permission denied"
	case ErrFailedPrecondition:
		s += ": refused, not applied"
	case ErrHistoryCompacted:
		s += ": history compacted"
	case ErrClockOffset:
		s += ": clock offset"
	case ErrTxnAborted:
		s += ": transaction aborted"
	case ErrTxnTooLarge:
		s += ": transaction too large"
	}
	return s + ": " + e.Msg
}

// NewError returns an *Error of kind, which must be one of the package's
// sentinels (ErrUnavailable, ...); any other kind is taken as ErrInternal.
// It is for tests of code that handles client errors: errors.Is(err,
// kind) holds, and Outcome follows the table above.
func NewError(kind error, op, msg string) *Error {
	switch kind {
	case ErrInvalidArgument, ErrUnavailable, ErrAmbiguous, ErrResourceExhausted, ErrInternal,
		ErrNotFound, ErrClosed, ErrBatchSpansRanges, ErrPermissionDenied, ErrFailedPrecondition,
		ErrHistoryCompacted, ErrClockOffset, ErrTxnTooLarge, ErrTxnAborted, ErrTxnSpansRanges, ErrTxnMisuse:
	default:
		kind = ErrInternal
	}
	return &Error{Op: op, Msg: msg, kind: kind}
}

// Kind returns the sentinel the error matches.
func (e *Error) Kind() error { return e.kind }

// Outcome says what became of a write.
type Outcome int

const (
	// NotApplied: the write changed nothing; retrying it is safe.
	NotApplied Outcome = iota
	// OutcomeUnknown: the write may or may not have been applied.
	OutcomeUnknown
)

func (o Outcome) String() string {
	if o == OutcomeUnknown {
		return "unknown"
	}
	return "not applied"
}

// Outcome says what the failed request did to the data: NotApplied, or
// OutcomeUnknown for ErrAmbiguous and for ErrInternal on a write other
// than a node's refusal before proposing it. A read is always NotApplied.
// No error means "applied": a request that applied returns no error.
func (e *Error) Outcome() Outcome {
	switch {
	case e.kind == ErrAmbiguous:
		return OutcomeUnknown
	case e.kind == ErrInternal && e.Write && e.Code != codes.FailedPrecondition:
		return OutcomeUnknown
	default:
		return NotApplied
	}
}

// Is matches the error's sentinel (and ErrUnavailable for
// ErrClockOffset: like it, the request was not applied and another node
// may serve it).
func (e *Error) Is(target error) bool {
	if target == e.kind {
		return true
	}
	switch e.kind {
	case ErrClockOffset:
		return target == ErrUnavailable
	case ErrTxnTooLarge, ErrTxnSpansRanges, ErrTxnMisuse:
		return target == ErrInvalidArgument
	}
	return false
}

// Unwrap returns the underlying error: a gRPC status error, or the
// context's error when the deadline passed or the caller cancelled.
func (e *Error) Unwrap() error { return e.cause }

// classified is what the client concluded from one failed attempt.
type classified struct {
	err        *Error
	retry      bool          // safe and useful to try again
	retryAfter time.Duration // the node's requested delay, if any
	// leader is the address of the node a NotLeader answer names, if any.
	leader string
	// noQuorum is set when the node said the range has no quorum.
	noQuorum *kvpb.NoQuorum
}

// classify interprets one attempt's error. write says whether the request
// changes data: a transport failure while a write was in flight is
// ambiguous, since the node may have applied it. ctxErr is the caller's
// context's error after the attempt, if it has ended.
func classify(op, endpoint string, write bool, err, ctxErr error) classified {
	e := &Error{Op: op, Endpoint: endpoint, Write: write, cause: err}
	if ctxErr != nil {
		e.Code = status.Code(err)
		e.Msg = ctxErr.Error()
		e.cause = ctxErr
		e.kind = ErrUnavailable
		if write {
			e.kind = ErrAmbiguous
			e.Msg += " while the write was in flight"
		}
		return classified{err: e}
	}
	st := status.Convert(err)
	e.Code, e.Msg = st.Code(), st.Message()
	var retryInfo *errdetails.RetryInfo
	var ambiguous *kvpb.AmbiguousResult
	var noQuorum *kvpb.NoQuorum
	var clockOffset *kvpb.ClockOffset
	routing := false
	leaderAddr := ""
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *kvpb.LimitExceeded:
			e.Limit = d
		case *errdetails.RetryInfo:
			retryInfo = d
		case *kvpb.AmbiguousResult:
			ambiguous = d
		case *kvpb.NoQuorum:
			noQuorum = d
		case *kvpb.HistoryCompacted:
			e.Compacted = d
		case *kvpb.ClockOffset:
			clockOffset = d
		case *kvpb.NotLeader:
			routing = true
			leaderAddr = d.GetLeader().GetAddress()
		case *kvpb.RangeKeyMismatch, *kvpb.RangeNotFound:
			routing = true
		}
	}
	c := classified{err: e, leader: leaderAddr, noQuorum: noQuorum}
	switch {
	case e.Compacted != nil:
		// Whatever the code: the node refused the timestamp before
		// reading or writing anything.
		e.kind = ErrHistoryCompacted
		return c
	case clockOffset != nil:
		// The node refused before doing anything; another may serve it.
		e.kind, e.ClockOffset = ErrClockOffset, clockOffset
		c.retry = true
		return c
	}
	switch st.Code() {
	case codes.InvalidArgument, codes.OutOfRange:
		e.kind = ErrInvalidArgument
	case codes.ResourceExhausted:
		e.kind = ErrResourceExhausted
		if l := messageTooLarge(e.Msg); l != nil {
			// gRPC's message size cap, not a full disk (limits.go).
			e.kind, e.Limit = ErrInvalidArgument, l
			e.Msg = fmt.Sprintf("the request is %d bytes, over the gRPC message limit of %d (grpc_max_message_size; keys and values must be within max_key_size and max_value_size, a write within max_write_bytes): %s",
				l.Actual, l.Max, e.Msg)
		}
	case codes.Unauthenticated, codes.PermissionDenied:
		e.kind = ErrPermissionDenied
	case codes.Unavailable:
		e.kind = ErrUnavailable
		switch {
		case retryInfo != nil:
			// The node's own answer: the request was not applied.
			c.retry = true
			c.retryAfter = retryInfo.GetRetryDelay().AsDuration()
		case write:
			// A transport failure: the write may have reached the node.
			e.kind = ErrAmbiguous
		default:
			c.retry = true
		}
	case codes.FailedPrecondition, codes.NotFound:
		// Stale routing: the request was not applied.
		e.kind = ErrUnavailable
		c.retry = routing
		switch {
		case routing:
		case st.Code() == codes.NotFound:
			// The node's verdict on what the request named.
			e.kind = ErrNotFound
		default:
			// The node's refusal before acting: what the request
			// names exists, but the cluster's state does not allow it.
			e.kind = ErrFailedPrecondition
		}
	case codes.Unknown:
		e.kind = ErrInternal
		if ambiguous != nil || write {
			e.kind = ErrAmbiguous
		}
	case codes.DeadlineExceeded, codes.Canceled:
		// Reported by the node (its own deadline), not our context.
		e.kind = ErrUnavailable
		if write {
			e.kind = ErrAmbiguous
		}
	default:
		e.kind = ErrInternal
		c.retry = !write && (st.Code() == codes.Internal || st.Code() == codes.Aborted)
	}
	return c
}

// contextEnded is the error for a request whose context ended before any
// attempt could be made: nothing was sent.
func contextEnded(op, endpoint string, ctxErr error) *Error {
	return &Error{Op: op, Endpoint: endpoint, Code: status.FromContextError(ctxErr).Code(),
		Msg: ctxErr.Error() + " before the request was sent", kind: ErrUnavailable, cause: ctxErr}
}
