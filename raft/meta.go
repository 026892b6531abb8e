package raft

import (
	"context"
	"fmt"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/raft/keys"
)

// The meta range (range 1) holds the cluster's metadata: the node
// registry, the descriptor of every range, and cluster-wide counters. It is
// state machine data (rangesm's meta.go); these are the Store's ways to
// read this node's copy and to change it through meta's Raft log.

// MetaNodes returns the node registry from this node's copy of meta
// (possibly stale). It fails if this node holds no replica of meta.
func (s *Store) MetaNodes() ([]*kvpb.NodeDescriptor, error) {
	if _, err := s.Replica(keys.MetaRangeID); err != nil {
		return nil, err
	}
	return s.cfg.StateMachines.Meta().Nodes()
}

// MetaLookup returns the descriptors of the user range holding userKey and
// of up to prefetch following ranges, from this node's copy of meta
// (possibly stale; the caller re-validates with the range itself).
func (s *Store) MetaLookup(userKey []byte, prefetch int) ([]*kvpb.RangeDescriptor, error) {
	if _, err := s.Replica(keys.MetaRangeID); err != nil {
		return nil, err
	}
	return s.cfg.StateMachines.Meta().Lookup(userKey, prefetch)
}

// MetaDescriptors returns every range descriptor in this node's copy of
// meta: the meta range's own first.
func (s *Store) MetaDescriptors() ([]*kvpb.RangeDescriptor, error) {
	if _, err := s.Replica(keys.MetaRangeID); err != nil {
		return nil, err
	}
	return s.cfg.StateMachines.Meta().Descriptors()
}

// RegisterNode records n in meta's node registry and returns its node ID:
// a node without one gets the next ID from meta's allocator, and an
// address already registered keeps its ID (so a node that crashed before
// saving its ID can register again). It is proposed through this node's
// replica of meta (forwarded to meta's leader if need be); it fails with
// ErrRangeNotFound on a node without one.
func (s *Store) RegisterNode(ctx context.Context, n *kvpb.NodeDescriptor) (uint64, error) {
	meta, err := s.Replica(keys.MetaRangeID)
	if err != nil {
		return 0, err
	}
	if n.GetAddress() == "" {
		return 0, fmt.Errorf("%w: a node needs an address", ErrInvalidChange)
	}
	res, _, err := meta.propose(ctx, &command.Command{Kind: command.KindPutNode, Node: n}, true)
	if err != nil {
		return 0, err
	}
	if err := res.Err(); err != nil {
		return 0, fmt.Errorf("%w: %v", ErrRejected, err)
	}
	return res.NodeID, nil
}

// DeregisterNode removes node nodeID from meta's node registry. The caller
// removes its replicas first.
func (s *Store) DeregisterNode(ctx context.Context, nodeID uint64) error {
	meta, err := s.Replica(keys.MetaRangeID)
	if err != nil {
		return err
	}
	res, _, err := meta.propose(ctx, &command.Command{Kind: command.KindRemoveNode, NodeID: nodeID}, true)
	if err != nil {
		return err
	}
	if err := res.Err(); err != nil {
		return fmt.Errorf("%w: %v", ErrRejected, err)
	}
	return nil
}
