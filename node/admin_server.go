package node

import (
	"context"
	"errors"
	"sort"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/internal/buildinfo"
	"github.com/shaledb/shale/raft"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/storage"
)

// adminServer implements kvpb.AdminServer. Every node answers every
// operation: one that must run elsewhere (on a range's leader, or on a
// node holding meta) is forwarded there once. The sharding operations are
// in admin_sharding.go.
type adminServer struct {
	kvpb.UnimplementedAdminServer
	n *Node
}

// liveAfter: a node heard from within this long is live; then suspect
// until deadAfter, then dead.
const (
	liveAfter = 5 * time.Second
	deadAfter = time.Minute
)

func (s *adminServer) Status(ctx context.Context, req *kvpb.StatusRequest) (*kvpb.StatusResponse, error) {
	n := s.n
	resp := &kvpb.StatusResponse{
		Node:             n.descriptor(),
		ClusterId:        n.ident.ClusterID,
		Version:          buildinfo.Version + " (" + storage.EngineVersion() + ")",
		StartedUnixNanos: n.started.UnixNano(),
		Cpu:              n.cpu.stats(),
		Disk:             n.diskStatus(),
	}
	if req.GetNodeOnly() {
		return resp, nil
	}
	st, err := n.db.Stats()
	if err != nil {
		return nil, readError("Status", err)
	}
	resp.Engine = engineStats(&st)
	resp.Members = n.members()
	for _, r := range n.store.Replicas() {
		resp.Ranges = append(resp.Ranges, n.rangeStatus(r))
	}
	return resp, nil
}

// members is this node's view of the cluster's nodes: meta's registry if
// it holds a copy, else the nodes it knows addresses of.
func (n *Node) members() []*kvpb.NodeDescriptor {
	nodes, err := n.store.MetaNodes()
	if err != nil {
		nodes = n.knownNodes()
	}
	for i, m := range nodes {
		if m.GetNodeId() == n.ident.NodeID {
			nodes[i] = n.descriptor()
		}
	}
	return nodes
}

// rangeStatus describes this node's replica r.
func (n *Node) rangeStatus(r *raft.Replica) *kvpb.RangeStatus {
	st := r.Status()
	rs := &kvpb.RangeStatus{
		RangeDescriptor: st.Descriptor,
		Raft: &kvpb.RaftStatus{
			RangeId: st.RangeID, ReplicaId: st.ReplicaID, State: st.State, Term: st.Term,
			LeaderReplicaId: st.Leader, CommitIndex: st.Commit, AppliedIndex: st.Applied,
			LastIndex: st.LastIndex, TruncatedIndex: st.Truncated,
		},
		LeaderNodeId: st.LeaderNodeID,
		Qps:          n.load.qps(st.RangeID),
	}
	if st.Descriptor != nil {
		n.fillRangeSize(rs, r, st.Descriptor)
	}
	return rs
}

func (s *adminServer) RangeLookup(ctx context.Context, req *kvpb.RangeLookupRequest) (*kvpb.RangeLookupResponse, error) {
	n := s.n
	meta, err := n.store.Replica(keys.MetaRangeID)
	if err != nil {
		return s.forwardToMeta(ctx, func(c kvpb.AdminClient) (*kvpb.RangeLookupResponse, error) {
			return c.RangeLookup(forwardCtx(ctx), req)
		})
	}
	if !req.GetStale() {
		if _, err := meta.ReadBarrier(ctx); err != nil {
			var nle *raft.NotLeaderError
			if errors.As(err, &nle) && nle.LeaderNodeID != 0 && !isForwarded(ctx) {
				if c, cerr := n.peers.admin(nle.LeaderNodeID); cerr == nil {
					return c.RangeLookup(forwardCtx(ctx), req)
				}
			}
			return nil, n.raftError("RangeLookup", err)
		}
	}
	ds, err := n.store.MetaLookup(req.GetKey(), int(min(req.GetPrefetch(), 1000)))
	if err != nil {
		return nil, n.raftError("RangeLookup", err)
	}
	resp := &kvpb.RangeLookupResponse{Ranges: ds}
	seen := map[uint64]bool{}
	for _, d := range ds {
		resp.Leaders = append(resp.Leaders, n.leaderOf(d.GetRangeId()))
		for _, rd := range d.GetReplicas() {
			if !seen[rd.GetNodeId()] {
				seen[rd.GetNodeId()] = true
				resp.Nodes = append(resp.Nodes, n.nodeDescriptor(rd.GetNodeId()))
			}
		}
	}
	return resp, nil
}

// forwardToMeta runs call on the first other node that answers: a node
// without a copy of meta asks one that has it.
func forwardTo[T any](s *adminServer, ctx context.Context, call func(kvpb.AdminClient) (T, error)) (T, error) {
	var zero T
	if isForwarded(ctx) {
		return zero, status.Errorf(codes.Unavailable, "node %d holds no copy of meta", s.n.ident.NodeID)
	}
	var last error = status.Errorf(codes.Unavailable, "node %d holds no copy of meta and knows no other node", s.n.ident.NodeID)
	for _, m := range s.n.members() {
		if m.GetNodeId() == s.n.ident.NodeID {
			continue
		}
		c, err := s.n.peers.readyAdmin(ctx, m.GetNodeId(), time.Second)
		if err != nil {
			last = unavailable(100*time.Millisecond, "%v", err)
			continue
		}
		resp, err := call(c)
		if err == nil {
			return resp, nil
		}
		last = err
	}
	return zero, last
}

func (s *adminServer) forwardToMeta(ctx context.Context, call func(kvpb.AdminClient) (*kvpb.RangeLookupResponse, error)) (*kvpb.RangeLookupResponse, error) {
	return forwardTo(s, ctx, call)
}

func (s *adminServer) Ranges(ctx context.Context, req *kvpb.RangesRequest) (*kvpb.RangesResponse, error) {
	n := s.n
	ds, err := n.store.MetaDescriptors()
	if err != nil {
		return forwardTo(s, ctx, func(c kvpb.AdminClient) (*kvpb.RangesResponse, error) {
			return c.Ranges(forwardCtx(ctx), req)
		})
	}
	resp := &kvpb.RangesResponse{}
	for _, d := range ds {
		if r, err := n.store.Replica(d.GetRangeId()); err == nil {
			resp.Ranges = append(resp.Ranges, n.rangeStatus(r))
			continue
		}
		resp.Ranges = append(resp.Ranges, &kvpb.RangeStatus{RangeDescriptor: d})
	}
	// The leader, size and load of ranges this node is not the leader of
	// come from their leaders' nodes.
	n.fillRemoteRangeStatus(ctx, resp.Ranges)
	return resp, nil
}

func (s *adminServer) Nodes(ctx context.Context, req *kvpb.NodesRequest) (*kvpb.NodesResponse, error) {
	n := s.n
	nodes, err := n.store.MetaNodes()
	if err != nil {
		return forwardTo(s, ctx, func(c kvpb.AdminClient) (*kvpb.NodesResponse, error) {
			return c.Nodes(forwardCtx(ctx), req)
		})
	}
	ds, err := n.store.MetaDescriptors()
	if err != nil {
		return nil, n.raftError("Nodes", err)
	}
	// The nodes' own reports (heartbeats) count the leaders of ranges
	// this node holds no replica of, and their leaders' descriptors are
	// newer than meta's while meta catches up with a change.
	hb := n.gatherHeartbeats(ctx, nodes)
	ds = freshDescriptors(ds, hb)
	replicas := map[uint64]uint64{}
	for _, d := range ds {
		for _, rd := range d.GetReplicas() {
			replicas[rd.GetNodeId()]++
		}
	}
	leaders := map[uint64]uint64{}
	for _, r := range n.store.Replicas() {
		if st := r.Status(); st.LeaderNodeID != 0 {
			leaders[st.LeaderNodeID]++
		}
	}
	for id, e := range hb {
		leaders[id] = uint64(len(e.leaders))
	}
	resp := &kvpb.NodesResponse{}
	now := time.Now()
	for _, m := range nodes {
		ns := &kvpb.NodeStatus{Node: m, Replicas: replicas[m.GetNodeId()], Leaders: leaders[m.GetNodeId()]}
		last := n.lastSeen(m.GetNodeId())
		if m.GetNodeId() == n.ident.NodeID {
			ns.Node, last = n.descriptor(), now
		}
		switch {
		case !last.IsZero() && now.Sub(last) < liveAfter:
			ns.State = kvpb.NodeState_NODE_STATE_LIVE
		case !last.IsZero() && now.Sub(last) < deadAfter, last.IsZero() && now.Sub(n.started) < deadAfter:
			ns.State = kvpb.NodeState_NODE_STATE_SUSPECT
		default:
			ns.State = kvpb.NodeState_NODE_STATE_DEAD
		}
		if !last.IsZero() {
			ns.LastHeartbeatUnixNanos = last.UnixNano()
		}
		if m.GetDecommissioning() {
			ns.State = kvpb.NodeState_NODE_STATE_DECOMMISSIONING
			if ns.Replicas == 0 {
				ns.State = kvpb.NodeState_NODE_STATE_DECOMMISSIONED
			}
		}
		ns.UsedBytes, ns.Qps = n.nodeStats(m.GetNodeId())
		if e := hb[m.GetNodeId()]; e != nil {
			ns.Cpu = e.status.GetCpu()
		}
		resp.Nodes = append(resp.Nodes, ns)
	}
	return resp, nil
}

// onLeader runs local on range rangeID's leader: here if this node leads
// it, else forwarded (once) to the leader this node knows.
func onLeader[T any](s *adminServer, ctx context.Context, op string, rangeID uint64,
	local func() (T, error), remote func(context.Context, kvpb.AdminClient) (T, error)) (T, error) {
	var zero T
	r, err := s.n.store.Replica(rangeID)
	if err == nil && r.IsLeader() {
		return local()
	}
	if err != nil {
		if nf := s.n.checkRangeExists(ctx, op, rangeID); nf != nil {
			return zero, nf
		}
	}
	leader := uint64(0)
	if err == nil {
		leader = r.Status().LeaderNodeID
	} else if ds, merr := s.n.store.MetaDescriptors(); merr == nil {
		// No replica here: ask one of the range's nodes.
		for _, d := range ds {
			if d.GetRangeId() == rangeID && len(d.GetReplicas()) > 0 {
				leader = d.GetReplicas()[0].GetNodeId()
			}
		}
	}
	if leader == 0 || leader == s.n.ident.NodeID || isForwarded(ctx) {
		if err != nil {
			return zero, s.n.raftError(op, err)
		}
		return zero, s.n.raftError(op, r.NotLeaderError())
	}
	// Follow the leader hints of the nodes asked (a few hops: this node's
	// view of the leader may be stale, e.g. a replica removed from the
	// range that has not learned it yet).
	tried := map[uint64]bool{}
	for hop := 0; ; hop++ {
		tried[leader] = true
		c, cerr := s.n.peers.readyAdmin(ctx, leader, 2*time.Second)
		if cerr != nil {
			// Nothing was sent: the caller may retry.
			return zero, unavailable(100*time.Millisecond, "%s: cannot reach node %d, the leader of range %d: %v", op, leader, rangeID, cerr)
		}
		resp, err := remote(forwardCtx(ctx), c)
		next := notLeaderHint(err)
		if err == nil || next == 0 || tried[next] || next == s.n.ident.NodeID || hop == 3 {
			return resp, err
		}
		leader = next
	}
}

// notLeaderHint returns the leader a NotLeader error names, or 0.
func notLeaderHint(err error) uint64 {
	if err == nil {
		return 0
	}
	for _, d := range status.Convert(err).Details() {
		if nl, ok := d.(*kvpb.NotLeader); ok {
			return nl.GetLeader().GetNodeId()
		}
	}
	return 0
}

func (s *adminServer) TransferLeader(ctx context.Context, req *kvpb.TransferLeaderRequest) (*kvpb.TransferLeaderResponse, error) {
	if err := s.n.checkRangeExists(ctx, "TransferLeader", req.GetRangeId()); err != nil {
		return nil, err
	}
	if err := s.n.checkTargetNode(ctx, "TransferLeader", req.GetTargetNodeId()); err != nil {
		return nil, err
	}
	return onLeader(s, ctx, "TransferLeader", req.GetRangeId(), func() (*kvpb.TransferLeaderResponse, error) {
		if err := s.n.store.TransferLeader(ctx, req.GetRangeId(), req.GetTargetNodeId()); err != nil {
			return nil, s.n.raftError("TransferLeader", err)
		}
		return &kvpb.TransferLeaderResponse{}, nil
	}, func(ctx context.Context, c kvpb.AdminClient) (*kvpb.TransferLeaderResponse, error) {
		return c.TransferLeader(ctx, req)
	})
}

func (s *adminServer) ChangeReplicas(ctx context.Context, req *kvpb.ChangeReplicasRequest) (*kvpb.ChangeReplicasResponse, error) {
	if err := s.n.checkRangeExists(ctx, "ChangeReplicas", req.GetRangeId()); err != nil {
		return nil, err
	}
	if !isForwarded(ctx) {
		for _, ch := range req.GetChanges() {
			if ch.GetKind() == kvpb.ReplicaChange_REMOVE {
				continue
			}
			if err := s.n.checkTargetNode(ctx, "ChangeReplicas", ch.GetNodeId()); err != nil {
				return nil, err
			}
		}
	}
	return onLeader(s, ctx, "ChangeReplicas", req.GetRangeId(), func() (*kvpb.ChangeReplicasResponse, error) {
		d, err := s.n.store.ChangeReplicasAt(ctx, req.GetRangeId(), req.GetExpectedGeneration(), req.GetChanges())
		if err != nil {
			return nil, s.n.raftError("ChangeReplicas", err)
		}
		return &kvpb.ChangeReplicasResponse{RangeDescriptor: d}, nil
	}, func(ctx context.Context, c kvpb.AdminClient) (*kvpb.ChangeReplicasResponse, error) {
		return c.ChangeReplicas(ctx, req)
	})
}

// AddNode registers a node (allocating its ID unless it has one; an
// address already registered keeps its ID). Its replicas are added
// separately, with ChangeReplicas.
func (s *adminServer) AddNode(ctx context.Context, req *kvpb.AddNodeRequest) (*kvpb.AddNodeResponse, error) {
	nd := req.GetNode()
	if nd.GetAddress() == "" {
		return nil, invalidArgument("node.address", "a node needs the address other nodes reach it at")
	}
	id, err := s.n.store.RegisterNode(ctx, nd)
	if errors.Is(err, raft.ErrRangeNotFound) {
		return forwardTo(s, ctx, func(c kvpb.AdminClient) (*kvpb.AddNodeResponse, error) {
			return c.AddNode(forwardCtx(ctx), req)
		})
	}
	if err != nil {
		return nil, s.n.raftError("AddNode", err)
	}
	s.n.store.SetPeerAddress(id, nd.GetAddress())
	members := s.n.members()
	found := false
	for _, m := range members {
		found = found || m.GetNodeId() == id
	}
	if !found {
		members = append(members, &kvpb.NodeDescriptor{NodeId: id, Address: nd.GetAddress(), HttpAddress: nd.GetHttpAddress()})
	}
	sort.Slice(members, func(i, j int) bool { return members[i].GetNodeId() < members[j].GetNodeId() })
	return &kvpb.AddNodeResponse{NodeId: id, Members: members}, nil
}

// RemoveNode removes a node from the cluster. A node that still holds
// replicas is refused, unless force is set: then it is marked
// decommissioning and its replicas are replaced on other nodes first
// (admin_remove.go), each range keeping its replica count where another
// node can take the replica.
func (s *adminServer) RemoveNode(ctx context.Context, req *kvpb.RemoveNodeRequest) (*kvpb.RemoveNodeResponse, error) {
	n := s.n
	id := req.GetNodeId()
	forward := func(c kvpb.AdminClient) (*kvpb.RemoveNodeResponse, error) {
		return c.RemoveNode(forwardCtx(ctx), req)
	}
	// The node being removed loses its replicas (meta's among them) as it
	// goes, and could not finish: another member does the work. The request
	// is sent unmarked, so that member may in turn send each replica change
	// to the range's leader (which may be this node); it sends the request
	// back marked only if it holds no copy of meta, and then this node does
	// the work after all.
	if id == n.ident.NodeID && !isForwarded(ctx) {
		return forwardTo(s, ctx, func(c kvpb.AdminClient) (*kvpb.RemoveNodeResponse, error) {
			return c.RemoveNode(ctx, req)
		})
	}
	// The ranges' leaders' descriptors, not this node's copy of meta
	// alone: that copy trails replica changes (a follower's, or meta's
	// best-effort update), and a removal that read it while placement was
	// adding replicas to the node found none held, skipped the drain and
	// left the node holding three (a fresh-clone make test run).
	ds, err := n.currentDescriptors(ctx)
	if err != nil {
		return forwardTo(s, ctx, forward)
	}
	var held []uint64
	for _, d := range ds {
		for _, rd := range d.GetReplicas() {
			if rd.GetNodeId() == id {
				held = append(held, d.GetRangeId())
			}
		}
	}
	if len(held) > 0 && !req.GetForce() {
		return nil, status.Errorf(codes.FailedPrecondition,
			"RemoveNode: node %d still holds replicas of ranges %v; remove them first, or set force to have them removed", id, held)
	}
	if len(held) > 0 {
		if err := s.drainForRemoval(ctx, id); err != nil { // admin_remove.go
			return nil, err
		}
	}
	if err := n.store.DeregisterNode(ctx, id); err != nil {
		return nil, n.raftError("RemoveNode", err)
	}
	return &kvpb.RemoveNodeResponse{}, nil
}

func (s *adminServer) Compact(ctx context.Context, req *kvpb.CompactRequest) (*kvpb.CompactResponse, error) {
	if err := s.n.limits.checkSpan("", req.GetStartKey(), req.GetEndKey()); err != nil {
		return nil, err
	}
	span := keys.UserSpan(req.GetStartKey(), req.GetEndKey())
	lo, hi := span.Start, span.End
	if err := s.n.db.CompactRange(lo, hi); err != nil {
		return nil, readError("Compact", err)
	}
	return &kvpb.CompactResponse{}, nil
}

func engineStats(st *storage.Stats) *kvpb.EngineStats {
	return &kvpb.EngineStats{
		UserBytesWritten:       st.UserBytesWritten,
		WalBytesWritten:        st.WALBytesWritten,
		FlushBytesWritten:      st.FlushBytesWritten,
		CompactionBytesWritten: st.CompactionBytesWritten,
		CompactionBytesRead:    st.CompactionBytesRead,
		BytesRead:              st.BytesRead,
		StallMicros:            st.StallMicros,
		BlockCacheHits:         st.BlockCacheHits,
		BlockCacheMisses:       st.BlockCacheMisses,
		BloomFilterUseful:      st.BloomFilterUseful,
		MemtableBytes:          st.MemtableBytes,
		LevelFiles:             st.LevelFiles,
		LevelBytes:             st.LevelBytes,
		WriteAmplification:     st.WriteAmplification(),
	}
}
