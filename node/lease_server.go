package node

import (
	"context"
	"errors"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/raft"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/rangesm"
	"github.com/shaledb/shale/rangesm/command"
)

// The Lease and LeaseInternal services (api/kvpb/lease.proto,
// docs/leases.md). The meta range's leader serves leases (lease_lessor.go);
// any other node forwards a call to it, so that a client may send lease
// calls to any node.

// leaseServer implements kvpb.LeaseServer.
type leaseServer struct {
	kvpb.UnimplementedLeaseServer
	n *Node
}

// leaseInternalServer implements kvpb.LeaseInternalServer.
type leaseInternalServer struct {
	kvpb.UnimplementedLeaseInternalServer
	n *Node
}

// leaseCallTimeout bounds a lease call that has no deadline of its own.
const leaseCallTimeout = 10 * time.Second

func withLeaseTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, leaseCallTimeout)
}

// leaseError maps a lessor error to a status.
func (n *Node) leaseError(op string, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	var nle *raft.NotLeaderError
	switch {
	case errors.Is(err, errLeaseNotFound):
		return status.Errorf(codes.NotFound, "%s: %v", op, err)
	case errors.Is(err, hlc.ErrClockOffset):
		return n.clockOffsetStatus(op, err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	case errors.As(err, &nle), errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrUnavailable),
		errors.Is(err, raft.ErrAmbiguous), errors.Is(err, raft.ErrStopped):
		return n.raftError(op, err)
	}
	return unavailable(100*time.Millisecond, "%s: %v", op, err)
}

// mustForward reports whether a lease call should go to meta's leader:
// this node is not it, and the call was not forwarded already.
func (n *Node) mustForward(ctx context.Context, err error) bool {
	if err == nil || isForwarded(ctx) {
		return false
	}
	var nle *raft.NotLeaderError
	return errors.As(err, &nle) || errors.Is(err, raft.ErrNotLeader)
}

// onMetaLeader calls call on meta's leader, following NotLeader hints and
// retrying while the error says the call was not served, until ctx ends.
func (n *Node) onMetaLeader(ctx context.Context, call func(context.Context, *grpc.ClientConn) error) error {
	target := n.leaderOf(keys.MetaRangeID).GetNodeId()
	var last error = status.Error(codes.Unavailable, "no node leads the meta range")
	for attempt := 0; ; attempt++ {
		if target == n.ident.NodeID {
			// This node leads meta but may not serve yet (its leader
			// lease, an entry of its term): not served, retry.
			return unavailable(100*time.Millisecond, "the meta range's leader (this node) is not ready to serve leases yet")
		}
		if target == 0 {
			ms := n.members()
			for i := range ms {
				m := ms[(attempt+i)%len(ms)]
				if m.GetNodeId() != n.ident.NodeID {
					target = m.GetNodeId()
					break
				}
			}
			if target == 0 {
				return unavailable(100*time.Millisecond, "no other node to serve leases and this one does not lead the meta range yet")
			}
		}
		if target != 0 {
			cc, err := n.peers.conn(target)
			if err == nil {
				err = call(forwardCtx(ctx), cc)
				if err == nil {
					return nil
				}
			}
			last = err
			if !retriableLeaseCall(err) {
				return err
			}
			target = notLeaderHint(err)
		}
		select {
		case <-ctx.Done():
			return last
		case <-time.After(min(time.Duration(attempt+1)*20*time.Millisecond, 500*time.Millisecond)):
		}
	}
}

// retriableLeaseCall reports whether a forwarded lease call failed
// without being served.
func retriableLeaseCall(err error) bool {
	st, ok := status.FromError(err)
	if !ok {
		return true // could not reach the node
	}
	switch st.Code() {
	case codes.Unavailable:
		return true
	case codes.FailedPrecondition:
		return notLeaderHint(err) != 0 || hasNotLeader(st)
	}
	return false
}

func hasNotLeader(st *status.Status) bool {
	for _, d := range st.Details() {
		if _, ok := d.(*kvpb.NotLeader); ok {
			return true
		}
	}
	return false
}

// checkTTL validates a requested TTL.
func checkTTL(ms int64) (time.Duration, error) {
	ttl := time.Duration(ms) * time.Millisecond
	if ms <= 0 || ttl < MinLeaseTTL || ttl > MaxLeaseTTL {
		return 0, invalidArgument("ttl_ms", "a lease TTL must be between %v and %v, got %dms", MinLeaseTTL, MaxLeaseTTL, ms)
	}
	return ttl, nil
}

func (s *leaseServer) Grant(ctx context.Context, req *kvpb.LeaseGrantRequest) (*kvpb.LeaseGrantResponse, error) {
	ttl, err := checkTTL(req.GetTtlMs())
	if err != nil {
		return nil, err
	}
	ctx, cancel := withLeaseTimeout(ctx)
	defer cancel()
	id, err := s.n.lessor.grant(ctx, req.GetId(), ttl)
	if s.n.mustForward(ctx, err) {
		var resp *kvpb.LeaseGrantResponse
		err = s.n.onMetaLeader(ctx, func(ctx context.Context, cc *grpc.ClientConn) (err error) {
			resp, err = kvpb.NewLeaseClient(cc).Grant(ctx, req)
			return err
		})
		return resp, err
	}
	if err != nil {
		return nil, s.n.leaseError("Grant", err)
	}
	return &kvpb.LeaseGrantResponse{Id: id, TtlMs: ttl.Milliseconds()}, nil
}

func (s *leaseServer) Revoke(ctx context.Context, req *kvpb.LeaseRevokeRequest) (*kvpb.LeaseRevokeResponse, error) {
	if req.GetId() == 0 {
		return nil, invalidArgument("id", "lease ID 0 names no lease")
	}
	ctx, cancel := withLeaseTimeout(ctx)
	defer cancel()
	n, err := s.n.lessor.revoke(ctx, req.GetId())
	if s.n.mustForward(ctx, err) {
		var resp *kvpb.LeaseRevokeResponse
		err = s.n.onMetaLeader(ctx, func(ctx context.Context, cc *grpc.ClientConn) (err error) {
			resp, err = kvpb.NewLeaseClient(cc).Revoke(ctx, req)
			return err
		})
		return resp, err
	}
	if err != nil {
		return nil, s.n.leaseError("Revoke", err)
	}
	return &kvpb.LeaseRevokeResponse{KeysDeleted: n}, nil
}

func (s *leaseServer) TimeToLive(ctx context.Context, req *kvpb.LeaseTimeToLiveRequest) (*kvpb.LeaseTimeToLiveResponse, error) {
	ctx, cancel := withLeaseTimeout(ctx)
	defer cancel()
	rec, left, err := s.n.lessor.remaining(ctx, req.GetId())
	if s.n.mustForward(ctx, err) {
		var resp *kvpb.LeaseTimeToLiveResponse
		err = s.n.onMetaLeader(ctx, func(ctx context.Context, cc *grpc.ClientConn) (err error) {
			resp, err = kvpb.NewLeaseClient(cc).TimeToLive(ctx, req)
			return err
		})
		return resp, err
	}
	if err != nil {
		return nil, s.n.leaseError("TimeToLive", err)
	}
	resp := &kvpb.LeaseTimeToLiveResponse{Id: rec.ID, TtlMs: int64(rec.TTLMillis), RemainingMs: left.Milliseconds()}
	if left < 0 {
		resp.RemainingMs = -1
	}
	if req.GetKeys() {
		if resp.Keys, err = rangesm.LeaseAttachments(s.n.db, rec.ID, 0); err != nil {
			return nil, s.n.leaseError("TimeToLive", err)
		}
	}
	return resp, nil
}

func (s *leaseServer) Leases(ctx context.Context, req *kvpb.LeaseLeasesRequest) (*kvpb.LeaseLeasesResponse, error) {
	ctx, cancel := withLeaseTimeout(ctx)
	defer cancel()
	recs, left, err := s.n.lessor.list(ctx)
	if s.n.mustForward(ctx, err) {
		var resp *kvpb.LeaseLeasesResponse
		err = s.n.onMetaLeader(ctx, func(ctx context.Context, cc *grpc.ClientConn) (err error) {
			resp, err = kvpb.NewLeaseClient(cc).Leases(ctx, req)
			return err
		})
		return resp, err
	}
	if err != nil {
		return nil, s.n.leaseError("Leases", err)
	}
	resp := &kvpb.LeaseLeasesResponse{}
	for i, r := range recs {
		if left[i] < 0 {
			continue // ended: its keys are being deleted
		}
		resp.Leases = append(resp.Leases, &kvpb.LeaseStatus{Id: r.ID, TtlMs: int64(r.TTLMillis), RemainingMs: left[i].Milliseconds()})
	}
	return resp, nil
}

// KeepAlive answers each request in order. A transient failure to reach
// meta's leader ends the stream with the error; the client opens another.
func (s *leaseServer) KeepAlive(stream kvpb.Lease_KeepAliveServer) error {
	for {
		req, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		resp, err := s.n.keepAliveOnce(stream.Context(), req)
		if err != nil {
			return err
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}

// keepAliveOnce renews one lease, here or on meta's leader.
func (n *Node) keepAliveOnce(ctx context.Context, req *kvpb.LeaseKeepAliveRequest) (*kvpb.LeaseKeepAliveResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, leaseCallTimeout)
	defer cancel()
	ttl, err := n.lessor.keepAlive(ctx, req.GetId())
	if n.mustForward(ctx, err) {
		var resp *kvpb.LeaseKeepAliveResponse
		err = n.onMetaLeader(ctx, func(ctx context.Context, cc *grpc.ClientConn) (err error) {
			resp, err = kvpb.NewLeaseInternalClient(cc).KeepAliveOnce(ctx, req)
			return err
		})
		return resp, err
	}
	if errors.Is(err, errLeaseNotFound) {
		return &kvpb.LeaseKeepAliveResponse{Id: req.GetId(), Message: err.Error()}, nil
	}
	if err != nil {
		return nil, n.leaseError("KeepAlive", err)
	}
	return &kvpb.LeaseKeepAliveResponse{Id: req.GetId(), Found: true, TtlMs: ttl.Milliseconds()}, nil
}

func (s *leaseInternalServer) KeepAliveOnce(ctx context.Context, req *kvpb.LeaseKeepAliveRequest) (*kvpb.LeaseKeepAliveResponse, error) {
	return s.n.keepAliveOnce(ctx, req)
}

func (s *leaseInternalServer) Attach(ctx context.Context, req *kvpb.LeaseAttachRequest) (*kvpb.LeaseAttachResponse, error) {
	d, err := s.n.attachLease(ctx, req.GetId(), req.GetKey())
	if err != nil {
		return nil, err
	}
	return &kvpb.LeaseAttachResponse{Deadline: rangesm.TimestampProto(d)}, nil
}

// attachLease attaches key to lease id at meta's leader (here or
// forwarded) and returns the deadline of the put.
func (n *Node) attachLease(ctx context.Context, id uint64, key []byte) (hlc.Timestamp, error) {
	d, err := n.lessor.attach(ctx, id, key)
	if n.mustForward(ctx, err) {
		var resp *kvpb.LeaseAttachResponse
		err = n.onMetaLeader(ctx, func(ctx context.Context, cc *grpc.ClientConn) (err error) {
			resp, err = kvpb.NewLeaseInternalClient(cc).Attach(ctx, &kvpb.LeaseAttachRequest{Id: id, Key: key})
			return err
		})
		if err != nil {
			return hlc.Timestamp{}, err
		}
		return tsFromProto(resp.GetDeadline())
	}
	return d, n.leaseError("Put", err)
}

// DeleteAttached runs one sweep batch on the range holding the keys.
func (s *leaseInternalServer) DeleteAttached(ctx context.Context, req *kvpb.LeaseDeleteAttachedRequest) (*kvpb.LeaseDeleteAttachedResponse, error) {
	n := s.n
	ks := req.GetKeys()
	if len(ks) == 0 || req.GetId() == 0 {
		return nil, invalidArgument("keys", "DeleteAttached needs a lease and at least one key")
	}
	r, desc, err := n.replicaFor(req.GetHeader(), ks[0])
	if err != nil {
		return nil, err
	}
	for _, k := range ks {
		if err := n.checkKey(req.GetHeader(), desc, k); err != nil {
			return nil, err
		}
	}
	cmd := &command.Command{Kind: command.KindLeaseDelete, Lease: command.Lease{ID: req.GetId(), Keys: ks}}
	res, idx, err := n.write(ctx, "DeleteAttached", req.GetHeader(), r, cmd)
	if err != nil {
		return nil, err
	}
	return &kvpb.LeaseDeleteAttachedResponse{Header: n.respHeader(r, idx), Deleted: res.NodeID}, nil
}
