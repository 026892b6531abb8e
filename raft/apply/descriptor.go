package apply

import (
	"bytes"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/raft/keys"
)

// Range descriptors are read by both layers: replication maps replicas to
// nodes and Raft configurations, the state machine checks keys against the
// span and applies splits, merges and configuration changes. These helpers
// are the rules both sides share.

// ErrSplitKey: the split key is not strictly inside the range.
var ErrSplitKey = errors.New("raft: invalid split key")

// CloneDescriptor deep-copies a descriptor (nil stays nil).
func CloneDescriptor(d *kvpb.RangeDescriptor) *kvpb.RangeDescriptor {
	if d == nil {
		return nil
	}
	return proto.Clone(d).(*kvpb.RangeDescriptor)
}

// IsJoint reports whether d describes a joint configuration.
func IsJoint(d *kvpb.RangeDescriptor) bool {
	for _, rd := range d.GetReplicas() {
		switch rd.GetType() {
		case kvpb.ReplicaType_REPLICA_TYPE_VOTER_INCOMING, kvpb.ReplicaType_REPLICA_TYPE_VOTER_OUTGOING,
			kvpb.ReplicaType_REPLICA_TYPE_VOTER_DEMOTING_LEARNER:
			return true
		}
	}
	return false
}

// LeaveJoint is the descriptor after the joint configuration of d is
// left: incoming voters become voters, outgoing ones leave, demoting ones
// become learners.
func LeaveJoint(d *kvpb.RangeDescriptor) *kvpb.RangeDescriptor {
	next := CloneDescriptor(d)
	next.Replicas = next.Replicas[:0]
	for _, rd := range d.GetReplicas() {
		rd = proto.Clone(rd).(*kvpb.ReplicaDescriptor)
		switch rd.GetType() {
		case kvpb.ReplicaType_REPLICA_TYPE_VOTER_INCOMING:
			rd.Type = kvpb.ReplicaType_REPLICA_TYPE_VOTER
		case kvpb.ReplicaType_REPLICA_TYPE_VOTER_OUTGOING:
			continue
		case kvpb.ReplicaType_REPLICA_TYPE_VOTER_DEMOTING_LEARNER:
			rd.Type = kvpb.ReplicaType_REPLICA_TYPE_LEARNER
		}
		next.Replicas = append(next.Replicas, rd)
	}
	next.Generation++
	return next
}

// ReplicaOnNode returns the replica of desc on nodeID, or nil.
func ReplicaOnNode(desc *kvpb.RangeDescriptor, nodeID uint64) *kvpb.ReplicaDescriptor {
	for _, rd := range desc.GetReplicas() {
		if rd.GetNodeId() == nodeID {
			return rd
		}
	}
	return nil
}

// SameNodes reports whether two descriptors place replicas on the same
// set of nodes.
func SameNodes(a, b *kvpb.RangeDescriptor) bool {
	if len(a.GetReplicas()) != len(b.GetReplicas()) {
		return false
	}
	for _, rd := range a.GetReplicas() {
		if ReplicaOnNode(b, rd.GetNodeId()) == nil {
			return false
		}
	}
	return true
}

// MergedDescriptor is the descriptor of l after it takes over its
// right-hand neighbour r: l's replicas over both spans, at a generation
// above both (meta keeps the newer of two copies at one key).
func MergedDescriptor(l, r *kvpb.RangeDescriptor) *kvpb.RangeDescriptor {
	m := CloneDescriptor(l)
	m.EndKey = bytes.Clone(r.GetEndKey())
	m.Generation = max(l.GetGeneration(), r.GetGeneration()) + 1
	return m
}

// ClipKey shortens a key for an error message.
func ClipKey(k []byte) []byte {
	if len(k) > 64 {
		return k[:64]
	}
	return k
}

// CheckSplitKey refuses a key that is not strictly inside desc (a split at
// the start would leave an empty left-hand range).
func CheckSplitKey(desc *kvpb.RangeDescriptor, k []byte) error {
	if len(k) == 0 || bytes.Compare(k, desc.GetStartKey()) <= 0 || !keys.ContainsUserKey(desc, k) {
		return fmt.Errorf("%w: %q is not strictly inside range %d [%q, %q)", ErrSplitKey, ClipKey(k),
			desc.GetRangeId(), ClipKey(desc.GetStartKey()), ClipKey(desc.GetEndKey()))
	}
	return nil
}

// SplitDescriptors returns the descriptors of a split of desc at k, the
// right-hand range getting ID rightID. Both sides keep desc's replicas
// (with the same replica IDs: they are unique per range) and move to the
// next generation.
func SplitDescriptors(desc *kvpb.RangeDescriptor, k []byte, rightID uint64) (left, right *kvpb.RangeDescriptor) {
	left = CloneDescriptor(desc)
	left.EndKey = bytes.Clone(k)
	left.Generation = desc.GetGeneration() + 1
	right = CloneDescriptor(desc)
	right.RangeId = rightID
	right.StartKey = bytes.Clone(k)
	right.Generation = desc.GetGeneration() + 1
	return left, right
}
