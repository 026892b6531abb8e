package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/rangesm"
	"github.com/shaledb/shale/storage"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"
)

// This file turns failures into the gRPC statuses of docs/wire-protocol.md.
// Every status a handler returns is built here, so that the code a client
// sees always says whether the request was applied.

// invalidArgument refuses a malformed request. field names the offending
// field, e.g. "mutations[3].put.key".
func invalidArgument(field, format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, "%s: %s", field, fmt.Sprintf(format, args...))
}

// limitExceeded refuses a request over one of the Limits, with a message
// and a LimitExceeded detail that both name the limit.
func limitExceeded(field, what, limit string, max, actual int) error {
	st := status.Newf(codes.InvalidArgument, "%s: %s is %d bytes, over the limit of %d (%s)", field, what, actual, max, limit)
	return withDetails(st, &kvpb.LimitExceeded{Limit: limit, Max: uint64(max), Actual: uint64(actual)})
}

// countExceeded is limitExceeded for counts rather than sizes.
func countExceeded(field, what, limit string, max, actual int) error {
	st := status.Newf(codes.InvalidArgument, "%s: %d %s, over the limit of %d (%s)", field, actual, what, max, limit)
	return withDetails(st, &kvpb.LimitExceeded{Limit: limit, Max: uint64(max), Actual: uint64(actual)})
}

// unavailable reports that the request was NOT applied and may be retried
// after backoff. The RetryInfo detail marks the status as the server's: a
// client can tell it from a transport failure, which may have hit a write
// in flight.
func unavailable(retryAfter time.Duration, format string, args ...any) error {
	st := status.Newf(codes.Unavailable, format, args...)
	return withDetails(st, &errdetails.RetryInfo{RetryDelay: durationpb.New(retryAfter)})
}

// rangeNotFound reports a request for a range this node does not hold.
func rangeNotFound(rangeID uint64) error {
	st := status.Newf(codes.NotFound, "range %d not found on this node", rangeID)
	return withDetails(st, &kvpb.RangeNotFound{RangeId: rangeID})
}

func withDetails(st *status.Status, details ...protoadapt.MessageV1) error {
	withD, err := st.WithDetails(details...)
	if err != nil {
		// Only a detail that cannot be marshalled fails; ours always can.
		return st.Err()
	}
	return withD.Err()
}

// readError maps an engine failure on a read. Reads change nothing, so
// every failure is safe to retry elsewhere.
func readError(op string, err error) error {
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	case errors.Is(err, storage.ErrClosed):
		return unavailable(time.Second, "%s: node is shutting down", op)
	case errors.Is(err, storage.ErrCorruption):
		return status.Errorf(codes.DataLoss, "%s: %v", op, err)
	case errors.Is(err, rangesm.ErrIntent):
		// What the read would answer depends on a transaction not yet
		// resolved (docs/transactions.md, "Readers and writers that meet
		// an intent"); the client retries after a pause.
		return unavailable(intentRetryDelay, "%s: key locked by a transaction across ranges not yet resolved: %v", op, err)
	default:
		return status.Errorf(codes.Internal, "%s: %v", op, err)
	}
}

// writeError maps a failure to commit a write. Failures the engine reports
// before writing anything are definite (Unavailable, ResourceExhausted,
// InvalidArgument). An I/O error during the commit is ambiguous: the WAL may
// or may not hold the batch, and a restart may or may not replay it.
func writeError(op string, err error) error {
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// The commit was not started: the context ended while waiting.
		return status.FromContextError(err).Err()
	case errors.Is(err, storage.ErrClosed):
		return unavailable(time.Second, "%s: node is shutting down; the write was not applied", op)
	case errors.Is(err, storage.ErrBusy):
		return unavailable(100*time.Millisecond, "%s: engine write stall; the write was not applied: %v", op, err)
	case errors.Is(err, storage.ErrNoSpace):
		return status.Errorf(codes.ResourceExhausted, "%s: the node's disk is full; the write was not applied: %v", op, err)
	case errors.Is(err, storage.ErrBackgroundError):
		return unavailable(5*time.Second, "%s: the node's engine has stopped writes; the write was not applied: %v", op, err)
	case errors.Is(err, storage.ErrInvalidArgument):
		return status.Errorf(codes.InvalidArgument, "%s: %v", op, err)
	default:
		st := status.Newf(codes.Unknown, "%s: the outcome of the write is unknown: %v", op, err)
		return withDetails(st, &kvpb.AmbiguousResult{Reason: err.Error()})
	}
}
