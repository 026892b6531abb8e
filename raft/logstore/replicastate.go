package logstore

import (
	"fmt"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/storage"
)

// LoadAppliedState reads range rangeID's applied state and ConfState from
// r. Both are zero/nil for a range with no replicated state.
func LoadAppliedState(r Reader, rangeID uint64) (LogPosition, *pb.ConfState, error) {
	var p LogPosition
	v, err := getOptional(r, keys.AppliedStateKey(rangeID))
	if err != nil {
		return p, nil, err
	}
	if v != nil {
		if p, _, _, err = DecodeAppliedState(v); err != nil {
			return p, nil, fmt.Errorf("range %d: %w", rangeID, err)
		}
	}
	v, err = getOptional(r, keys.ConfStateKey(rangeID))
	if err != nil || v == nil {
		return p, nil, err
	}
	cs, err := DecodeConfState(v)
	if err != nil {
		return p, nil, fmt.Errorf("range %d: %w", rangeID, err)
	}
	return p, cs, nil
}

// LoadDescriptor reads range rangeID's descriptor from r; nil if it has
// none (an uninitialized replica).
func LoadDescriptor(r Reader, rangeID uint64) (*kvpb.RangeDescriptor, error) {
	v, err := getOptional(r, keys.DescriptorKey(rangeID))
	if err != nil || v == nil {
		return nil, err
	}
	d, err := DecodeDescriptor(v)
	if err != nil {
		return nil, fmt.Errorf("range %d: %w", rangeID, err)
	}
	return d, nil
}

// LoadReplicaID reads this node's replica ID for rangeID; 0 if none.
func LoadReplicaID(r Reader, rangeID uint64) (uint64, error) {
	v, err := getOptional(r, keys.ReplicaIDKey(rangeID))
	if err != nil || v == nil {
		return 0, err
	}
	return DecodeReplicaID("replica id", v)
}

// LoadTombstone returns the lowest replica ID of rangeID this node may
// still host (0: no tombstone).
func LoadTombstone(r Reader, rangeID uint64) (uint64, error) {
	v, err := getOptional(r, keys.TombstoneKey(rangeID))
	if err != nil || v == nil {
		return 0, err
	}
	return DecodeReplicaID("tombstone", v)
}

// StageAppliedState stages the applied state, with the state machine's
// state machine (EncodeAppliedState; nil for none), and, if cs is not
// nil, the ConfState of rangeID into b.
func StageAppliedState(b *storage.Batch, rangeID uint64, p LogPosition, machine []byte, cs *pb.ConfState) error {
	b.Put(keys.AppliedStateKey(rangeID), EncodeAppliedState(p, machine))
	if cs != nil {
		v, err := EncodeConfState(cs)
		if err != nil {
			return err
		}
		b.Put(keys.ConfStateKey(rangeID), v)
	}
	return nil
}

// StageDescriptor stages d as its range's descriptor into b.
func StageDescriptor(b *storage.Batch, d *kvpb.RangeDescriptor) error {
	v, err := EncodeDescriptor(d)
	if err != nil {
		return err
	}
	b.Put(keys.DescriptorKey(d.GetRangeId()), v)
	return nil
}
