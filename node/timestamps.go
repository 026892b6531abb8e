package node

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/hlc"
)

// Where a node's timestamps come from (docs/versions.md).
//
// Every node keeps an hlc.Clock over its physical clock and moves it with
// every timestamp it sees: a request header's observed, a read timestamp
// it serves, a version it applies. Responses carry its reading (now).
//
// A write's proposal timestamp, and the timestamp a read starts from, come
// from the node's TimestampSource: the timestamp oracle of
// docs/versions.md, through the node's batching client (oracleSource,
// tso.go). A node's own clock would not do: it gives no real-time order
// across nodes.

// TimestampSource issues the timestamps writes are proposed at.
type TimestampSource interface {
	// Now returns a timestamp issued after the call began: above every
	// timestamp Observe was given before it.
	Now(ctx context.Context) (hlc.Timestamp, error)
	// Observe makes every later Now return a timestamp above ts. A write
	// that applied at a version above the timestamp it was proposed at is
	// acknowledged only after Observe of its version returns.
	Observe(ctx context.Context, ts hlc.Timestamp) error
}

// timestampFromProto reads a wire timestamp; nil and the zero timestamp
// are "none" (ok false).
func timestampFromProto(field string, p *kvpb.Timestamp) (ts hlc.Timestamp, ok bool, err error) {
	if p == nil || (p.GetWallNanos() == 0 && p.GetLogical() == 0) {
		return hlc.Timestamp{}, false, nil
	}
	if p.GetWallNanos() < 0 || p.GetLogical() > math.MaxInt32 {
		return hlc.Timestamp{}, false, invalidArgument(field, "malformed timestamp %d,%d: wall_nanos must not be negative and logical must be below 2^31",
			p.GetWallNanos(), p.GetLogical())
	}
	return hlc.Timestamp{WallTime: p.GetWallNanos(), Logical: int32(p.GetLogical())}, true, nil
}

// observeHeader refuses a request that needs a timestamp while the node's
// clock may not serve (clock.go), and moves the clock past the request's
// observed timestamp. A reading beyond the maximum clock offset is
// refused: the request is not served (Unavailable with a ClockOffset
// detail: the client goes to another node) and the refusal is logged and
// counted.
func (n *Node) observeHeader(op string, h *kvpb.RequestHeader) error {
	if err := n.checkClock(op); err != nil {
		return err
	}
	ts, ok, err := timestampFromProto("header.observed", h.GetObserved())
	if err != nil || !ok {
		return err
	}
	return n.updateClock(op, ts)
}

// updateClock moves the node's clock to ts, or refuses as observeHeader.
// A client's reading refused refuses that request only: unlike a peer's
// or the oracle's, it does not take the node's clock out of service (a
// client with a broken clock must not stop a node), but it is counted
// with the clock's refusals.
func (n *Node) updateClock(op string, ts hlc.Timestamp) error {
	err := n.clock.Update(ts)
	if err == nil {
		// Before oe: errors.As's pointer moves it to the heap, and every
		// request with a header passes here.
		return nil
	}
	var oe *hlc.OffsetError
	switch {
	case errors.As(err, &oe):
		n.clockGuard.refusals.Add(1)
		n.log.Warn("refused a request whose observed timestamp is beyond the maximum clock offset",
			"op", op, "remote", oe.Remote.String(), "offset", oe.Offset(), "max_offset", oe.MaxOffset)
		return n.clockOffsetStatus(op, err)
	default:
		return invalidArgument("header.observed", "%v", err)
	}
}

// proposalTimestamp returns the timestamp a write is proposed at.
func (n *Node) proposalTimestamp(ctx context.Context, op string) (hlc.Timestamp, error) {
	ts, err := n.timestamps.Now(ctx)
	if err != nil {
		return hlc.Timestamp{}, unavailable(100*time.Millisecond, "%s: not applied: no timestamp: %v", op, err)
	}
	return ts, nil
}

// observeVersion tells the clock and the timestamp source about a version
// a write applied at, before the write is acknowledged: a version above
// the oracle timestamp the write was proposed at must be observed by the
// oracle first, or a write that starts after this one is acknowledged
// could get a lower timestamp (docs/versions.md, "Observe"). The write has
// applied whatever happens here: when the oracle cannot be told, the
// outcome is reported unknown (Unknown + AmbiguousResult) rather than
// acknowledged; a clock refusal is logged.
func (n *Node) observeVersion(ctx context.Context, op string, v hlc.Timestamp) error {
	if v.IsZero() {
		return nil
	}
	if err := n.clockGuard.update(v); err != nil {
		n.log.Warn("an applied version is beyond the clock's maximum offset", "version", v.String(), "err", err)
	}
	if err := n.timestamps.Observe(ctx, v); err != nil {
		n.log.Warn("the timestamp oracle could not observe an applied version", "version", v.String(), "err", err)
		reason := fmt.Sprintf("applied at version %s, but the timestamp oracle could not be moved past it: %v", v, err)
		st := status.Newf(codes.Unknown, "%s: %s", op, reason)
		return withDetails(st, &kvpb.AmbiguousResult{Reason: reason})
	}
	return nil
}

// observeFrontier moves the node's clock to a frontier one of its replicas
// applied (rangesm.Config.Observe), so that a follower's clock follows
// the versions it holds. A frontier beyond the maximum offset is not a
// refusal that stops the node: a close at a client's read timestamp may
// legitimately be up to the maximum offset ahead of the leader's clock,
// and so a little more ahead of this one; the offset monitor judges the
// clocks themselves. The replicas load (and publish) before the clock
// exists: those frontiers are skipped.
func (n *Node) observeFrontier(f hlc.Timestamp) {
	if c := n.clock; c != nil {
		_ = c.Update(f)
	}
}
