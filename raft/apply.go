package raft

import (
	"fmt"
	"time"

	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/raft/apply"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/raft/logstore"
	"github.com/shaledb/shale/storage"
)

// Applying committed entries (the Raft README's step 3) through the
// replica's state machine (package apply): the state machine applies the
// entries into its batch; replication adds the applied index, gives Raft
// the configuration changes, creates and retires the ranges of splits and
// merges, and answers the proposers once the batch is written.
//
// All entries of one Ready are applied into one engine batch together with
// the new applied state, written without fsync: the log is durable, so a
// crash re-applies from the last applied state that reached the disk.

// applied is what an applied entry means for a waiting proposer.
type applied struct {
	p     *proposal
	res   command.Result
	index uint64
}

// applyCommittedLocked applies ents and returns the proposals to notify
// once the batch is written.
// REQUIRES: raftMu.
func (r *Replica) applyCommittedLocked(ents []*pb.Entry) ([]applied, bool, error) {
	leader := r.rn.BasicStatus().RaftState == etcdraft.StateLeader
	acks, confChanged, pos, cs, err := r.stageCommittedLocked(ents)
	if err != nil {
		return nil, false, err
	}
	if err := r.writeApplyBatchLocked(); err != nil {
		return nil, false, fmt.Errorf("writing applied entries up to %d: %w", pos.Index, err)
	}
	r.ls.SetApplied(pos, cs)
	r.resolveOutlivedLocked(pos.Term)
	if len(r.splits) > 0 {
		if err := r.finishSplitsLocked(leader); err != nil {
			return nil, false, err
		}
	}
	if len(r.merges) > 0 {
		r.finishMergesLocked()
	}
	return acks, confChanged, nil
}

// writeApplyBatchLocked writes the state machine's batch on its own.
// REQUIRES: raftMu.
func (r *Replica) writeApplyBatchLocked() error {
	if b := r.sm.Batch(); !b.Empty() {
		if err := r.store.writeEngine(b, storage.WriteOptions{}); err != nil {
			return err
		}
		r.store.metrics.applyWrites.Inc()
	}
	r.sm.Written()
	return nil
}

// stageCommittedLocked applies ents into the state machine's batch, with
// the new applied state, without writing it; it returns the proposals to
// notify once the batch is written, whether a configuration change
// applied, and the applied position and configuration to publish then.
// REQUIRES: raftMu.
func (r *Replica) stageCommittedLocked(ents []*pb.Entry) ([]applied, bool, logstore.LogPosition, *pb.ConfState, error) {
	st := r.rn.BasicStatus()
	if st.RaftState == etcdraft.StateLeader && !r.appliedInTermLocked() {
		for _, e := range ents {
			if e.GetTerm() == st.GetTerm() {
				r.mu.Lock()
				r.mu.appliedInTerm = true
				r.mu.Unlock()
				break
			}
		}
	}
	res, err := r.sm.Apply(ents, r.appliedBuf[:0])
	r.appliedBuf = res
	defer clear(r.appliedBuf) // drop the results' references
	if err != nil {
		// Fatal to the node; the replicas a merge locked are let go.
		for _, rr := range r.merges {
			rr.raftMu.Unlock()
		}
		r.merges = r.merges[:0]
		return nil, false, logstore.LogPosition{}, nil, err
	}
	var acks []applied
	confChanged := false
	var cs *pb.ConfState
	for i := range res {
		a, e := &res[i], ents[i]
		if a.DescriptorChanged {
			r.syncDescriptorLocked()
		}
		if a.Split != nil {
			if err := r.stageRightHandRaftStateLocked(a.Split); err != nil {
				return nil, false, logstore.LogPosition{}, nil, err
			}
			r.splits = append(r.splits, a.Split)
		}
		if a.ConfChange != nil {
			if cs, err = r.applyConfChangeLocked(e, a); err != nil {
				return nil, false, logstore.LogPosition{}, nil, err
			}
			confChanged = true
		}
		if a.ProposalID != 0 {
			if p := r.proposals[a.ProposalID]; p != nil {
				delete(r.proposals, a.ProposalID)
				acks = append(acks, applied{p: p, res: a.Result, index: e.GetIndex()})
			}
		}
	}
	last := ents[len(ents)-1]
	pos := logstore.LogPosition{Index: last.GetIndex(), Term: last.GetTerm()}
	machine := r.sm.AppliedState(pos.Index, pos.Term)
	if err := logstore.StageAppliedState(r.sm.Batch(), r.rangeID, pos, machine, cs); err != nil {
		return nil, false, pos, nil, err
	}
	return acks, confChanged, pos, cs, nil
}

// appliedInTermLocked reports whether this leader has applied an entry of
// its term.
// REQUIRES: raftMu.
func (r *Replica) appliedInTermLocked() bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.mu.appliedInTerm
}

// applyConfChangeLocked gives Raft the configuration change the state
// machine applied (or the change that changes nothing, for a rejected one)
// and returns Raft's new configuration.
// REQUIRES: raftMu.
func (r *Replica) applyConfChangeLocked(e *pb.Entry, a *apply.Applied) (*pb.ConfState, error) {
	cs := r.rn.ApplyConfChange(a.ConfChange)
	next := a.Descriptor
	if next == nil {
		return cs, nil // rejected
	}
	if err := confStateFor(next).Equivalent(cs); err != nil {
		return nil, fmt.Errorf("conf change entry %d: the descriptor (generation %d) does not describe Raft's configuration: %w",
			e.GetIndex(), next.GetGeneration(), err)
	}
	if apply.ReplicaOnNode(next, r.store.cfg.NodeID).GetReplicaId() != r.replicaID {
		r.removed = true
	}
	// A lease confirmed by the old configuration's quorum proves nothing
	// about the new one.
	r.mu.Lock()
	r.mu.leaseExpiry = time.Time{}
	r.mu.Unlock()
	return cs, nil
}

// syncDescriptorLocked publishes the state machine's descriptor and freeze.
// REQUIRES: raftMu.
func (r *Replica) syncDescriptorLocked() {
	desc := r.sm.Descriptor()
	left, leftGen, frozen := r.sm.Frozen()
	var f *freezeRecord
	if frozen {
		f = &freezeRecord{left: left, leftGen: leftGen}
	}
	r.desc = desc
	r.mu.Lock()
	r.mu.desc = desc
	r.mu.Unlock()
	r.setFrozenLocked(f)
}

// stageRightHandRaftStateLocked stages the initial Raft state of this
// node's replica of a split's right-hand range into the apply batch (the
// state machine staged its replicated state).
// REQUIRES: raftMu.
func (r *Replica) stageRightHandRaftStateLocked(right *kvpb.RangeDescriptor) error {
	b := r.sm.Batch()
	id := right.GetRangeId()
	pos := logstore.LogPosition{Index: initialIndex, Term: initialTerm}
	if err := logstore.StageAppliedState(b, id, pos, nil, confStateFor(right)); err != nil {
		return err
	}
	b.Put(keys.TruncatedStateKey(id), pos.Encode())
	b.Put(keys.HardStateKey(id), logstore.EncodeHardState(&pb.HardState{Term: new(uint64(initialTerm)), Commit: new(uint64(initialIndex))}))
	b.Put(keys.ReplicaIDKey(id), logstore.EncodeReplicaID(r.replicaID))
	return nil
}
