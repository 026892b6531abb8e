package node

import (
	"regexp"
	"strconv"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// gRPC refuses a message over the server's size cap (about twice
// max_write_bytes, Limits.maxRecvMsgSize) with ResourceExhausted, "received
// message larger than max (N vs. M)". The wire protocol keeps
// ResourceExhausted for a full disk, and the request was merely too large:
// where the node sees that refusal (a Multiplex stream's receive), it is
// answered as InvalidArgument naming the limit instead. A unary call is
// refused by gRPC before any of the node's code runs; the Go client maps
// that answer the same way (client/limits.go).

var grpcTooLarge = regexp.MustCompile(`message larger than max \((\d+) vs\. (\d+)\)`)

// messageSizeError returns err as InvalidArgument + LimitExceeded when it
// is gRPC's refusal of an oversized message; err unchanged otherwise.
func messageSizeError(err error) error {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.ResourceExhausted {
		return err
	}
	m := grpcTooLarge.FindStringSubmatch(st.Message())
	if m == nil {
		return err
	}
	actual, _ := strconv.Atoi(m[1])
	max, _ := strconv.Atoi(m[2])
	return limitExceeded("request", "the message", "grpc_max_message_size", max, actual)
}
