package client

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/shaledb/shale/api/kvpb"
)

// Protected timestamps (docs/versions.md, "Protected timestamps"). The
// cluster keeps versions for a retention window (10 minutes by default);
// a read at an older timestamp fails with ErrHistoryCompacted. A
// protection keeps the history a read at one timestamp needs, on a span
// of keys, past the window, until it expires or is released: GC never
// collects a version that a read at a protected timestamp sees. Backup
// takes one for its run; hold one yourself for any other long read at a
// fixed timestamp.
//
// A protection must be created while its timestamp is recent: at most
// half the retention window old (older is ErrFailedPrecondition, since
// GC may already have passed it). It lasts for its TTL unless refreshed;
// refresh it well before it expires (a third of the TTL is what Backup
// uses): a refresh of an expired protection is ErrNotFound, and GC may
// then have collected below its timestamp.

// ProtectionID names a protection. 0 is none.
type ProtectionID uint64

// Protection describes a protected timestamp.
type Protection struct {
	ID ProtectionID
	// Timestamp is protected on [Start, End) (an empty End: to the end
	// of the key space).
	Timestamp  Timestamp
	Start, End []byte
	// Expiry is when it stops protecting unless refreshed.
	Expiry time.Time
	// Created is when it was made.
	Created Timestamp
	// Description says who holds it.
	Description string
}

// MaxProtectionTTL is the longest TTL a protection is created or
// refreshed with (a week).
const MaxProtectionTTL = 7 * 24 * time.Hour

func (c *Client) protection(e *endpoint) kvpb.ProtectionClient { return kvpb.NewProtectionClient(e.cc) }

func protectionOf(op string, p *kvpb.ProtectionInfo) (Protection, error) {
	ts, err := fromProto(p.GetTimestamp())
	if err != nil {
		return Protection{}, &Error{Op: op, Msg: err.Error(), kind: ErrInternal}
	}
	created, err := fromProto(p.GetCreated())
	if err != nil {
		return Protection{}, &Error{Op: op, Msg: err.Error(), kind: ErrInternal}
	}
	return Protection{ID: ProtectionID(p.GetId()), Timestamp: ts, Start: p.GetStartKey(), End: p.GetEndKey(),
		Expiry: time.Unix(0, p.GetExpiryNanos()).UTC(), Created: created, Description: p.GetDescription()}, nil
}

func checkProtectionTTL(op string, ttl time.Duration) error {
	if ttl <= 0 || ttl > MaxProtectionTTL {
		return &Error{Op: op, Msg: fmt.Sprintf("a protection's TTL must be above 0 and at most %v, got %v", MaxProtectionTTL, ttl), kind: ErrInvalidArgument}
	}
	return nil
}

// Protect protects ts on [start, end) (an empty end: to the end of the
// key space) for ttl; the zero ts protects the cluster's current time
// (the result says which). Errors: ErrInvalidArgument for an empty or
// inverted span, a ts in the future (beyond the maximum clock offset), a
// ttl <= 0 or above MaxProtectionTTL, or a description over 256 bytes;
// ErrFailedPrecondition for a ts older than half the retention window.
// Nothing is created on those errors; an ErrAmbiguous Protect may have
// created a protection nobody holds, which lapses at its TTL
// (Protections lists it).
func (c *Client) Protect(ctx context.Context, start, end []byte, ts Timestamp, ttl time.Duration, description string) (Protection, error) {
	const op = "Protect"
	if err := checkProtectionTTL(op, ttl); err != nil {
		return Protection{}, err
	}
	if len(end) > 0 && bytes.Compare(start, end) >= 0 {
		return Protection{}, &Error{Op: op, Msg: fmt.Sprintf("empty or inverted span [%q, %q)", start, end), kind: ErrInvalidArgument}
	}
	if !ts.IsZero() {
		if err := checkTimestamp(op, "timestamp", ts); err != nil {
			return Protection{}, err
		}
	}
	req := &kvpb.ProtectRequest{StartKey: start, EndKey: end, Timestamp: toProto(ts), TtlMs: ttl.Milliseconds(), Description: description}
	return c.protect(ctx, op, req)
}

// RefreshProtection extends protection id to expire ttl from now (never
// earlier than it would have). An unknown, released or expired
// protection is ErrNotFound.
func (c *Client) RefreshProtection(ctx context.Context, id ProtectionID, ttl time.Duration) (Protection, error) {
	const op = "RefreshProtection"
	if err := checkProtectionTTL(op, ttl); err != nil {
		return Protection{}, err
	}
	if id == 0 {
		return Protection{}, &Error{Op: op, Msg: "protection ID 0 names no protection", kind: ErrInvalidArgument}
	}
	return c.protect(ctx, op, &kvpb.ProtectRequest{Id: uint64(id), TtlMs: ttl.Milliseconds()})
}

func (c *Client) protect(ctx context.Context, op string, req *kvpb.ProtectRequest) (Protection, error) {
	var resp *kvpb.ProtectResponse
	err := c.do(ctx, op, true, func(ctx context.Context, e *endpoint) (err error) {
		resp, err = c.protection(e).Protect(ctx, req)
		return err
	})
	if err != nil {
		return Protection{}, err
	}
	return protectionOf(op, resp.GetProtection())
}

// ReleaseProtection removes protection id: GC may then collect what it
// kept. An unknown (or already released, or expired and removed)
// protection is ErrNotFound.
func (c *Client) ReleaseProtection(ctx context.Context, id ProtectionID) error {
	const op = "ReleaseProtection"
	if id == 0 {
		return &Error{Op: op, Msg: "protection ID 0 names no protection", kind: ErrInvalidArgument}
	}
	return c.do(ctx, op, true, func(ctx context.Context, e *endpoint) error {
		_, err := c.protection(e).Release(ctx, &kvpb.ReleaseRequest{Id: uint64(id)})
		return err
	})
}

// Protections lists the protections that have not expired, in ID order.
func (c *Client) Protections(ctx context.Context) ([]Protection, error) {
	const op = "Protections"
	var resp *kvpb.ProtectionsResponse
	err := c.do(ctx, op, false, func(ctx context.Context, e *endpoint) (err error) {
		resp, err = c.protection(e).Protections(ctx, &kvpb.ProtectionsRequest{})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]Protection, 0, len(resp.GetProtections()))
	for _, p := range resp.GetProtections() {
		pr, err := protectionOf(op, p)
		if err != nil {
			return nil, err
		}
		out = append(out, pr)
	}
	return out, nil
}
