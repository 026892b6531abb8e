package raft

import (
	"errors"
	"fmt"

	"github.com/shaledb/shale/api/kvpb"
)

// Sentinel errors. Every error the Store returns to a caller matches one
// of them with errors.Is, so that the server maps it to the right gRPC
// status (docs/wire-protocol.md).
var (
	// ErrRangeNotFound: this node holds no replica of the range. Nothing
	// was applied.
	ErrRangeNotFound = errors.New("raft: range not found on this node")
	// ErrNotLeader: this replica is not the range's leader; the error is a
	// *NotLeaderError with the leader hint. Nothing was applied.
	ErrNotLeader = errors.New("raft: not leader")
	// ErrUnavailable: the request was NOT applied (dropped by Raft, no
	// leader, overloaded, or abandoned before it entered the log). It is
	// safe to retry.
	ErrUnavailable = errors.New("raft: unavailable")
	// ErrAmbiguous: the write entered the Raft log but its outcome is
	// unknown (leadership lost, deadline hit, node stopping). It may or
	// may not be applied; a retry with the same client ID and request_seq
	// is applied at most once.
	ErrAmbiguous = errors.New("raft: ambiguous result")
	// ErrStopped: the Store is stopped. For a write that had entered the
	// log this is wrapped in an AmbiguousError.
	ErrStopped = errors.New("raft: store stopped")
	// ErrRejected: the command was applied as a deterministic rejection
	// (see command.Code); nothing changed.
	ErrRejected = errors.New("raft: command rejected")
)

// NotLeaderError says where the leader is believed to be.
type NotLeaderError struct {
	RangeID uint64
	// LeaderReplicaID and LeaderNodeID are 0 when no leader is known.
	LeaderReplicaID uint64
	LeaderNodeID    uint64
	// Descriptor is this node's descriptor of the range.
	Descriptor *kvpb.RangeDescriptor
}

func (e *NotLeaderError) Error() string {
	if e.LeaderNodeID == 0 {
		return fmt.Sprintf("raft: range %d: not leader, no leader known", e.RangeID)
	}
	return fmt.Sprintf("raft: range %d: not leader; leader is replica %d on node %d", e.RangeID, e.LeaderReplicaID, e.LeaderNodeID)
}

// Is makes NotLeaderError match ErrNotLeader.
func (e *NotLeaderError) Is(target error) bool { return target == ErrNotLeader }

// AmbiguousError is a write whose outcome is unknown.
type AmbiguousError struct {
	RangeID uint64
	Reason  string
	Cause   error
}

func (e *AmbiguousError) Error() string {
	s := fmt.Sprintf("raft: range %d: result ambiguous: %s", e.RangeID, e.Reason)
	if e.Cause != nil {
		s += ": " + e.Cause.Error()
	}
	return s
}

// Is makes AmbiguousError match ErrAmbiguous.
func (e *AmbiguousError) Is(target error) bool { return target == ErrAmbiguous }

// Unwrap returns the cause (a context error, ErrStopped...).
func (e *AmbiguousError) Unwrap() error { return e.Cause }

// unavailablef returns an error matching ErrUnavailable.
func unavailablef(rangeID uint64, format string, args ...any) error {
	return fmt.Errorf("%w: range %d: %s", ErrUnavailable, rangeID, fmt.Sprintf(format, args...))
}

func ambiguous(rangeID uint64, reason string, cause error) error {
	return &AmbiguousError{RangeID: rangeID, Reason: reason, Cause: cause}
}
