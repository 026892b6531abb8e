package client

import (
	"github.com/shaledb/shale/api/kvpb"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
)

// decodeResult turns a call's result into what the unary method would
// have returned: resp filled in, or the node's status as an error (with
// its details, so that classify and the routing cache see NotLeader,
// RangeKeyMismatch, RetryInfo, ... as from a unary call).
func decodeResult(r *kvpb.MuxResult, resp proto.Message) error {
	if ms := r.GetStatus(); ms != nil {
		if codes.Code(ms.GetCode()) == codes.OK {
			return status.Error(codes.Internal, "multiplexed call: the node answered an OK status without a response")
		}
		p := &spb.Status{Code: ms.GetCode(), Message: ms.GetMessage()}
		for _, d := range ms.GetDetails() {
			p.Details = append(p.Details, &anypb.Any{TypeUrl: d.GetTypeUrl(), Value: d.GetValue()})
		}
		return status.FromProto(p).Err()
	}
	if err := proto.Unmarshal(r.GetResponse(), resp); err != nil {
		return status.Errorf(codes.Internal, "multiplexed call: decoding the response: %v", err)
	}
	return nil
}

// notSent is the error of a call that certainly did not reach a node: the
// node-style "not applied, retry" answer (Unavailable with RetryInfo), so
// that classify retries it even when it is a write.
func notSent(msg string) error {
	st, err := status.New(codes.Unavailable, msg+"; not sent").
		WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(0)})
	if err != nil {
		return status.Error(codes.Unavailable, msg+"; not sent")
	}
	return st.Err()
}

// inFlight is the error of a call that may have reached a node when its
// stream broke: a transport failure (Unavailable without RetryInfo), which
// classify reports as ambiguous for a write and retries for a read.
func inFlight(msg string) error {
	return status.Error(codes.Unavailable, msg)
}
