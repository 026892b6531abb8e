package node

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/raft"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/rangesm"
)

// Routing: every request names the range it expects (range_id, with 0
// meaning "the range holding the key on this node"). The node serves it
// from its replica of that range, checking that the request's keys are in
// the range's current span; otherwise the answer tells the client where to
// go (docs/wire-protocol.md):
//
//   - NotFound + RangeNotFound: this node holds no (initialized) replica
//     of the range;
//   - FailedPrecondition + RangeKeyMismatch: the keys are outside the
//     range's current span (it split or merged since the client cached
//     it), with the current descriptor;
//   - FailedPrecondition + NotLeader: writes and linearizable reads go to
//     the leader, named in the detail.
//
// None of them applied anything.

// replicaFor returns the replica a request addresses, by its header's
// range_id or, when that is 0, by key.
func (n *Node) replicaFor(h *kvpb.RequestHeader, key []byte) (*raft.Replica, *kvpb.RangeDescriptor, error) {
	var r *raft.Replica
	var err error
	if id := h.GetRangeId(); id != 0 {
		r, err = n.store.Replica(id)
		if err != nil {
			return nil, nil, rangeNotFound(id)
		}
	} else {
		r, err = n.store.ReplicaForKey(key)
		if err != nil {
			return nil, nil, n.noRangeForKey(key)
		}
	}
	desc := r.Descriptor()
	if desc == nil {
		return nil, nil, rangeNotFound(r.RangeID())
	}
	n.load.record(r.RangeID(), key)
	return r, desc, nil
}

// noRangeForKey answers a request routed by key to a node that holds no
// range with the key: a RangeKeyMismatch with meta's descriptor for it,
// when this node has a copy of meta.
func (n *Node) noRangeForKey(key []byte) error {
	ds, err := n.store.MetaLookup(key, 0)
	if err != nil || len(ds) == 0 {
		return rangeNotFound(0)
	}
	return n.keyMismatch(0, ds[0], fmt.Sprintf("no replica on node %d holds key %q", n.ident.NodeID, clip(key)))
}

// checkKey refuses a key outside desc.
func (n *Node) checkKey(h *kvpb.RequestHeader, desc *kvpb.RangeDescriptor, key []byte) error {
	if keys.ContainsUserKey(desc, key) {
		return nil
	}
	return n.keyMismatch(h.GetRangeId(), desc, fmt.Sprintf("key %q is outside range %d [%q, %q)",
		clip(key), desc.GetRangeId(), clip(desc.GetStartKey()), clip(desc.GetEndKey())))
}

// checkSpan refuses a span not inside desc.
func (n *Node) checkSpan(h *kvpb.RequestHeader, desc *kvpb.RangeDescriptor, start, end []byte) error {
	if keys.ContainsUserSpan(desc, start, end) {
		return nil
	}
	return n.keyMismatch(h.GetRangeId(), desc, fmt.Sprintf("span [%q, %q) is not inside range %d [%q, %q)",
		clip(start), clip(end), desc.GetRangeId(), clip(desc.GetStartKey()), clip(desc.GetEndKey())))
}

// clipToRange returns the part of [start, end) inside desc, for scans:
// a forward scan must start inside the range and stops at its end; a
// reverse scan must end inside it (an empty end only in the last range)
// and stops at its start.
func (n *Node) clipToRange(h *kvpb.RequestHeader, desc *kvpb.RangeDescriptor, start, end []byte, reverse bool) ([]byte, []byte, error) {
	ds, de := desc.GetStartKey(), desc.GetEndKey()
	if !reverse {
		if err := n.checkKey(h, desc, start); err != nil && !(len(start) == 0 && len(ds) == 0) {
			return nil, nil, err
		}
		if len(de) != 0 && (len(end) == 0 || bytes.Compare(end, de) > 0) {
			end = de
		}
		return start, end, nil
	}
	inside := (len(end) == 0 && len(de) == 0) || (len(end) != 0 && bytes.Compare(end, ds) > 0 && (len(de) == 0 || bytes.Compare(end, de) <= 0))
	if !inside {
		return nil, nil, n.keyMismatch(h.GetRangeId(), desc, fmt.Sprintf("reverse scan end %q is outside range %d [%q, %q)",
			clip(end), desc.GetRangeId(), clip(ds), clip(de)))
	}
	if bytes.Compare(start, ds) < 0 {
		start = ds
	}
	return start, end, nil
}

func (n *Node) keyMismatch(requested uint64, desc *kvpb.RangeDescriptor, msg string) error {
	st := status.New(codes.FailedPrecondition, msg)
	d := &kvpb.RangeKeyMismatch{RequestedRangeId: requested, Ranges: []*kvpb.RangeDescriptor{desc}}
	d.Leaders = []*kvpb.NodeDescriptor{n.leaderOf(desc.GetRangeId())}
	// The neighbours this node holds (the other side of a split it
	// applied), so a client can route without a meta lookup.
	for _, nb := range n.localNeighbours(desc) {
		d.Ranges = append(d.Ranges, nb)
		d.Leaders = append(d.Leaders, n.leaderOf(nb.GetRangeId()))
	}
	return withDetails(st, d)
}

// leaderOf returns the node this node believes leads rangeID (node_id 0
// when unknown).
func (n *Node) leaderOf(rangeID uint64) *kvpb.NodeDescriptor {
	r, err := n.store.Replica(rangeID)
	if err != nil {
		return &kvpb.NodeDescriptor{}
	}
	st := r.Status()
	if st.LeaderNodeID == 0 {
		return &kvpb.NodeDescriptor{}
	}
	return n.nodeDescriptor(st.LeaderNodeID)
}

// nodeDescriptor returns what this node knows of node id: meta's registry
// entry, or the address it was started with.
func (n *Node) nodeDescriptor(id uint64) *kvpb.NodeDescriptor {
	if id == n.ident.NodeID {
		return n.descriptor()
	}
	if nodes, err := n.store.MetaNodes(); err == nil {
		for _, m := range nodes {
			if m.GetNodeId() == id {
				return m
			}
		}
	}
	d := &kvpb.NodeDescriptor{NodeId: id}
	if a, err := n.store.NodeAddress(id); err == nil {
		d.Address = a
	}
	return d
}

// respHeader is the response header of a request served by r at applied
// index applied.
func (n *Node) respHeader(r *raft.Replica, applied uint64) *kvpb.ResponseHeader {
	return &kvpb.ResponseHeader{RangeId: r.RangeID(), AppliedIndex: applied, NodeId: n.ident.NodeID,
		Now: rangesm.TimestampProto(n.clock.Now())}
}

// raftError maps an error of the replication layer to the status of
// docs/wire-protocol.md. op names the RPC.
func (n *Node) raftError(op string, err error) error {
	var nle *raft.NotLeaderError
	switch {
	case errors.As(err, &nle):
		st := status.Newf(codes.FailedPrecondition, "%s: %v", op, err)
		d := &kvpb.NotLeader{RangeId: nle.RangeID, Range: nle.Descriptor, Leader: &kvpb.NodeDescriptor{}}
		leader := nle.LeaderNodeID
		if r, err := n.store.Replica(nle.RangeID); err == nil {
			// The leader as known now, with its term, so that a client
			// can tell this hint from an older one.
			if st := r.Status(); st.LeaderNodeID != 0 {
				leader, d.LeaderTerm = st.LeaderNodeID, st.Term
			}
		}
		if leader != 0 {
			d.Leader = n.nodeDescriptor(leader)
		}
		return withDetails(st, d)
	case errors.Is(err, raft.ErrAmbiguous):
		st := status.Newf(codes.Unknown, "%s: the outcome of the write is unknown: %v", op, err)
		return withDetails(st, &kvpb.AmbiguousResult{Reason: err.Error()})
	case errors.Is(err, raft.ErrRangeNotFound):
		return withDetails(status.Newf(codes.NotFound, "%s: %v", op, err), &kvpb.RangeNotFound{})
	case errors.Is(err, raft.ErrStopped):
		return unavailable(time.Second, "%s: node is shutting down; not applied", op)
	case errors.Is(err, raft.ErrUnavailable):
		return unavailable(100*time.Millisecond, "%s: not applied: %v", op, err)
	case errors.Is(err, raft.ErrInvalidChange):
		return status.Errorf(codes.InvalidArgument, "%s: %v", op, err)
	case errors.Is(err, raft.ErrRejected), errors.Is(err, raft.ErrGenerationChanged):
		return status.Errorf(codes.FailedPrecondition, "%s: %v; not applied", op, err)
	}
	return status.Errorf(codes.Internal, "%s: %v", op, err)
}

// resultError maps a deterministic rejection of an applied command; nil
// for a command that applied.
func (n *Node) resultError(op string, h *kvpb.RequestHeader, r *raft.Replica, res *command.Result) error {
	switch res.Code {
	case command.CodeOK:
		return nil
	case command.CodeKeyOutOfRange:
		return n.keyMismatch(h.GetRangeId(), r.Descriptor(), op+": "+res.Message)
	case command.CodeRangeFrozen:
		// Frozen for a merge: nothing was written; after the merge the
		// keys are the left-hand range's.
		return unavailable(50*time.Millisecond, "%s: not applied: %s", op, res.Message)
	case command.CodeLeaseNotFound:
		return status.Errorf(codes.NotFound, "%s: %s; nothing written", op, res.Message)
	case command.CodeLeaseWindowPassed:
		// The put took longer than its attach window to apply: the lease
		// may have ended meanwhile. A new attempt attaches again.
		return status.Errorf(codes.FailedPrecondition, "%s: %s; nothing written, retry", op, res.Message)
	case command.CodeIntentConflict:
		if op == "TxnWrite" || op == "TxnCommit" {
			// Not a failure of the request: the transaction's answer
			// says it met an intent, and it runs again (txn_parallel.go).
			return nil
		}
		// A key locked by a transaction across ranges not yet resolved:
		// nothing was written; the client retries after a pause.
		return unavailable(intentRetryDelay, "%s: not applied: %s", op, res.Message)
	case command.CodeReadChanged:
		// Not a failure of the request: the transaction's answer says
		// its reads changed (txn_server.go).
		return nil
	case command.CodeMalformed:
		// Every replica refused the command as it stood (a transaction
		// claiming reads above the range's frontier, say): it wrote
		// nothing, so the outcome is known, not Internal's "unknown".
		return status.Errorf(codes.InvalidArgument, "%s: refused, nothing written: %s", op, res.Message)
	case command.CodeDedupWindowExpired:
		// Whether the first attempt applied is no longer known.
		st := status.Newf(codes.Unknown, "%s: the outcome of the write is unknown: %s", op, res.Message)
		return withDetails(st, &kvpb.AmbiguousResult{Reason: res.Message})
	}
	return status.Errorf(codes.Internal, "%s: the write was rejected: %v", op, res.Err())
}
