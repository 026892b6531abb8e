package client

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/shaledb/shale/api/kvpb"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"
)

func statusErr(t *testing.T, code codes.Code, msg string, details ...protoadapt.MessageV1) error {
	t.Helper()
	st, err := status.New(code, msg).WithDetails(details...)
	if err != nil {
		t.Fatal(err)
	}
	return st.Err()
}

// TestClassify pins what the client concludes from each answer of
// docs/wire-protocol.md's error table.
func TestClassify(t *testing.T) {
	retryInfo := &errdetails.RetryInfo{RetryDelay: durationpb.New(250 * time.Millisecond)}
	cases := []struct {
		name      string
		err       error
		ctxErr    error
		write     bool
		kind      error
		retry     bool
		wantAfter time.Duration
	}{
		{"invalid argument", statusErr(t, codes.InvalidArgument, "key: too long",
			&kvpb.LimitExceeded{Limit: "max_key_size", Max: 8192, Actual: 9000}), nil, true, ErrInvalidArgument, false, 0},
		{"node refused a write", statusErr(t, codes.Unavailable, "stopping", retryInfo), nil, true, ErrUnavailable, true, 250 * time.Millisecond},
		{"transport failure, write", status.Error(codes.Unavailable, "connection reset"), nil, true, ErrAmbiguous, false, 0},
		{"transport failure, read", status.Error(codes.Unavailable, "connection reset"), nil, false, ErrUnavailable, true, 0},
		{"ambiguous commit", statusErr(t, codes.Unknown, "I/O error", &kvpb.AmbiguousResult{Reason: "fsync"}), nil, true, ErrAmbiguous, false, 0},
		{"disk full", status.Error(codes.ResourceExhausted, "disk full"), nil, true, ErrResourceExhausted, false, 0},
		{"stale routing", statusErr(t, codes.FailedPrecondition, "not leader", &kvpb.NotLeader{RangeId: 1}), nil, true, ErrUnavailable, true, 0},
		{"range not here", statusErr(t, codes.NotFound, "range 9", &kvpb.RangeNotFound{RangeId: 9}), nil, false, ErrUnavailable, true, 0},
		{"unknown node", status.Error(codes.NotFound, "Decommission: node 9 is not registered"), nil, true, ErrNotFound, false, 0},
		{"corruption", status.Error(codes.DataLoss, "checksum"), nil, false, ErrInternal, false, 0},
		{"our deadline, write", status.Error(codes.DeadlineExceeded, "deadline"), context.DeadlineExceeded, true, ErrAmbiguous, false, 0},
		{"our deadline, read", status.Error(codes.DeadlineExceeded, "deadline"), context.DeadlineExceeded, false, ErrUnavailable, false, 0},
		{"cancelled write", status.Error(codes.Canceled, "canceled"), context.Canceled, true, ErrAmbiguous, false, 0},
		{"history compacted", statusErr(t, codes.FailedPrecondition, "below the GC threshold",
			&kvpb.HistoryCompacted{RangeId: 3, ReadTimestamp: &kvpb.Timestamp{WallNanos: 5}, GcThreshold: &kvpb.Timestamp{WallNanos: 9}}), nil, false, ErrHistoryCompacted, false, 0},
		// Sent with Unavailable but no RetryInfo: still not applied, even
		// for a write, and another node may serve it.
		{"clock offset, write", statusErr(t, codes.Unavailable, "clock offset", &kvpb.ClockOffset{NodeId: 2, OffsetNanos: 9e8, MaxOffsetNanos: 5e8}), nil, true, ErrClockOffset, true, 0},
		{"clock offset, read", statusErr(t, codes.Unavailable, "clock offset", &kvpb.ClockOffset{NodeId: 2}), nil, false, ErrUnavailable, true, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cl := classify("Op", "host:1", c.write, c.err, c.ctxErr)
			if !errors.Is(cl.err, c.kind) || cl.retry != c.retry || cl.retryAfter != c.wantAfter {
				t.Fatalf("classify = %v (retry %v after %v), want %v (retry %v after %v)",
					cl.err, cl.retry, cl.retryAfter, c.kind, c.retry, c.wantAfter)
			}
			if c.ctxErr != nil && !errors.Is(cl.err, c.ctxErr) {
				t.Fatalf("%v does not match the context's error %v", cl.err, c.ctxErr)
			}
			if cl.err.Endpoint != "host:1" || cl.err.Op != "Op" {
				t.Fatalf("error does not name the operation and endpoint: %+v", cl.err)
			}
		})
	}
	cl := classify("Put", "h:1", true, cases[0].err, nil)
	if cl.err.Limit.GetLimit() != "max_key_size" {
		t.Fatalf("Limit = %v", cl.err.Limit)
	}
	if got := cl.err.Error(); got != "client: Put: h:1: key: too long" {
		t.Fatalf("Error() = %q", got)
	}
}

func TestBackoffStaysInBounds(t *testing.T) {
	c := &Client{opts: (&Options{MaxBackoff: 500 * time.Millisecond}).withDefaults()}
	for n := 0; n < 40; n++ {
		d := c.backoff(n)
		ceiling := min(500*time.Millisecond, 10*time.Millisecond<<min(n, 20))
		if d < ceiling/2 || d > ceiling {
			t.Fatalf("backoff(%d) = %v, want within [%v, %v]", n, d, ceiling/2, ceiling)
		}
	}
}

// A plaintext client refused by a TLS node is told why; a TLS client, or
// any other failure, keeps the transport's own words.
func TestExplainTransportFailure(t *testing.T) {
	const eof = `connection error: desc = "error reading server preface: EOF"`
	if got := explainTransportFailure(eof, false); !strings.Contains(got, "TLS") || !strings.HasPrefix(got, eof) {
		t.Errorf("plaintext client: %q", got)
	}
	if got := explainTransportFailure(eof, true); got != eof {
		t.Errorf("TLS client: %q", got)
	}
	const refused = "connection refused"
	if got := explainTransportFailure(refused, false); got != refused {
		t.Errorf("refused: %q", got)
	}
}

// TestClassifySizeAndQuorumAnswers: gRPC's message size refusal is an
// invalid argument naming the cap, not a full disk; a NoQuorum answer is
// a definite Unavailable, even for a write.
func TestClassifySizeAndQuorumAnswers(t *testing.T) {
	tooBig := status.Error(codes.ResourceExhausted, "grpc: received message larger than max (20971551 vs. 17162752)")
	cl := classify("Put", "n1", true, tooBig, nil)
	if !errors.Is(cl.err, ErrInvalidArgument) || errors.Is(cl.err, ErrResourceExhausted) || cl.retry {
		t.Fatalf("size refusal classified as %v (retry %v)", cl.err, cl.retry)
	}
	if l := cl.err.Limit; l == nil || l.Limit != "grpc_max_message_size" || l.Max != 17162752 || l.Actual != 20971551 {
		t.Fatalf("size refusal names no limit: %+v", cl.err.Limit)
	}
	full := status.Error(codes.ResourceExhausted, "Put: the node's disk is full")
	if cl := classify("Put", "n1", true, full, nil); !errors.Is(cl.err, ErrResourceExhausted) {
		t.Fatalf("a full disk classified as %v", cl.err)
	}
	st, err := status.New(codes.Unavailable, "Put: range 7 has no quorum: 2 of 3 replicas unreachable (n2, n3)").
		WithDetails(&kvpb.NoQuorum{RangeId: 7, Voters: 3, UnreachableNodes: []uint64{2, 3}}, &errdetails.RetryInfo{})
	if err != nil {
		t.Fatal(err)
	}
	cl = classify("Put", "n1", true, st.Err(), nil)
	if !errors.Is(cl.err, ErrUnavailable) || errors.Is(cl.err, ErrAmbiguous) || cl.noQuorum.GetRangeId() != 7 {
		t.Fatalf("no quorum classified as %v (noQuorum %v)", cl.err, cl.noQuorum)
	}
}

// TestVersionErrors: the two errors of versions carry their details, say
// nothing was applied, and ErrClockOffset also reads as ErrUnavailable.
func TestVersionErrors(t *testing.T) {
	hc := classify("Get", "h:1", false, statusErr(t, codes.FailedPrecondition, "below",
		&kvpb.HistoryCompacted{RangeId: 3, GcThreshold: &kvpb.Timestamp{WallNanos: 9}}), nil).err
	if hc.Compacted.GetRangeId() != 3 || hc.Compacted.GetGcThreshold().GetWallNanos() != 9 {
		t.Fatalf("Compacted = %v", hc.Compacted)
	}
	if errors.Is(hc, ErrUnavailable) || errors.Is(hc, ErrInternal) || hc.Outcome() != NotApplied {
		t.Fatalf("%v: matches another kind or outcome %v", hc, hc.Outcome())
	}
	if !strings.Contains(hc.Error(), "history compacted") {
		t.Fatalf("message %q does not say history compacted", hc.Error())
	}
	co := classify("Put", "h:1", true, statusErr(t, codes.Unavailable, "clock", &kvpb.ClockOffset{NodeId: 2, OffsetNanos: 7}), nil).err
	if co.ClockOffset.GetNodeId() != 2 || co.Kind() != ErrClockOffset || !errors.Is(co, ErrUnavailable) ||
		errors.Is(co, ErrAmbiguous) || co.Outcome() != NotApplied {
		t.Fatalf("%v: kind %v, outcome %v, details %v", co, co.Kind(), co.Outcome(), co.ClockOffset)
	}
	for _, k := range []error{ErrHistoryCompacted, ErrClockOffset} {
		if e := NewError(k, "Op", "m"); e.Kind() != k {
			t.Errorf("NewError(%v) has kind %v", k, e.Kind())
		}
	}
}
