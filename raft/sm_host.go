package raft

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/raft/apply"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/raft/logstore"
	"github.com/shaledb/shale/storage"
)

// smHost is a replica as its state machine sees it (apply.Host). Its
// methods run within the state machine's Apply and MayApply, under the
// replica's raftMu.
type smHost Replica

var _ apply.Host = (*smHost)(nil)

// NodeID implements apply.Host.
func (h *smHost) NodeID() uint64 { return h.store.cfg.NodeID }

// Counters implements apply.Host.
func (h *smHost) Counters() apply.Counters {
	m := h.store.metrics
	return apply.Counters{Writes: m.applyWrites, DedupHits: m.dedupHits}
}

// WriteEngine implements apply.Host.
func (h *smHost) WriteEngine(b *storage.Batch, wo storage.WriteOptions) error {
	return h.store.writeEngine(b, wo)
}

// CreatesSplitReplica implements apply.Host: not if a replica of right
// exists already (created by a message from its leader; a snapshot will
// initialize it), nor if it was removed from this node since (a tombstone
// above this replica's ID: both sides of a split share replica IDs).
func (h *smHost) CreatesSplitReplica(right *kvpb.RangeDescriptor) (bool, error) {
	s := h.store
	if _, err := s.Replica(right.GetRangeId()); err == nil {
		return false, nil
	}
	tomb, err := logstore.LoadTombstone(s.cfg.Engine, right.GetRangeId())
	if err != nil {
		return false, err
	}
	return h.replicaID >= tomb, nil
}

// RangeApplied implements apply.Host from the replica's published state.
func (h *smHost) RangeApplied(rangeID uint64) (applied uint64, initialized, exists bool) {
	rr, err := h.store.Replica(rangeID)
	if err != nil {
		return 0, false, false
	}
	rr.mu.RLock()
	defer rr.mu.RUnlock()
	return rr.mu.applied, rr.mu.desc != nil, true
}

// TakeOver implements apply.Host. A local replica of the right-hand range
// that does not match the merge (which the protocol excludes) is an error,
// fatal to the node, rather than a silent divergence.
func (h *smHost) TakeOver(right *kvpb.RangeDescriptor, leftGeneration, freezeIndex uint64) error {
	r := (*Replica)(h)
	rr, err := r.store.Replica(right.GetRangeId())
	if err != nil {
		return fmt.Errorf("this node has no replica of range %d", right.GetRangeId())
	}
	// Held until the batch is written and the replica is gone
	// (finishMergesLocked): nothing of it runs in between.
	rr.raftMu.Lock()
	f := rr.frozen
	if rr.rn == nil || !proto.Equal(rr.desc, right) || f == nil || f.left != r.rangeID || f.leftGen != leftGeneration ||
		rr.ls.Applied().Index < freezeIndex {
		rr.raftMu.Unlock()
		return fmt.Errorf("the local replica (generation %d, frozen %v, applied %d) is not the frozen range of the command (generation %d, freeze index %d)",
			rr.desc.GetGeneration(), f != nil, rr.ls.Applied().Index, right.GetGeneration(), freezeIndex)
	}
	b := r.sm.Batch()
	ns := keys.NodeLocalRangeSpan(rr.rangeID)
	b.DeleteRange(ns.Start, ns.End)
	b.Put(keys.TombstoneKey(rr.rangeID), logstore.EncodeReplicaID(rr.replicaID+1))
	r.merges = append(r.merges, rr)
	return nil
}
