package raft

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/raft/apply"
	"github.com/shaledb/shale/raft/keys"
)

// Membership (docs/replication.md, "Membership").
//
// A range's replica set lives in its descriptor; Raft's configuration
// (ConfState) must always be the one the descriptor describes. So every
// configuration change is ONE log entry, a ConfChangeV2 whose Context is a
// ChangeReplicas command holding the next descriptor: applying it changes
// both, atomically, on every replica. A change computed from an older
// descriptor than the one in force when it applies (its
// expected_generation no longer matches) is rejected, deterministically,
// by applying an empty change.
//
// Adding a voter goes through a learner: the replica joins as a learner
// (it receives the log but does not vote, so an empty newcomer never
// weakens the quorum), catches up (by snapshot, since new replicas start
// empty), and only then is promoted. Changing more than one voter at once
// uses joint consensus (ConfChangeV2 with an automatic transition): the
// descriptor marks incoming and outgoing voters while the joint
// configuration is in force, and Raft proposes the empty change that
// leaves it once it has applied; applying that finalizes the descriptor.

// confStateFor returns the Raft configuration descriptor d describes.
func confStateFor(d *kvpb.RangeDescriptor) *pb.ConfState {
	cs := &pb.ConfState{}
	joint := apply.IsJoint(d)
	for _, rd := range d.GetReplicas() {
		id := rd.GetReplicaId()
		switch rd.GetType() {
		case kvpb.ReplicaType_REPLICA_TYPE_VOTER:
			cs.Voters = append(cs.Voters, id)
			if joint {
				cs.VotersOutgoing = append(cs.VotersOutgoing, id)
			}
		case kvpb.ReplicaType_REPLICA_TYPE_VOTER_INCOMING:
			cs.Voters = append(cs.Voters, id)
		case kvpb.ReplicaType_REPLICA_TYPE_VOTER_OUTGOING:
			cs.VotersOutgoing = append(cs.VotersOutgoing, id)
		case kvpb.ReplicaType_REPLICA_TYPE_VOTER_DEMOTING_LEARNER:
			cs.VotersOutgoing = append(cs.VotersOutgoing, id)
			cs.LearnersNext = append(cs.LearnersNext, id)
		case kvpb.ReplicaType_REPLICA_TYPE_LEARNER:
			cs.Learners = append(cs.Learners, id)
		}
	}
	if joint {
		cs.AutoLeave = new(true)
	}
	return cs
}

// ChangeReplicas changes range rangeID's replica set: ADD_VOTER and
// ADD_LEARNER add a replica on a node (as a learner; a voter is promoted
// once it has caught up), REMOVE removes the node's replica. It must run
// on the leader, and returns the final descriptor.
func (s *Store) ChangeReplicas(ctx context.Context, rangeID uint64, changes []*kvpb.ReplicaChange) (*kvpb.RangeDescriptor, error) {
	return s.ChangeReplicasAt(ctx, rangeID, 0, changes)
}

// ChangeReplicasAt is ChangeReplicas for changes decided from the range's
// descriptor at generation expectedGen (0: any). If the range has moved on
// since, nothing is done and the error matches ErrGenerationChanged: a
// decision taken from an old view (remove the learner on node 4) must not
// apply to a newer one (where node 4's replica is a voter by now).
func (s *Store) ChangeReplicasAt(ctx context.Context, rangeID, expectedGen uint64, changes []*kvpb.ReplicaChange) (*kvpb.RangeDescriptor, error) {
	r, err := s.Replica(rangeID)
	if err != nil {
		return nil, err
	}
	s.changeMu.Lock()
	defer s.changeMu.Unlock()
	if !r.IsLeader() {
		return nil, r.notLeaderError()
	}
	if r.Frozen() {
		return nil, r.FrozenError()
	}
	desc, err := r.waitNotJoint(ctx)
	if err != nil {
		return nil, err
	}
	if expectedGen != 0 && desc.GetGeneration() != expectedGen {
		return nil, fmt.Errorf("%w: range %d is at generation %d, the change was decided at %d", ErrGenerationChanged, rangeID, desc.GetGeneration(), expectedGen)
	}
	if err := validateChanges(desc, changes); err != nil {
		return nil, err
	}

	// 1. New replicas join as learners, one change each (a ConfChangeV2
	// with several changes always enters joint consensus).
	for _, c := range changes {
		if c.GetKind() == kvpb.ReplicaChange_REMOVE || apply.ReplicaOnNode(desc, c.GetNodeId()) != nil {
			continue
		}
		next := apply.CloneDescriptor(desc)
		id := next.GetNextReplicaId()
		next.NextReplicaId = id + 1
		next.Replicas = append(next.Replicas, &kvpb.ReplicaDescriptor{NodeId: c.GetNodeId(), ReplicaId: id, Type: kvpb.ReplicaType_REPLICA_TYPE_LEARNER})
		cc := &pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{{Type: pb.ConfChangeAddLearnerNode.Enum(), NodeId: new(id)}}}
		if desc, err = r.changeConf(ctx, desc, next, cc); err != nil {
			return nil, err
		}
	}

	// 2. Learners that are to become voters catch up first.
	var promote, removeVoters, removeLearners []uint64
	for _, c := range changes {
		rd := apply.ReplicaOnNode(desc, c.GetNodeId())
		switch c.GetKind() {
		case kvpb.ReplicaChange_ADD_VOTER:
			if rd.GetType() == kvpb.ReplicaType_REPLICA_TYPE_LEARNER {
				promote = append(promote, rd.GetReplicaId())
			}
		case kvpb.ReplicaChange_REMOVE:
			if rd == nil {
				continue
			}
			if rd.GetType() == kvpb.ReplicaType_REPLICA_TYPE_LEARNER {
				removeLearners = append(removeLearners, rd.GetReplicaId())
			} else {
				removeVoters = append(removeVoters, rd.GetReplicaId())
			}
		}
	}
	for _, id := range promote {
		if err := r.waitCaughtUp(ctx, id); err != nil {
			return nil, err
		}
	}

	// 3. Learners leave one at a time (voters are unaffected).
	for _, id := range removeLearners {
		next := apply.CloneDescriptor(desc)
		next.Replicas = slices.DeleteFunc(next.Replicas, func(rd *kvpb.ReplicaDescriptor) bool { return rd.GetReplicaId() == id })
		cc := &pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{{Type: pb.ConfChangeRemoveNode.Enum(), NodeId: new(id)}}}
		if desc, err = r.changeConf(ctx, desc, next, cc); err != nil {
			return nil, err
		}
	}

	// 4. Voter changes: one is a simple change; more use joint consensus,
	// left automatically once applied.
	if n := len(promote) + len(removeVoters); n > 0 {
		joint := n > 1
		next := apply.CloneDescriptor(desc)
		cc := &pb.ConfChangeV2{}
		if joint {
			cc.Transition = pb.ConfChangeTransition_ConfChangeTransitionJointImplicit.Enum()
		}
		kept := next.Replicas[:0]
		for _, rd := range next.Replicas {
			id := rd.GetReplicaId()
			switch {
			case slices.Contains(promote, id):
				rd.Type = kvpb.ReplicaType_REPLICA_TYPE_VOTER
				if joint {
					rd.Type = kvpb.ReplicaType_REPLICA_TYPE_VOTER_INCOMING
				}
				cc.Changes = append(cc.Changes, &pb.ConfChangeSingle{Type: pb.ConfChangeAddNode.Enum(), NodeId: new(id)})
			case slices.Contains(removeVoters, id):
				cc.Changes = append(cc.Changes, &pb.ConfChangeSingle{Type: pb.ConfChangeRemoveNode.Enum(), NodeId: new(id)})
				if !joint {
					continue
				}
				rd.Type = kvpb.ReplicaType_REPLICA_TYPE_VOTER_OUTGOING
			}
			kept = append(kept, rd)
		}
		next.Replicas = kept
		if desc, err = r.changeConf(ctx, desc, next, cc); err != nil {
			return nil, err
		}
		if joint {
			if desc, err = r.waitNotJoint(ctx); err != nil {
				return nil, err
			}
		}
	}
	s.updateMeta(ctx, desc)
	return desc, nil
}

// validateChanges refuses changes that make no sense for desc.
func validateChanges(desc *kvpb.RangeDescriptor, changes []*kvpb.ReplicaChange) error {
	if len(changes) == 0 {
		return fmt.Errorf("%w: no replica changes given", ErrInvalidChange)
	}
	seen := map[uint64]bool{}
	voters := 0
	for _, rd := range desc.GetReplicas() {
		if rd.GetType() == kvpb.ReplicaType_REPLICA_TYPE_VOTER {
			voters++
		}
	}
	for _, c := range changes {
		n := c.GetNodeId()
		if n == 0 {
			return fmt.Errorf("%w: change without a node ID", ErrInvalidChange)
		}
		if seen[n] {
			return fmt.Errorf("%w: node %d named twice", ErrInvalidChange, n)
		}
		seen[n] = true
		rd := apply.ReplicaOnNode(desc, n)
		switch c.GetKind() {
		case kvpb.ReplicaChange_ADD_VOTER:
			if rd != nil && rd.GetType() != kvpb.ReplicaType_REPLICA_TYPE_LEARNER {
				return fmt.Errorf("%w: node %d already holds a voter of range %d", ErrInvalidChange, n, desc.GetRangeId())
			}
			voters++
		case kvpb.ReplicaChange_ADD_LEARNER:
			if rd != nil {
				return fmt.Errorf("%w: node %d already holds a replica of range %d", ErrInvalidChange, n, desc.GetRangeId())
			}
		case kvpb.ReplicaChange_REMOVE:
			if rd == nil {
				continue // removed already: a retried removal is done
			}
			if rd.GetType() != kvpb.ReplicaType_REPLICA_TYPE_LEARNER {
				voters--
			}
		default:
			return fmt.Errorf("%w: unknown change kind %v", ErrInvalidChange, c.GetKind())
		}
	}
	if voters < 1 {
		return fmt.Errorf("%w: range %d would have no voters left", ErrInvalidChange, desc.GetRangeId())
	}
	return nil
}

// ErrInvalidChange: a requested replica change is invalid (nothing done).
var ErrInvalidChange = errors.New("raft: invalid replica change")

// ErrGenerationChanged: a replica change was decided from an older
// descriptor than the range's (nothing done).
var ErrGenerationChanged = errors.New("raft: the range changed since the change was decided")

// errConfChangeInProgress marks a configuration change Raft did not take
// because another one is pending.
var errConfChangeInProgress = errors.New("raft: configuration change in progress")

// changeConf proposes cc carrying next (computed from cur) and waits for
// it to apply; it returns the descriptor in force afterwards.
func (r *Replica) changeConf(ctx context.Context, cur, next *kvpb.RangeDescriptor, cc *pb.ConfChangeV2) (*kvpb.RangeDescriptor, error) {
	next.Generation = cur.GetGeneration() + 1
	if err := confStateFor(next).Equivalent(confStateAfter(cur, cc)); err != nil {
		return nil, fmt.Errorf("raft: range %d: computed an inconsistent change: %w", r.rangeID, err)
	}
	var res command.Result
	for {
		cmd := &command.Command{Kind: command.KindChangeReplicas, ExpectedGeneration: cur.GetGeneration(), Descriptor: next}
		var err error
		res, _, err = r.proposeConfChange(ctx, proto.Clone(cc).(*pb.ConfChangeV2), cmd)
		if err == nil {
			break
		}
		// Raft refuses a change while an earlier one is not applied (a new
		// leader counts everything in its log as pending until it has
		// applied it): nothing was proposed, so wait and try again.
		if !errors.Is(err, errConfChangeInProgress) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-r.store.after(20 * time.Millisecond):
		}
		if d := r.Descriptor(); d.GetGeneration() != cur.GetGeneration() {
			return nil, fmt.Errorf("%w: range %d changed (generation %d) while waiting", ErrRejected, r.rangeID, d.GetGeneration())
		}
	}
	if err := res.Err(); err != nil {
		return nil, fmt.Errorf("%w: range %d: %v", ErrRejected, r.rangeID, err)
	}
	r.store.cfg.Logger.Info("range configuration changed", "range", r.rangeID, "generation", next.GetGeneration(),
		"replicas", describeReplicas(next))
	return r.Descriptor(), nil
}

// confStateAfter predicts the ConfState cc leads to from cur's
// configuration, for checking a computed descriptor before proposing it.
func confStateAfter(cur *kvpb.RangeDescriptor, cc *pb.ConfChangeV2) *pb.ConfState {
	cs := confStateFor(cur)
	voters := slices.Clone(cs.Voters)
	learners := slices.Clone(cs.Learners)
	_, joint := cc.EnterJoint()
	var outgoing []uint64
	if joint {
		outgoing = slices.Clone(voters)
	}
	for _, c := range cc.GetChanges() {
		id := c.GetNodeId()
		voters = slices.DeleteFunc(voters, func(v uint64) bool { return v == id })
		learners = slices.DeleteFunc(learners, func(v uint64) bool { return v == id })
		switch c.GetType() {
		case pb.ConfChangeAddNode:
			voters = append(voters, id)
		case pb.ConfChangeAddLearnerNode:
			learners = append(learners, id)
		}
	}
	out := &pb.ConfState{Voters: voters, Learners: learners, VotersOutgoing: outgoing}
	if joint {
		out.AutoLeave = new(true)
	}
	return out
}

func describeReplicas(d *kvpb.RangeDescriptor) string {
	s := ""
	for i, rd := range d.GetReplicas() {
		if i > 0 {
			s += ","
		}
		s += fmt.Sprintf("n%d/r%d:%s", rd.GetNodeId(), rd.GetReplicaId(), shortType(rd.GetType()))
	}
	return s
}

func shortType(t kvpb.ReplicaType) string {
	switch t {
	case kvpb.ReplicaType_REPLICA_TYPE_VOTER:
		return "voter"
	case kvpb.ReplicaType_REPLICA_TYPE_LEARNER:
		return "learner"
	case kvpb.ReplicaType_REPLICA_TYPE_VOTER_INCOMING:
		return "incoming"
	case kvpb.ReplicaType_REPLICA_TYPE_VOTER_OUTGOING:
		return "outgoing"
	case kvpb.ReplicaType_REPLICA_TYPE_VOTER_DEMOTING_LEARNER:
		return "demoting"
	}
	return t.String()
}

// waitNotJoint waits until the applied descriptor is not joint (Raft
// leaves a joint configuration by itself) and returns it.
func (r *Replica) waitNotJoint(ctx context.Context) (*kvpb.RangeDescriptor, error) {
	for {
		r.mu.RLock()
		d, destroyed := r.mu.desc, r.mu.destroyed
		r.mu.RUnlock()
		if !apply.IsJoint(d) || destroyed {
			return d, nil
		}
		select {
		case <-ctx.Done():
			return nil, unavailablef(r.rangeID, "still in a joint configuration: %v", ctx.Err())
		case <-r.store.after(10 * time.Millisecond):
		}
	}
}

// waitCaughtUp waits until the leader knows replicaID holds every entry
// committed when the wait began.
func (r *Replica) waitCaughtUp(ctx context.Context, replicaID uint64) error {
	var target uint64
	for first := true; ; first = false {
		var match uint64
		var leader, known bool
		err := r.withRaft(ctx, func(r *Replica) {
			st := r.rn.Status()
			leader = st.RaftState == etcdraft.StateLeader
			if first {
				target = st.GetCommit()
			}
			if pr, ok := st.Progress[replicaID]; ok {
				match, known = pr.Match, true
			}
		})
		if err != nil {
			return err
		}
		if !leader {
			return r.notLeaderError()
		}
		if !known {
			return unavailablef(r.rangeID, "replica %d is not in the configuration", replicaID)
		}
		if match >= target {
			return nil
		}
		select {
		case <-ctx.Done():
			return unavailablef(r.rangeID, "replica %d did not catch up (at %d of %d): %v", replicaID, match, target, ctx.Err())
		case <-r.store.after(20 * time.Millisecond):
		}
	}
}

// withRaft runs f under raftMu at the start of the next round and waits
// for it.
func (r *Replica) withRaft(ctx context.Context, f func(*Replica)) error {
	done := make(chan struct{})
	r.in.Lock()
	r.in.inspect = append(r.in.inspect, func(r *Replica) {
		f(r)
		close(done)
	})
	r.in.Unlock()
	r.store.sched.enqueue(r)
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return unavailablef(r.rangeID, "%v", ctx.Err())
	case <-r.store.stopped:
		return unavailablef(r.rangeID, "%v", ErrStopped)
	}
}

// TransferLeader moves range rangeID's leadership to its replica on node
// targetNode and waits until it has moved. The lease is dropped at once.
func (s *Store) TransferLeader(ctx context.Context, rangeID, targetNode uint64) error {
	r, err := s.Replica(rangeID)
	if err != nil {
		return err
	}
	desc := r.Descriptor()
	target := apply.ReplicaOnNode(desc, targetNode)
	if target == nil || target.GetType() != kvpb.ReplicaType_REPLICA_TYPE_VOTER {
		return fmt.Errorf("%w: node %d holds no voter of range %d", ErrInvalidChange, targetNode, rangeID)
	}
	if !r.IsLeader() {
		if r.Status().Leader == target.GetReplicaId() {
			return nil
		}
		return r.notLeaderError()
	}
	r.mu.Lock()
	r.mu.transferring = true
	r.mu.leaseExpiry = time.Time{}
	r.mu.Unlock()
	r.in.Lock()
	r.in.transferTo = target.GetReplicaId()
	r.in.Unlock()
	s.sched.enqueue(r)
	// Raft abandons a transfer after an election timeout; retry until the
	// caller's deadline.
	retry := s.cfg.Clock.NewTicker(2 * s.cfg.electionTimeout())
	defer retry.Stop()
	poll := s.cfg.Clock.NewTicker(10 * time.Millisecond)
	defer poll.Stop()
	for {
		st := r.Status()
		if st.Leader == target.GetReplicaId() {
			return nil
		}
		select {
		case <-ctx.Done():
			return unavailablef(rangeID, "leadership did not move to node %d: %v", targetNode, ctx.Err())
		case <-poll.C():
		case <-retry.C():
			if r.IsLeader() {
				r.in.Lock()
				r.in.transferTo = target.GetReplicaId()
				r.in.Unlock()
				s.sched.enqueue(r)
			}
		}
	}
}

// updateMeta records desc in meta (best effort: a later change or the
// periodic reconciliation repairs a failure). It is proposed through this
// node's replica of meta, forwarded to meta's leader if need be.
func (s *Store) updateMeta(ctx context.Context, desc *kvpb.RangeDescriptor) {
	if desc.GetRangeId() == keys.MetaRangeID || s.cfg.TestingSkipMetaUpdates {
		return // meta's own descriptor is kept by its conf change
	}
	// A failure right after a membership change is often transient (meta's
	// leadership moving, this node just removed from meta): retry a few
	// times before leaving it to the reconciliation. Writing a descriptor
	// is idempotent (meta keeps the higher generation), so retrying an
	// ambiguous attempt is safe.
	backoff := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := s.PutDescriptors(ctx, []*kvpb.RangeDescriptor{desc})
		if err == nil {
			return
		}
		if attempt == metaUpdateAttempts || ctx.Err() != nil {
			s.cfg.Logger.Warn("updating meta after a replica change", "range", desc.GetRangeId(), "attempts", attempt, "err", err)
			return
		}
		select {
		case <-ctx.Done():
		case <-s.stopped:
			return
		case <-s.after(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// metaUpdateAttempts bounds updateMeta's retries (about 5 s of backoff).
const metaUpdateAttempts = 8
