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
	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/raft"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/rangesm"
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

// keepAliveBatchMax is the most requests of one KeepAlive stream
// renewed together.
const keepAliveBatchMax = 1024

// KeepAlive answers each request in order. The requests a stream has
// queued by the time it looks are renewed together: one pass of the
// lessor on meta's leader, or one KeepAliveBatch call to it from another
// node, so a client keeping many leases alive on one stream costs one
// round trip per batch, not per lease. A transient failure to reach
// meta's leader, or the node stopping, ends the stream with the error;
// the client opens another.
func (s *leaseServer) KeepAlive(stream kvpb.Lease_KeepAliveServer) error {
	// The node stopping ends a renewal under way too (one forwarded to a
	// meta leader that is down retries until its context ends), so that
	// the graceful stop does not wait out the stream.
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	defer context.AfterFunc(s.n.bgCtx, cancel)()
	reqs := make(chan *kvpb.LeaseKeepAliveRequest, keepAliveBatchMax)
	recvErr := make(chan error, 1)
	go func() {
		defer close(reqs)
		for {
			req, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case reqs <- req:
			case <-ctx.Done():
				recvErr <- ctx.Err()
				return
			}
		}
	}()
	for {
		var req *kvpb.LeaseKeepAliveRequest
		var ok bool
		select {
		case req, ok = <-reqs:
		case <-s.n.bgCtx.Done():
			// A client's stream lives as long as the client: end it,
			// so that the node's graceful stop has nothing to wait for.
			return unavailable(time.Second, "KeepAlive: node is shutting down; continue on another node")
		}
		if !ok {
			if err := <-recvErr; err != io.EOF {
				return err
			}
			return nil
		}
		batch := []*kvpb.LeaseKeepAliveRequest{req}
	drain:
		for len(batch) < keepAliveBatchMax {
			select {
			case r, ok := <-reqs:
				if !ok {
					break drain
				}
				batch = append(batch, r)
			default:
				break drain
			}
		}
		resps, err := s.n.keepAliveBatch(ctx, batch)
		if err != nil {
			if s.n.bgCtx.Err() != nil {
				return unavailable(time.Second, "KeepAlive: node is shutting down; continue on another node")
			}
			return err
		}
		for _, resp := range resps {
			if err := stream.Send(resp); err != nil {
				return err
			}
		}
	}
}

// keepAliveOnce renews one lease, here or on meta's leader.
func (n *Node) keepAliveOnce(ctx context.Context, req *kvpb.LeaseKeepAliveRequest) (*kvpb.LeaseKeepAliveResponse, error) {
	resps, err := n.keepAliveBatch(ctx, []*kvpb.LeaseKeepAliveRequest{req})
	if err != nil {
		return nil, err
	}
	return resps[0], nil
}

// keepAliveBatch renews leases here (one pass of the lessor) or on
// meta's leader (one KeepAliveBatch call, or one KeepAliveOnce per lease
// to a leader that does not serve KeepAliveBatch); resps answer reqs in
// order.
func (n *Node) keepAliveBatch(ctx context.Context, reqs []*kvpb.LeaseKeepAliveRequest) ([]*kvpb.LeaseKeepAliveResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, leaseCallTimeout)
	defer cancel()
	ids := make([]uint64, len(reqs))
	for i, r := range reqs {
		ids[i] = r.GetId()
	}
	ttls, errs, err := n.lessor.keepAliveMany(ctx, ids)
	if n.mustForward(ctx, err) {
		var resps []*kvpb.LeaseKeepAliveResponse
		err = n.onMetaLeader(ctx, func(ctx context.Context, cc *grpc.ClientConn) error {
			lc := kvpb.NewLeaseInternalClient(cc)
			resp, err := lc.KeepAliveBatch(ctx, &kvpb.LeaseKeepAliveBatchRequest{Requests: reqs})
			if status.Code(err) == codes.Unimplemented {
				// A leader of an older build: one call per lease.
				resps = resps[:0]
				for _, r := range reqs {
					one, err := lc.KeepAliveOnce(ctx, r)
					if err != nil {
						return err
					}
					resps = append(resps, one)
				}
				return nil
			}
			if err != nil {
				return err
			}
			if len(resp.GetResponses()) != len(reqs) {
				return status.Errorf(codes.Internal, "KeepAliveBatch: %d answers to %d requests", len(resp.GetResponses()), len(reqs))
			}
			resps = resp.GetResponses()
			return nil
		})
		return resps, err
	}
	if err != nil {
		return nil, n.leaseError("KeepAlive", err)
	}
	resps := make([]*kvpb.LeaseKeepAliveResponse, len(reqs))
	for i, id := range ids {
		switch {
		case errors.Is(errs[i], errLeaseNotFound):
			resps[i] = &kvpb.LeaseKeepAliveResponse{Id: id, Message: errs[i].Error()}
		case errs[i] != nil:
			return nil, n.leaseError("KeepAlive", errs[i])
		default:
			resps[i] = &kvpb.LeaseKeepAliveResponse{Id: id, Found: true, TtlMs: ttls[i].Milliseconds()}
		}
	}
	return resps, nil
}

func (s *leaseInternalServer) KeepAliveBatch(ctx context.Context, req *kvpb.LeaseKeepAliveBatchRequest) (*kvpb.LeaseKeepAliveBatchResponse, error) {
	if len(req.GetRequests()) == 0 || len(req.GetRequests()) > keepAliveBatchMax {
		return nil, invalidArgument("requests", "KeepAliveBatch takes 1 to %d requests, got %d", keepAliveBatchMax, len(req.GetRequests()))
	}
	resps, err := s.n.keepAliveBatch(ctx, req.GetRequests())
	if err != nil {
		return nil, err
	}
	return &kvpb.LeaseKeepAliveBatchResponse{Responses: resps}, nil
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
