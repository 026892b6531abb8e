package rangesm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/raft/logstore"
	"github.com/shaledb/shale/storage"
)

// The meta range (range 1) holds the cluster's metadata in the meta span
// (0x02): the node registry, the descriptor of every range, and
// cluster-wide counters. Every node that holds a replica of meta can read
// it locally (possibly stale); changes go through meta's Raft log.

// findMetaDescriptor returns the meta copy of range rangeID's descriptor
// and its key, or nils, scanning meta for a user range (descIndex.find
// reads one key when the index knows the range).
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

// metaReader reads this node's copy of meta (apply.MetaReader). The
// caller checks that the node holds a replica of meta.
type metaReader struct {
	db  *storage.DB
	idx *descIndex
}

// Nodes implements apply.MetaReader.
func (m metaReader) Nodes() ([]*kvpb.NodeDescriptor, error) { return readNodes(m.db) }

// Descriptor implements apply.MetaReader.
func (m metaReader) Descriptor(rangeID uint64) (*kvpb.RangeDescriptor, error) {
	d, _, err := m.idx.find(m.db, rangeID, false)
	return d, err
}

// Lookup implements apply.MetaReader.
func (m metaReader) Lookup(userKey []byte, prefetch int) ([]*kvpb.RangeDescriptor, error) {
	span := keys.MetaDescriptorSpan()
	it, err := m.db.NewIter(&storage.IterOptions{LowerBound: span.Start, UpperBound: span.End})
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

// Descriptors implements apply.MetaReader.
func (m metaReader) Descriptors() ([]*kvpb.RangeDescriptor, error) {
	var out []*kvpb.RangeDescriptor
	if d, _, err := findMetaDescriptor(m.db, keys.MetaRangeID); err != nil {
		return nil, err
	} else if d != nil {
		out = append(out, d)
	}
	err := scanDescriptors(m.db, func(_ []byte, d *kvpb.RangeDescriptor) bool {
		out = append(out, d)
		return true
	})
	return out, err
}
