package client

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/hlc"
)

// Timestamp is a version and a point in time to read at: a wall time in
// Unix nanoseconds and a logical counter that orders timestamps within
// one nanosecond (docs/versions.md). It is hlc.Timestamp, the type the
// nodes use, so that ordering (Compare, Less), Next and the zero value
// ("no timestamp") mean the same on both sides of the wire.
type Timestamp = hlc.Timestamp

// ParseTimestamp reads a timestamp in one of the forms shalectl's --at
// accepts (docs/wire-protocol.md, "Versions and timestamps"):
//
//	1795798530123456789,3            wall nanoseconds, logical
//	1795798530123456789              wall nanoseconds (logical 0)
//	2026-11-27T16:55:30.123456789Z,3 RFC 3339 wall time, logical
//	2026-11-27T16:55:30Z             RFC 3339 wall time (logical 0)
//
// FormatTimestamp writes the RFC 3339 form, which reads back to the same
// timestamp. A malformed timestamp is an error wrapping hlc.ErrMalformed.
func ParseTimestamp(s string) (Timestamp, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Timestamp{}, fmt.Errorf("%w: empty", hlc.ErrMalformed)
	}
	if s[0] >= '0' && s[0] <= '9' && !strings.ContainsAny(s, "-:T") {
		return hlc.Parse(s)
	}
	wall, logical, hasLogical := strings.Cut(s, ",")
	t, err := time.Parse(time.RFC3339Nano, wall)
	if err != nil {
		return Timestamp{}, fmt.Errorf("%w: %q: want wall nanoseconds[,logical] or an RFC 3339 time[,logical] (e.g. 2026-11-27T16:55:30.5Z)", hlc.ErrMalformed, s)
	}
	if t.Before(time.Unix(0, 0)) || t.After(time.Unix(0, math.MaxInt64)) {
		return Timestamp{}, fmt.Errorf("%w: %q: the time is outside 1970-01-01 to 2262-04-11", hlc.ErrMalformed, s)
	}
	ts := Timestamp{WallTime: t.UnixNano()}
	if hasLogical {
		l, err := strconv.ParseInt(logical, 10, 32)
		if err != nil || l < 0 {
			return Timestamp{}, fmt.Errorf("%w: %q: logical part must be a non-negative 32-bit integer", hlc.ErrMalformed, s)
		}
		ts.Logical = int32(l)
	}
	return ts, nil
}

// FormatTimestamp writes ts readably: its wall time in RFC 3339 with
// nanoseconds, in UTC, and ",logical" when the logical part is not zero
// ("2026-11-27T16:55:30.123456789Z,3"). ParseTimestamp reads it back
// exactly. The zero Timestamp is "-".
func FormatTimestamp(ts Timestamp) string {
	if ts.IsZero() {
		return "-"
	}
	s := time.Unix(0, ts.WallTime).UTC().Format(time.RFC3339Nano)
	if ts.Logical != 0 {
		s += "," + strconv.FormatInt(int64(ts.Logical), 10)
	}
	return s
}

// toProto is ts on the wire; nil for the zero Timestamp (unset).
func toProto(ts Timestamp) *kvpb.Timestamp {
	if ts.IsZero() {
		return nil
	}
	return &kvpb.Timestamp{WallNanos: ts.WallTime, Logical: uint32(ts.Logical)}
}

// fromProto reads a timestamp a node sent; unset is the zero Timestamp.
func fromProto(p *kvpb.Timestamp) (Timestamp, error) {
	if p == nil {
		return Timestamp{}, nil
	}
	if p.GetWallNanos() < 0 || p.GetLogical() > math.MaxInt32 {
		return Timestamp{}, fmt.Errorf("%w: wall %d, logical %d", hlc.ErrMalformed, p.GetWallNanos(), p.GetLogical())
	}
	return Timestamp{WallTime: p.GetWallNanos(), Logical: int32(p.GetLogical())}, nil
}

// checkTimestamp refuses a timestamp the caller gave that cannot name a
// point in time: the zero Timestamp or a negative field.
func checkTimestamp(op, what string, ts Timestamp) *Error {
	switch {
	case ts.IsZero():
		return &Error{Op: op, Msg: what + " is the zero Timestamp, which names no point in time", kind: ErrInvalidArgument}
	case !ts.Valid():
		return &Error{Op: op, Msg: fmt.Sprintf("%s %s has a negative field", what, ts), kind: ErrInvalidArgument}
	}
	return nil
}

// highWater is the highest timestamp the client has seen: every version it
// wrote or read, every read_timestamp and every node's clock reading
// (response header now). Each request carries it as header.observed, so
// that the node it reaches moves its clock past it and a write that
// follows, on any range, gets a higher version than anything the client
// has seen (docs/wire-protocol.md, "Versions and timestamps"). Safe for concurrent use;
// a load is one atomic read.
type highWater struct{ p atomic.Pointer[Timestamp] }

func (h *highWater) load() Timestamp {
	if p := h.p.Load(); p != nil {
		return *p
	}
	return Timestamp{}
}

// observe raises the high-water mark to ts if it is higher.
func (h *highWater) observe(ts Timestamp) {
	for {
		cur := h.p.Load()
		if cur != nil && !cur.Less(ts) {
			return
		}
		if h.p.CompareAndSwap(cur, &ts) {
			return
		}
	}
}

// Observed returns the highest timestamp the client has seen (the zero
// Timestamp before its first answer). It is what the client sends as
// header.observed. Passing it to another client's ObserveTimestamp carries
// causality across clients: that client's later writes get higher
// versions.
func (c *Client) Observed() Timestamp { return c.observed.load() }

// ObserveTimestamp raises the client's observed timestamp to ts (if
// higher), as if the client had seen it in an answer.
func (c *Client) ObserveTimestamp(ts Timestamp) {
	if ts.Valid() {
		c.observed.observe(ts)
	}
}

// sawHeader takes the node's clock reading and read timestamp from a
// response header into the high-water mark, and returns the read
// timestamp (zero when the node sent none).
func (c *Client) sawHeader(op string, h *kvpb.ResponseHeader) (Timestamp, error) {
	now, err := fromProto(h.GetNow())
	if err != nil {
		return Timestamp{}, malformedAnswer(op, "header.now", err)
	}
	rt, err := fromProto(h.GetReadTimestamp())
	if err != nil {
		return Timestamp{}, malformedAnswer(op, "header.read_timestamp", err)
	}
	c.observed.observe(now)
	c.observed.observe(rt)
	return rt, nil
}

// sawVersion reads a version from an answer into the high-water mark.
func (c *Client) sawVersion(op, field string, p *kvpb.Timestamp) (Timestamp, error) {
	v, err := fromProto(p)
	if err != nil {
		return Timestamp{}, malformedAnswer(op, field, err)
	}
	c.observed.observe(v)
	return v, nil
}

func malformedAnswer(op, field string, err error) *Error {
	return &Error{Op: op, Msg: "the node answered a malformed " + field + ": " + err.Error(), kind: ErrInternal, cause: err}
}
