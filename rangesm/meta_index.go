package rangesm

import (
	"bytes"
	"sync"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/raft/logstore"
)

// descIndex maps a user range's ID to the meta key of its descriptor, so
// that applying a descriptor write, and reading a descriptor by range ID,
// read one key instead of decoding every descriptor in meta (a split into
// N ranges would otherwise cost O(N²) decodes).
//
// It lives in memory only (no format change): the meta range's state
// machine rebuilds it from the engine in Restore, which runs when the
// replica loads and after a snapshot replaces its state, and keeps it in
// step in applyPutDescriptor, the only place that writes a user range's
// descriptor into meta once the store is open (bootstrap writes before).
// It is set as a write is staged, before the batch reaches the engine, so
// a reader outside the apply loop may find a key that does not hold the
// range yet: readers check the descriptor they read and fall back to a
// scan of meta when it is not the range they asked for, or when the index
// does not know the range.
type descIndex struct {
	mu sync.RWMutex
	// built says keyOf is complete for meta as the apply loop sees it.
	built bool
	keyOf map[uint64][]byte
}

// rebuild replaces the index with meta's descriptors in r.
func (x *descIndex) rebuild(r logstore.Reader) error {
	m := make(map[uint64][]byte)
	err := scanDescriptors(r, func(k []byte, d *kvpb.RangeDescriptor) bool {
		m[d.GetRangeId()] = bytes.Clone(k)
		return true
	})
	x.mu.Lock()
	defer x.mu.Unlock()
	if err != nil {
		x.built, x.keyOf = false, nil
		return err
	}
	x.built, x.keyOf = true, m
	return nil
}

// lookup returns the meta key of rangeID's descriptor; known is false when
// the index is not built (the caller must scan).
func (x *descIndex) lookup(rangeID uint64) (key []byte, found, known bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if !x.built {
		return nil, false, false
	}
	k, ok := x.keyOf[rangeID]
	return k, ok, true
}

// set records that rangeID's descriptor is at key, and that displaced (if
// not 0), whose descriptor was at key, is no longer in meta.
func (x *descIndex) set(rangeID uint64, key []byte, displaced uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.built {
		return
	}
	if displaced != 0 && displaced != rangeID {
		delete(x.keyOf, displaced)
	}
	x.keyOf[rangeID] = bytes.Clone(key)
}

// invalidate drops the index: lookups scan until it is rebuilt.
func (x *descIndex) invalidate() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.built, x.keyOf = false, nil
}

// find returns the meta copy of rangeID's descriptor and its key, or nils,
// through the index when it knows the range, else by scanning r. A range
// the built index does not know is absent when missIsAbsent (the apply
// loop, for which the index is exact); other readers scan to be sure.
func (x *descIndex) find(r logstore.Reader, rangeID uint64, missIsAbsent bool) (*kvpb.RangeDescriptor, []byte, error) {
	if rangeID == keys.MetaRangeID {
		return findMetaDescriptor(r, rangeID)
	}
	k, found, known := x.lookup(rangeID)
	switch {
	case found:
		v, err := r.Get(k)
		if err == nil {
			if d, err := logstore.DecodeDescriptor(v); err == nil && d.GetRangeId() == rangeID {
				return d, k, nil
			}
		}
	case known && missIsAbsent:
		return nil, nil, nil
	}
	return findMetaDescriptor(r, rangeID)
}
