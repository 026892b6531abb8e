package raft

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/raft/logstore"
	"github.com/shaledb/shale/storage"
)

// Bootstrap (docs/replication.md, "Bootstrap").
//
// A new cluster starts with the same initial member list on every node.
// Each empty store then writes, deterministically, the same initial state
// for the same two ranges, as if both had applied a log up to
// initialIndex: range 1 (meta) holds the node registry and the
// descriptors; range 2 covers the whole user key space. Every initial
// node holds a voter of both, with replica ID = node ID. Raft then starts
// from a log truncated at initialIndex, so there is nothing to replay and
// the first election happens at once; a node added later receives a
// snapshot, since its leader's log starts past index 1.

const (
	// initialIndex and initialTerm are the applied position every range
	// starts at. DO NOT CHANGE: stores bootstrapped by different versions
	// must agree.
	initialIndex = 10
	initialTerm  = 5
)

// ErrNotBootstrapped: the engine holds no store identity.
var ErrNotBootstrapped = errors.New("raft: store not bootstrapped")

// ErrAlreadyBootstrapped: the engine already holds a store identity.
var ErrAlreadyBootstrapped = errors.New("raft: store already bootstrapped")

// StoreIdent is the identity of a node's store, written once: the
// record at keys.StoreIdentKey.
type StoreIdent = keys.StoreIdent

// ReadStoreIdent returns the engine's store identity, or nil if it has
// none (a fresh engine).
func ReadStoreIdent(db *storage.DB) (*StoreIdent, error) {
	v, err := db.Get(keys.StoreIdentKey)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("raft: reading the store identity: %w", err)
	}
	id, err := keys.DecodeStoreIdent(v)
	if errors.Is(err, keys.ErrStoreFormat) {
		return nil, fmt.Errorf("raft: opening the store: %w", err)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", logstore.ErrCorruptState, err)
	}
	return &id, nil
}

// WriteStoreIdent records the identity of a store that joins an existing
// cluster (it holds no ranges until replicas are added to it).
func WriteStoreIdent(db *storage.DB, id StoreIdent) error {
	if id.NodeID == 0 || id.ClusterID == "" {
		return errors.New("raft: a store identity needs a node ID and a cluster ID")
	}
	old, err := ReadStoreIdent(db)
	if err != nil {
		return err
	}
	if old != nil {
		if *old == id {
			return nil
		}
		return fmt.Errorf("%w: as node %d of cluster %q", ErrAlreadyBootstrapped, old.NodeID, old.ClusterID)
	}
	b := storage.NewBatch(64)
	b.Put(keys.StoreIdentKey, id.Encode())
	return db.Write(b, storage.Sync)
}

// InitialDescriptors returns the descriptors of the two ranges a cluster
// of nodes starts with.
func InitialDescriptors(nodes []*kvpb.NodeDescriptor) (meta, user *kvpb.RangeDescriptor) {
	mk := func(rangeID uint64) *kvpb.RangeDescriptor {
		d := &kvpb.RangeDescriptor{RangeId: rangeID, Generation: 1}
		var maxID uint64
		for _, n := range nodes {
			d.Replicas = append(d.Replicas, &kvpb.ReplicaDescriptor{NodeId: n.GetNodeId(), ReplicaId: n.GetNodeId(), Type: kvpb.ReplicaType_REPLICA_TYPE_VOTER})
			maxID = max(maxID, n.GetNodeId())
		}
		d.NextReplicaId = maxID + 1
		return d
	}
	return mk(keys.MetaRangeID), mk(keys.FirstUserRangeID)
}

// Bootstrap writes the initial state of a new cluster into an empty
// engine: the store identity of node nodeID and, if nodeID is one of
// nodes, its replicas of the initial ranges. Every initial node must be
// bootstrapped with the same clusterID and nodes.
func Bootstrap(db *storage.DB, clusterID string, nodeID uint64, nodes []*kvpb.NodeDescriptor) error {
	if len(nodes) == 0 {
		return errors.New("raft: bootstrap needs at least one node")
	}
	nodes = slicesCloneSorted(nodes)
	seen := map[uint64]bool{}
	member := false
	for _, n := range nodes {
		if n.GetNodeId() == 0 || seen[n.GetNodeId()] || n.GetAddress() == "" {
			return fmt.Errorf("raft: bootstrap: bad or duplicate node %d (%q)", n.GetNodeId(), n.GetAddress())
		}
		seen[n.GetNodeId()] = true
		member = member || n.GetNodeId() == nodeID
	}
	if !member {
		return fmt.Errorf("raft: bootstrap: node %d is not in the initial cluster", nodeID)
	}
	old, err := ReadStoreIdent(db)
	if err != nil {
		return err
	}
	if old != nil {
		return fmt.Errorf("%w: as node %d of cluster %q", ErrAlreadyBootstrapped, old.NodeID, old.ClusterID)
	}
	meta, user := InitialDescriptors(nodes)
	b := storage.NewBatch(4 << 10)
	var maxNode uint64
	for _, n := range nodes {
		v, err := proto.MarshalOptions{Deterministic: true}.Marshal(n)
		if err != nil {
			return err
		}
		b.Put(keys.NodeKey(n.GetNodeId()), v)
		maxNode = max(maxNode, n.GetNodeId())
	}
	// A meta counter is 8 bytes big-endian (rangesm's meta.go).
	b.Put(keys.CounterKey("node-id"), binary.BigEndian.AppendUint64(nil, maxNode+1))
	pos := logstore.LogPosition{Index: initialIndex, Term: initialTerm}
	for _, d := range []*kvpb.RangeDescriptor{meta, user} {
		v, err := logstore.EncodeDescriptor(d)
		if err != nil {
			return err
		}
		b.Put(keys.MetaKeyFor(d), v)
		b.Put(keys.DescriptorKey(d.GetRangeId()), v)
		if err := logstore.StageAppliedState(b, d.GetRangeId(), pos, nil, confStateFor(d)); err != nil {
			return err
		}
		b.Put(keys.TruncatedStateKey(d.GetRangeId()), pos.Encode())
		b.Put(keys.HardStateKey(d.GetRangeId()), logstore.EncodeHardState(&pb.HardState{Term: new(uint64(initialTerm)), Commit: new(uint64(initialIndex))}))
		b.Put(keys.ReplicaIDKey(d.GetRangeId()), logstore.EncodeReplicaID(nodeID))
	}
	b.Put(keys.StoreIdentKey, StoreIdent{ClusterID: clusterID, NodeID: nodeID}.Encode())
	if err := db.Write(b, storage.Sync); err != nil {
		return fmt.Errorf("raft: bootstrap: %w", err)
	}
	return nil
}

func slicesCloneSorted(nodes []*kvpb.NodeDescriptor) []*kvpb.NodeDescriptor {
	out := append([]*kvpb.NodeDescriptor(nil), nodes...)
	sort.Slice(out, func(i, j int) bool { return out[i].GetNodeId() < out[j].GetNodeId() })
	return out
}
