package client

import (
	"context"

	"github.com/shaledb/shale/api/kvpb"
)

// RangeInfo describes the range holding a key: its span, its replicas,
// and which node leads it in which Raft term.
type RangeInfo struct {
	RangeID uint64
	// StartKey is inclusive, EndKey exclusive; empty means unbounded.
	StartKey, EndKey []byte
	// Generation increases with every split, merge and replica change.
	Generation uint64
	Replicas   []Replica
	// LeaderNodeID is the leader that the replicas in the highest term
	// reported name; failing that, the leader meta's answering node
	// knows; 0 when neither knows one.
	LeaderNodeID  uint64
	LeaderAddress string
	// Term is the highest Raft term any replica reported (the leader's
	// term when the leader came from the replicas); 0 if none answered.
	Term uint64
}

// Replica is one replica of a range.
type Replica struct {
	NodeID    uint64
	ReplicaID uint64
	// Voter is false for a learner (a replica catching up that does not
	// vote); true for a voter, including one entering or leaving a joint
	// configuration.
	Voter bool
	// Address is the node's gRPC address as the cluster knows it; "" if
	// unknown.
	Address string
}

// RangeInfo returns the range holding key, read from meta's current copy
// (not a stale one), and asks its replicas in parallel (each within
// Options.RequestTimeout and ctx) which of them leads and in which term.
// A replica that does not answer is left out of the leader's search; the
// descriptor is returned all the same.
func (c *Client) RangeInfo(ctx context.Context, key []byte) (*RangeInfo, error) {
	var resp *kvpb.RangeLookupResponse
	err := c.do(ctx, "RangeInfo", false, func(ctx context.Context, e *endpoint) (err error) {
		resp, err = e.admin.RangeLookup(ctx, &kvpb.RangeLookupRequest{Key: key})
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(resp.GetRanges()) == 0 {
		return nil, &Error{Op: "RangeInfo", Msg: "meta holds no range for the key yet", kind: ErrUnavailable}
	}
	c.learnLookup(resp)
	d := resp.GetRanges()[0]
	info := &RangeInfo{RangeID: d.GetRangeId(), StartKey: d.GetStartKey(), EndKey: d.GetEndKey(), Generation: d.GetGeneration()}
	var eps []*endpoint
	for _, rd := range d.GetReplicas() {
		r := Replica{NodeID: rd.GetNodeId(), ReplicaID: rd.GetReplicaId(), Voter: rd.GetType() != kvpb.ReplicaType_REPLICA_TYPE_LEARNER,
			Address: c.cache.address(rd.GetNodeId())}
		info.Replicas = append(info.Replicas, r)
		if r.Address == "" {
			continue
		}
		if e, err := c.endpointFor(r.Address); err == nil {
			eps = append(eps, e)
		}
	}
	sts, _ := c.statusEach(ctx, eps, 0, false)
	c.leadership(info, sts)
	if info.LeaderNodeID == 0 && len(resp.GetLeaders()) > 0 {
		// No replica answered as leader; meta's answering node may know.
		info.LeaderNodeID = resp.GetLeaders()[0].GetNodeId()
	}
	if info.LeaderNodeID != 0 {
		info.LeaderAddress = c.cache.address(info.LeaderNodeID)
	}
	return info, nil
}

// leadership fills info's leader and term from the replicas' statuses:
// the highest term any replica reports, and the leader that replicas in
// that term name (a Raft leader names itself).
func (c *Client) leadership(info *RangeInfo, sts []*kvpb.StatusResponse) {
	var leaderReplica uint64
	for _, st := range sts {
		for _, r := range st.GetRanges() {
			if r.GetRangeDescriptor().GetRangeId() != info.RangeID {
				continue
			}
			rf := r.GetRaft()
			switch {
			case rf.GetTerm() > info.Term:
				info.Term, leaderReplica = rf.GetTerm(), rf.GetLeaderReplicaId()
			case rf.GetTerm() == info.Term && leaderReplica == 0:
				leaderReplica = rf.GetLeaderReplicaId()
			}
		}
	}
	for _, r := range info.Replicas {
		if leaderReplica != 0 && r.ReplicaID == leaderReplica {
			info.LeaderNodeID = r.NodeID
		}
	}
}
