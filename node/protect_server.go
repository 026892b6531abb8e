package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/rangesm"
)

// The Protection service (api/kvpb/protect.proto; docs/versions.md,
// "Protected timestamps"). The meta range's leader serves it, reading and
// proposing the records in meta (rangesm/protect.go); any other node
// forwards a call to it, as lease calls are.
//
// What a Protect checks beyond the record's own apply-time bound (its
// timestamp T at or above the proposal timestamp P minus half the
// retention window W): once the record has applied, that T is still above
// now + the maximum clock offset - W, now read from this node's clock. A
// GC pass that fetched the records before this one applied read its clock
// earlier still, so its target (that reading - W) is below T: no pass that
// missed the record collects what it protects. A Protect that took too
// long to apply fails that check; the record is released and the call
// fails Unavailable, to be retried. A refresh checks the same way that
// the record had not expired by any node's clock when it applied.

// MaxProtectionTTL bounds a protection's TTL: a week, so that a kept
// backup protection spans the time to a weekly incremental.
const MaxProtectionTTL = 7 * 24 * time.Hour

// protectionServer implements kvpb.ProtectionServer.
type protectionServer struct {
	kvpb.UnimplementedProtectionServer
	n *Node
}

// protectionInfo converts a record for the wire.
func protectionInfo(p rangesm.ProtectionRecord) *kvpb.ProtectionInfo {
	return &kvpb.ProtectionInfo{Id: p.ID, Timestamp: rangesm.TimestampProto(p.Timestamp), StartKey: p.Start, EndKey: p.End,
		ExpiryNanos: p.Expiry, Created: rangesm.TimestampProto(p.Created), Description: p.Description}
}

// protectionRecord converts a wire protection.
func protectionRecord(p *kvpb.ProtectionInfo) (rangesm.ProtectionRecord, error) {
	ts, err := tsFromProto(p.GetTimestamp())
	if err != nil {
		return rangesm.ProtectionRecord{}, err
	}
	created, err := tsFromProto(p.GetCreated())
	if err != nil {
		return rangesm.ProtectionRecord{}, err
	}
	return rangesm.ProtectionRecord{ID: p.GetId(), Timestamp: ts, Start: p.GetStartKey(), End: p.GetEndKey(),
		Expiry: p.GetExpiryNanos(), Created: created, Description: p.GetDescription()}, nil
}

// protectError maps an error of a protection call to a status.
func (n *Node) protectError(op string, err error) error {
	if err == nil {
		return nil
	}
	switch command.RejectionCode(err) {
	case command.CodeProtectionNotFound:
		return status.Errorf(codes.NotFound, "%s: %v", op, err)
	case command.CodeProtectionTooOld:
		return status.Errorf(codes.FailedPrecondition, "%s: %v", op, err)
	case command.CodeMalformed:
		return status.Errorf(codes.InvalidArgument, "%s: %v", op, err)
	}
	return n.leaseError(op, err)
}

func (s *protectionServer) Protect(ctx context.Context, req *kvpb.ProtectRequest) (*kvpb.ProtectResponse, error) {
	n := s.n
	ttl := time.Duration(req.GetTtlMs()) * time.Millisecond
	if req.GetTtlMs() <= 0 || req.GetTtlMs() > MaxProtectionTTL.Milliseconds() {
		return nil, invalidArgument("ttl_ms", "a protection's TTL must be above 0 and at most %v, got %dms", MaxProtectionTTL, req.GetTtlMs())
	}
	if req.GetId() == 0 {
		if err := command.CheckProtectSpan(req.GetStartKey(), req.GetEndKey()); err != nil {
			return nil, invalidArgument("end_key", "%v", err)
		}
		if len(req.GetDescription()) > command.MaxProtectDescription {
			return nil, invalidArgument("description", "%d bytes, at most %d", len(req.GetDescription()), command.MaxProtectDescription)
		}
		if req.GetTimestamp() != nil {
			t, err := tsFromProto(req.GetTimestamp())
			if err != nil || t.IsZero() {
				return nil, invalidArgument("timestamp", "%v", err)
			}
			if limit := n.clock.Now().Add(n.clock.MaxOffset()); limit.Less(t) {
				return nil, invalidArgument("timestamp", "%s is in the future (this node's clock plus the maximum offset is %s)", t, limit)
			}
		}
	}
	ctx, cancel := withLeaseTimeout(ctx)
	defer cancel()
	info, err := n.protect(ctx, req, ttl)
	if n.mustForward(ctx, err) {
		var resp *kvpb.ProtectResponse
		err = n.onMetaLeader(ctx, func(ctx context.Context, cc *grpc.ClientConn) (err error) {
			resp, err = kvpb.NewProtectionClient(cc).Protect(ctx, req)
			return err
		})
		return resp, err
	}
	if err != nil {
		return nil, n.protectError("Protect", err)
	}
	return &kvpb.ProtectResponse{Protection: info}, nil
}

// errProtectTooSlow reports a Protect that applied too late to be safe.
var errProtectTooSlow = errors.New("took too long to apply")

// protect creates or refreshes a protection as meta's leader.
func (n *Node) protect(ctx context.Context, req *kvpb.ProtectRequest, ttl time.Duration) (*kvpb.ProtectionInfo, error) {
	if _, err := (oracleMeta{n: n}).Lease(ctx); err != nil {
		return nil, err
	}
	p, err := n.timestamps.Now(ctx)
	if err != nil {
		return nil, err
	}
	w := n.cfg.GC.Retention
	off := n.clock.MaxOffset()
	c := command.Protect{ID: req.GetId(), Expiry: p.WallTime + ttl.Nanoseconds(), Window: w.Nanoseconds()}
	var oldExpiry int64
	if c.ID != 0 {
		rec, found, err := n.readProtection(c.ID)
		if err != nil {
			return nil, err
		}
		if !found {
			return nil, &command.RejectedError{Code: command.CodeProtectionNotFound, Message: fmt.Sprintf("protection %d not found (never created, released or expired)", c.ID)}
		}
		oldExpiry = rec.Expiry
	} else {
		c.Timestamp = p
		if req.GetTimestamp() != nil {
			if c.Timestamp, err = tsFromProto(req.GetTimestamp()); err != nil {
				return nil, invalidArgument("timestamp", "%v", err)
			}
		}
		c.Start, c.End, c.Description = req.GetStartKey(), req.GetEndKey(), req.GetDescription()
	}
	res, _, err := n.store.Propose(ctx, keys.MetaRangeID, &command.Command{Header: command.Header{Timestamp: p}, Kind: command.KindProtect, Protect: c})
	if err == nil {
		err = res.Err()
	}
	if err != nil {
		return nil, err
	}
	id := res.NodeID
	now := n.clock.Now()
	if c.ID != 0 {
		// Expired by some node's clock before the refresh applied: a GC
		// pass may have ignored it.
		if oldExpiry <= now.WallTime+off.Nanoseconds() {
			return nil, &command.RejectedError{Code: command.CodeProtectionNotFound,
				Message: fmt.Sprintf("protection %d expired (at %s) before its refresh applied", id, time.Unix(0, oldExpiry).UTC().Format(time.RFC3339Nano))}
		}
	} else if floor := now.Add(off - w); !floor.Less(c.Timestamp) {
		// A GC pass that missed the record may have collected below T.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), leaseCallTimeout)
		_, _, rerr := n.store.Propose(rctx, keys.MetaRangeID, &command.Command{Kind: command.KindRelease, Protect: command.Protect{ID: id}})
		cancel()
		n.log.Info("protection released: it applied too late to be safe", "id", id, "timestamp", c.Timestamp.String(), "err", rerr)
		return nil, unavailable(100*time.Millisecond, "Protect: protection of %s %v (applied at %s, past the retention window less the clock offset); retry",
			c.Timestamp, errProtectTooSlow, now)
	}
	rec, found, err := n.readProtection(id)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, &command.RejectedError{Code: command.CodeProtectionNotFound, Message: fmt.Sprintf("protection %d was released meanwhile", id)}
	}
	return protectionInfo(rec), nil
}

// readProtection reads protection id from this node's copy of meta.
func (n *Node) readProtection(id uint64) (rangesm.ProtectionRecord, bool, error) {
	recs, err := rangesm.ReadProtections(n.db)
	if err != nil {
		return rangesm.ProtectionRecord{}, false, err
	}
	for _, r := range recs {
		if r.ID == id {
			return r, true, nil
		}
	}
	return rangesm.ProtectionRecord{}, false, nil
}

func (s *protectionServer) Release(ctx context.Context, req *kvpb.ReleaseRequest) (*kvpb.ReleaseResponse, error) {
	n := s.n
	if req.GetId() == 0 {
		return nil, invalidArgument("id", "protection ID 0 names no protection")
	}
	ctx, cancel := withLeaseTimeout(ctx)
	defer cancel()
	_, err := (oracleMeta{n: n}).Lease(ctx)
	if err == nil {
		var res command.Result
		res, _, err = n.store.Propose(ctx, keys.MetaRangeID, &command.Command{Kind: command.KindRelease, Protect: command.Protect{ID: req.GetId()}})
		if err == nil {
			err = res.Err()
		}
	}
	if n.mustForward(ctx, err) {
		var resp *kvpb.ReleaseResponse
		err = n.onMetaLeader(ctx, func(ctx context.Context, cc *grpc.ClientConn) (err error) {
			resp, err = kvpb.NewProtectionClient(cc).Release(ctx, req)
			return err
		})
		return resp, err
	}
	if err != nil {
		return nil, n.protectError("Release", err)
	}
	return &kvpb.ReleaseResponse{}, nil
}

func (s *protectionServer) Protections(ctx context.Context, req *kvpb.ProtectionsRequest) (*kvpb.ProtectionsResponse, error) {
	ctx, cancel := withLeaseTimeout(ctx)
	defer cancel()
	recs, now, err := s.n.liveProtections(ctx)
	if err != nil {
		return nil, err
	}
	resp := &kvpb.ProtectionsResponse{Now: rangesm.TimestampProto(now)}
	for _, r := range recs {
		resp.Protections = append(resp.Protections, protectionInfo(r))
	}
	return resp, nil
}

// liveProtections returns the protections that have not expired, read at
// meta's leader (here or forwarded), and the leader's clock when it read
// them. Every protection acknowledged before the call is among them.
func (n *Node) liveProtections(ctx context.Context) ([]rangesm.ProtectionRecord, hlc.Timestamp, error) {
	recs, now, err := n.liveProtectionsHere(ctx)
	if !n.mustForward(ctx, err) {
		if err != nil {
			return nil, now, n.protectError("Protections", err)
		}
		return recs, now, nil
	}
	var resp *kvpb.ProtectionsResponse
	err = n.onMetaLeader(ctx, func(ctx context.Context, cc *grpc.ClientConn) (err error) {
		resp, err = kvpb.NewProtectionClient(cc).Protections(ctx, &kvpb.ProtectionsRequest{})
		return err
	})
	if err != nil {
		return nil, hlc.Timestamp{}, err
	}
	recs = recs[:0]
	for _, p := range resp.GetProtections() {
		r, err := protectionRecord(p)
		if err != nil {
			return nil, hlc.Timestamp{}, fmt.Errorf("protection %d from meta's leader: %w", p.GetId(), err)
		}
		recs = append(recs, r)
	}
	now, err = tsFromProto(resp.GetNow())
	return recs, now, err
}

// liveProtectionsHere reads the live protections as meta's leader: it
// fails with NotLeader unless this node holds meta's leader lease, under
// which its copy of meta has applied every acknowledged record.
func (n *Node) liveProtectionsHere(ctx context.Context) ([]rangesm.ProtectionRecord, hlc.Timestamp, error) {
	if _, err := (oracleMeta{n: n}).Lease(ctx); err != nil {
		return nil, hlc.Timestamp{}, err
	}
	now := n.clock.Now()
	all, err := rangesm.ReadProtections(n.db)
	if err != nil {
		return nil, now, err
	}
	live := all[:0]
	for _, r := range all {
		if !r.ExpiredAt(now.WallTime) {
			live = append(live, r)
		}
	}
	return live, now, nil
}
