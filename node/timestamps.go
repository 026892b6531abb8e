package node

import (
	"context"
	"errors"
	"math"
	"time"

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
// from the node's TimestampSource: for now the node's clock; the
// timestamp oracle of docs/versions.md implements the same interface and
// replaces it without the serving path changing.

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

// clockSource is the TimestampSource of a node's own clock.
type clockSource struct{ c *hlc.Clock }

func (s clockSource) Now(context.Context) (hlc.Timestamp, error) { return s.c.Now(), nil }

func (s clockSource) Observe(_ context.Context, ts hlc.Timestamp) error { return s.c.Update(ts) }

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
	var oe *hlc.OffsetError
	switch {
	case err == nil:
		return nil
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
// a write applied at, before the write is acknowledged. The write has
// applied whatever happens here, so a refusal is logged, not returned.
func (n *Node) observeVersion(ctx context.Context, v hlc.Timestamp) {
	if v.IsZero() {
		return
	}
	if err := n.clockGuard.update(v); err != nil {
		n.log.Warn("an applied version is beyond the clock's maximum offset", "version", v.String(), "err", err)
	}
	if _, isClock := n.timestamps.(clockSource); isClock {
		return
	}
	if err := n.timestamps.Observe(ctx, v); err != nil {
		n.log.Warn("the timestamp source refused an applied version", "version", v.String(), "err", err)
	}
}
