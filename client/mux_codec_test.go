package client

import (
	"errors"
	"testing"

	"github.com/shaledb/shale/api/kvpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// TestMuxResultDecoding: a multiplexed result turns into what the unary
// call would have returned: the response, or the node's status with its
// typed details, which routing and classify read as from a unary call.
func TestMuxResultDecoding(t *testing.T) {
	want := &kvpb.GetResponse{Found: true, Value: []byte("v"), Header: &kvpb.ResponseHeader{NodeId: 2}}
	b, err := proto.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	var got kvpb.GetResponse
	if err := decodeResult(&kvpb.MuxResult{CallId: 1, Response: b}, &got); err != nil || !proto.Equal(&got, want) {
		t.Fatalf("decodeResult = %v, %v; want %v", &got, err, want)
	}

	nl := &kvpb.NotLeader{RangeId: 7, Leader: &kvpb.NodeDescriptor{NodeId: 3, Address: "h:3"}}
	d, err := proto.Marshal(nl)
	if err != nil {
		t.Fatal(err)
	}
	res := &kvpb.MuxResult{CallId: 2, Status: &kvpb.MuxStatus{
		Code: int32(codes.FailedPrecondition), Message: "Put: not leader",
		Details: []*kvpb.MuxDetail{{TypeUrl: "type.googleapis.com/shale.kv.v1.NotLeader", Value: d}},
	}}
	err = decodeResult(res, &got)
	st := status.Convert(err)
	if st.Code() != codes.FailedPrecondition || st.Message() != "Put: not leader" || len(st.Details()) != 1 {
		t.Fatalf("decodeResult = %v, want FailedPrecondition with one detail", err)
	}
	if gotNL, ok := st.Details()[0].(*kvpb.NotLeader); !ok || !proto.Equal(gotNL, nl) {
		t.Fatalf("detail = %v, want %v", st.Details()[0], nl)
	}
	cl := classify("Put", "h:1", true, err, nil)
	if !cl.retry || cl.leader != "h:3" {
		t.Errorf("classify(NotLeader) = retry %v, leader %q; want a retry at h:3", cl.retry, cl.leader)
	}
}

// TestMuxBrokenStreamVerdicts: a write that was not sent is retried; one
// that may have reached the node is ambiguous; a read is retried either
// way.
func TestMuxBrokenStreamVerdicts(t *testing.T) {
	notSentErr := notSent("the multiplexed stream broke before the request was sent")
	inFlightErr := inFlight("multiplexed stream broke while the request was in flight: EOF")
	cases := []struct {
		name  string
		err   error
		write bool
		kind  error
		retry bool
	}{
		{"write not sent", notSentErr, true, ErrUnavailable, true},
		{"write in flight", inFlightErr, true, ErrAmbiguous, false},
		{"read in flight", inFlightErr, false, ErrUnavailable, true},
	}
	for _, c := range cases {
		cl := classify("Op", "h:1", c.write, c.err, nil)
		if !errors.Is(cl.err, c.kind) || cl.retry != c.retry {
			t.Errorf("%s: classify = %v (retry %v), want %v (retry %v)", c.name, cl.err, cl.retry, c.kind, c.retry)
		}
	}
}
