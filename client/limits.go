package client

import (
	"fmt"
	"regexp"
	"strconv"

	"github.com/shaledb/shale/api/kvpb"
	"google.golang.org/grpc/codes"
)

// Size limits (docs/wire-protocol.md, "Limits").
//
// The client refuses a key or value over the cluster's limits before
// sending it, with ErrInvalidArgument naming the limit, as the node would:
// an oversized request costs no round trip, and on a multiplexed stream
// it cannot break the stream for the calls sharing it. The node checks
// again (its limits are authoritative). gRPC's own refusal of a message
// over its size cap ("received message larger than max", code
// ResourceExhausted, which the client reserves for a full disk) is turned
// into the same ErrInvalidArgument, naming that cap.

// checkKey refuses key over Options.MaxKeySize.
func (c *Client) checkKey(op, field string, key []byte) *Error {
	return overLimit(op, field, "key", "max_key_size", c.opts.MaxKeySize, len(key))
}

// checkValue refuses value over Options.MaxValueSize.
func (c *Client) checkValue(op, field string, value []byte) *Error {
	return overLimit(op, field, "value", "max_value_size", c.opts.MaxValueSize, len(value))
}

func overLimit(op, field, what, limit string, max, actual int) *Error {
	if max <= 0 || actual <= max {
		return nil
	}
	return &Error{Op: op, Code: codes.InvalidArgument, kind: ErrInvalidArgument,
		Msg:   fmt.Sprintf("%s: %s is %d bytes, over the limit of %d (%s); not sent", field, what, actual, max, limit),
		Limit: &kvpb.LimitExceeded{Limit: limit, Max: uint64(max), Actual: uint64(actual)}}
}

// checkMutations refuses a mutation whose key or value is over a limit.
func (c *Client) checkMutations(op string, muts []Mutation) *Error {
	for i, m := range muts {
		field := fmt.Sprintf("mutations[%d]", i)
		switch o := m.m.GetOp().(type) {
		case *kvpb.Mutation_Put:
			if e := c.checkKey(op, field+".put.key", o.Put.GetKey()); e != nil {
				return e
			}
			if e := c.checkValue(op, field+".put.value", o.Put.GetValue()); e != nil {
				return e
			}
		case *kvpb.Mutation_Delete:
			if e := c.checkKey(op, field+".delete.key", o.Delete.GetKey()); e != nil {
				return e
			}
		case *kvpb.Mutation_DeleteRange:
			if e := c.checkKey(op, field+".delete_range.start_key", o.DeleteRange.GetStartKey()); e != nil {
				return e
			}
			if e := c.checkKey(op, field+".delete_range.end_key", o.DeleteRange.GetEndKey()); e != nil {
				return e
			}
		}
	}
	return nil
}

// grpcTooLarge matches gRPC's refusal of an oversized message, sending
// ("trying to send message larger than max (N vs. M)") or receiving
// ("received message larger than max (N vs. M)").
var grpcTooLarge = regexp.MustCompile(`message larger than max \((\d+) vs\. (\d+)\)`)

// messageTooLarge returns, for gRPC's refusal of an oversized message,
// the LimitExceeded it amounts to; nil for any other message.
func messageTooLarge(msg string) *kvpb.LimitExceeded {
	m := grpcTooLarge.FindStringSubmatch(msg)
	if m == nil {
		return nil
	}
	actual, _ := strconv.ParseUint(m[1], 10, 64)
	max, _ := strconv.ParseUint(m[2], 10, 64)
	return &kvpb.LimitExceeded{Limit: "grpc_max_message_size", Max: max, Actual: actual}
}
