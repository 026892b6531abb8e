package client

import (
	"bytes"
	"sort"
	"sync"

	"github.com/shaledb/shale/api/kvpb"
)

// rangeCache maps keys to the ranges holding them, with each range's
// leader as last known. Entries come from RangeLookup answers and from the
// descriptors nodes attach to RangeKeyMismatch and NotLeader answers; an
// entry is dropped when a node says it is wrong. It is safe for concurrent
// use.
type rangeCache struct {
	mu sync.RWMutex
	// entries are disjoint and sorted by start key.
	entries []*rangeEntry
	// nodes resolves node IDs to addresses.
	nodes map[uint64]string
}

// rangeEntry is one cached range. Its fields are immutable; a leader
// change replaces the entry.
type rangeEntry struct {
	desc   *kvpb.RangeDescriptor
	leader uint64 // node ID, 0 if unknown
}

func newRangeCache() *rangeCache {
	return &rangeCache{nodes: map[uint64]string{}}
}

// endsAfter reports whether a range ending at end (empty: +inf) holds keys
// at or after k, i.e. end > k.
func endsAfter(end, k []byte) bool { return len(end) == 0 || bytes.Compare(end, k) > 0 }

// lookup returns the cached range holding key, or nil.
func (c *rangeCache) lookup(key []byte) *rangeEntry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	i := sort.Search(len(c.entries), func(i int) bool { return endsAfter(c.entries[i].desc.GetEndKey(), key) })
	if i < len(c.entries) && bytes.Compare(c.entries[i].desc.GetStartKey(), key) <= 0 {
		return c.entries[i]
	}
	return nil
}

// lookupBefore returns the cached range holding the keys just below end
// (the last range when end is empty), for reverse scans, or nil.
func (c *rangeCache) lookupBefore(end []byte) *rangeEntry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for i := len(c.entries) - 1; i >= 0; i-- {
		d := c.entries[i].desc
		if len(end) == 0 {
			if len(d.GetEndKey()) == 0 {
				return c.entries[i]
			}
			return nil
		}
		if bytes.Compare(d.GetStartKey(), end) < 0 {
			if len(d.GetEndKey()) == 0 || bytes.Compare(end, d.GetEndKey()) <= 0 {
				return c.entries[i]
			}
			return nil
		}
	}
	return nil
}

// insert caches d with leader (0: unknown), replacing every entry it
// overlaps unless one of them is a newer descriptor of the same range.
func (c *rangeCache) insert(d *kvpb.RangeDescriptor, leader uint64) {
	if d == nil || d.GetRangeId() == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	kept := c.entries[:0:0]
	for _, e := range c.entries {
		if !overlaps(e.desc, d) {
			kept = append(kept, e)
			continue
		}
		if e.desc.GetRangeId() == d.GetRangeId() && e.desc.GetGeneration() > d.GetGeneration() {
			return // we know better already
		}
		if e.desc.GetRangeId() == d.GetRangeId() && e.desc.GetGeneration() == d.GetGeneration() && leader == 0 {
			leader = e.leader
		}
	}
	kept = append(kept, &rangeEntry{desc: d, leader: leader})
	sort.Slice(kept, func(i, j int) bool { return bytes.Compare(kept[i].desc.GetStartKey(), kept[j].desc.GetStartKey()) < 0 })
	c.entries = kept
}

// setLeader records leader as range rangeID's leader.
func (c *rangeCache) setLeader(rangeID, leader uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, e := range c.entries {
		if e.desc.GetRangeId() == rangeID {
			c.entries[i] = &rangeEntry{desc: e.desc, leader: leader}
		}
	}
}

// evict drops the entry of range rangeID.
func (c *rangeCache) evict(rangeID uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	kept := c.entries[:0:0]
	for _, e := range c.entries {
		if e.desc.GetRangeId() != rangeID {
			kept = append(kept, e)
		}
	}
	c.entries = kept
}

// addNode records node n's address.
func (c *rangeCache) addNode(n *kvpb.NodeDescriptor) {
	if n.GetNodeId() == 0 || n.GetAddress() == "" {
		return
	}
	c.mu.Lock()
	c.nodes[n.GetNodeId()] = n.GetAddress()
	c.mu.Unlock()
}

// address returns node id's address, or "".
func (c *rangeCache) address(id uint64) string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.nodes[id]
}

// size returns the number of cached ranges.
func (c *rangeCache) size() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.entries)
}

func overlaps(a, b *kvpb.RangeDescriptor) bool {
	return endsAfter(b.GetEndKey(), a.GetStartKey()) && endsAfter(a.GetEndKey(), b.GetStartKey())
}

// containsKey reports whether d holds key.
func containsKey(d *kvpb.RangeDescriptor, key []byte) bool {
	return bytes.Compare(d.GetStartKey(), key) <= 0 && endsAfter(d.GetEndKey(), key)
}

// containsSpan reports whether d holds every key of [start, end) (an empty
// end: unbounded).
func containsSpan(d *kvpb.RangeDescriptor, start, end []byte) bool {
	if bytes.Compare(d.GetStartKey(), start) > 0 {
		return false
	}
	if len(d.GetEndKey()) == 0 {
		return true
	}
	return len(end) != 0 && bytes.Compare(end, d.GetEndKey()) <= 0
}
