package raft

import (
	"bytes"
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
//
// A split ends its batch: the entries after it are applied into a batch
// of their own. A later entry may write the batch early to read the
// engine (the state machine's flush), which would put the split's move
// of the right-hand half's intents in the engine before the shorter
// descriptor is published, and a read or resolution served meanwhile
// would look for those intents under this range's ID and miss them
// (docs/transactions.md, "The lock table"). Ended there, the split's
// descriptor is published before its batch is written, as a shrinking
// descriptor must be; a growing one (a merge) is published after
// (stageCommittedLocked).
func (r *Replica) applyCommittedLocked(ents []*pb.Entry) ([]applied, bool, error) {
	if i := splitEnd(ents); i < len(ents) {
		acks, confChanged, err := r.applyCommittedLocked(ents[:i])
		if err != nil {
			return nil, false, err
		}
		more, changed, err := r.applyCommittedLocked(ents[i:])
		return append(acks, more...), confChanged || changed, err
	}
	leader := r.rn.BasicStatus().RaftState == etcdraft.StateLeader
	acks, confChanged, pos, cs, grown, err := r.stageCommittedLocked(ents)
	if err != nil {
		return nil, false, err
	}
	if err := r.writeApplyBatchLocked(); err != nil {
		return nil, false, fmt.Errorf("writing applied entries up to %d: %w", pos.Index, err)
	}
	if grown {
		// Published once the batch holding what the range took over
		// (the right-hand range's intents) is in the engine.
		r.syncDescriptorLocked()
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

// splitEnd returns the index just past the first split in ents that is
// not their last entry, or len(ents).
func splitEnd(ents []*pb.Entry) int {
	for i, e := range ents[:max(len(ents)-1, 0)] {
		if e.GetType() != pb.EntryNormal || len(e.GetData()) == 0 {
			continue
		}
		if k, ok := command.PeekKind(e.GetData()); ok && k == command.KindSplit {
			return i + 1
		}
	}
	return len(ents)
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
// applied, the applied position and configuration to publish then, and
// whether the descriptor grew (a merge), in which case the new
// descriptor is published only after the batch is written: until the
// right-hand range's intents are in this range's lock table in the
// engine, no read or resolution of their keys may be served here.
// REQUIRES: raftMu.
func (r *Replica) stageCommittedLocked(ents []*pb.Entry) ([]applied, bool, logstore.LogPosition, *pb.ConfState, bool, error) {
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
		return nil, false, logstore.LogPosition{}, nil, false, err
	}
	var acks []applied
	confChanged, grown := false, false
	var cs *pb.ConfState
	for i := range res {
		a, e := &res[i], ents[i]
		if a.DescriptorChanged && !grown {
			if grows(r.desc, r.sm.Descriptor()) {
				grown = true // published after the write, with what follows
			} else {
				r.syncDescriptorLocked()
			}
		}
		if a.Split != nil {
			if err := r.stageRightHandRaftStateLocked(a.Split); err != nil {
				return nil, false, logstore.LogPosition{}, nil, false, err
			}
			r.splits = append(r.splits, a.Split)
		}
		if a.ConfChange != nil {
			if cs, err = r.applyConfChangeLocked(e, a); err != nil {
				return nil, false, logstore.LogPosition{}, nil, false, err
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
		return nil, false, pos, nil, false, err
	}
	return acks, confChanged, pos, cs, grown, nil
}

// grows reports whether next covers a key cur does not (a merge's
// descriptor); an uninitialized cur grows into any next.
func grows(cur, next *kvpb.RangeDescriptor) bool {
	if cur == nil || next == nil {
		return next != nil
	}
	if bytes.Compare(next.GetStartKey(), cur.GetStartKey()) < 0 {
		return true
	}
	ce, ne := cur.GetEndKey(), next.GetEndKey()
	if len(ce) == 0 {
		return false
	}
	return len(ne) == 0 || bytes.Compare(ne, ce) > 0
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
