package raft

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/raft/command"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/raft/logstore"
	"github.com/shaledb/shale/storage"
)

// The meta range (range 1) holds the cluster's metadata in the meta span
// (0x02): the node registry, the descriptor of every range, and
// cluster-wide counters. Every node that holds a replica of meta can read
// it locally (possibly stale); changes go through meta's Raft log.

// metaKeyFor returns where the meta copy of d lives.
func metaKeyFor(d *kvpb.RangeDescriptor) []byte {
	if keys.IsMetaRange(d) {
		return keys.MetaRangeDescriptorKey()
	}
	return keys.MetaDescriptorKey(d.GetEndKey())
}

// findMetaDescriptor returns the meta copy of range rangeID's descriptor
// and its key, or nils.
func findMetaDescriptor(r logstore.Reader, rangeID uint64) (*kvpb.RangeDescriptor, []byte, error) {
	if rangeID == keys.MetaRangeID {
		v, err := r.Get(keys.MetaRangeDescriptorKey())
		if errors.Is(err, storage.ErrNotFound) {
			return nil, nil, nil
		}
		if err != nil {
			return nil, nil, err
		}
		d, err := logstore.DecodeDescriptor(v)
		return d, keys.MetaRangeDescriptorKey(), err
	}
	var found *kvpb.RangeDescriptor
	var foundKey []byte
	err := scanDescriptors(r, func(k []byte, d *kvpb.RangeDescriptor) bool {
		if d.GetRangeId() == rangeID {
			found, foundKey = d, bytes.Clone(k)
			return false
		}
		return true
	})
	return found, foundKey, err
}

// scanDescriptors calls f with every user range descriptor in meta, in key
// order, until f returns false.
func scanDescriptors(r logstore.Reader, f func(key []byte, d *kvpb.RangeDescriptor) bool) error {
	span := keys.MetaDescriptorSpan()
	it, err := r.NewIter(&storage.IterOptions{LowerBound: span.Start, UpperBound: span.End})
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		d, err := logstore.DecodeDescriptor(it.UnsafeValue())
		if err != nil {
			return fmt.Errorf("meta key %x: %w", it.UnsafeKey(), err)
		}
		if !f(it.UnsafeKey(), d) {
			break
		}
	}
	return it.Error()
}

// readNodes returns every node in the registry, by ID order.
func readNodes(r logstore.Reader) ([]*kvpb.NodeDescriptor, error) {
	span := keys.NodeSpan()
	it, err := r.NewIter(&storage.IterOptions{LowerBound: span.Start, UpperBound: span.End})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []*kvpb.NodeDescriptor
	for ok := it.First(); ok; ok = it.Next() {
		n := &kvpb.NodeDescriptor{}
		if err := proto.Unmarshal(it.UnsafeValue(), n); err != nil {
			return nil, fmt.Errorf("node registry key %x: %w", it.UnsafeKey(), err)
		}
		out = append(out, n)
	}
	return out, it.Error()
}

func encodeCounter(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func decodeCounter(b []byte) (uint64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("meta counter of %d bytes", len(b))
	}
	return binary.BigEndian.Uint64(b), nil
}

// MetaNodes returns the node registry from this node's copy of meta
// (possibly stale). It fails if this node holds no replica of meta.
func (s *Store) MetaNodes() ([]*kvpb.NodeDescriptor, error) {
	if _, err := s.Replica(keys.MetaRangeID); err != nil {
		return nil, err
	}
	return readNodes(s.cfg.Engine)
}

// MetaLookup returns the descriptors of the user range holding userKey and
// of up to prefetch following ranges, from this node's copy of meta
// (possibly stale; the caller re-validates with the range itself).
func (s *Store) MetaLookup(userKey []byte, prefetch int) ([]*kvpb.RangeDescriptor, error) {
	if _, err := s.Replica(keys.MetaRangeID); err != nil {
		return nil, err
	}
	span := keys.MetaDescriptorSpan()
	it, err := s.cfg.Engine.NewIter(&storage.IterOptions{LowerBound: span.Start, UpperBound: span.End})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []*kvpb.RangeDescriptor
	// The range holding k is the first whose descriptor key is > the
	// lookup key (descriptors are addressed by their exclusive end).
	for ok := it.SeekGT(keys.MetaLookupKey(userKey)); ok && len(out) <= prefetch; ok = it.Next() {
		d, err := logstore.DecodeDescriptor(it.UnsafeValue())
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	if err := it.Error(); err != nil {
		return nil, err
	}
	return out, nil
}

// MetaDescriptors returns every range descriptor in this node's copy of
// meta: the meta range's own first.
func (s *Store) MetaDescriptors() ([]*kvpb.RangeDescriptor, error) {
	if _, err := s.Replica(keys.MetaRangeID); err != nil {
		return nil, err
	}
	var out []*kvpb.RangeDescriptor
	if d, _, err := findMetaDescriptor(s.cfg.Engine, keys.MetaRangeID); err != nil {
		return nil, err
	} else if d != nil {
		out = append(out, d)
	}
	err := scanDescriptors(s.cfg.Engine, func(_ []byte, d *kvpb.RangeDescriptor) bool {
		out = append(out, d)
		return true
	})
	return out, err
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
