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
	// term is the Raft term leader was learnt for (0: unknown, e.g. from
	// a RangeLookup). It stays when the leader is forgotten, so that an
	// older hint arriving later is still recognised as older.
	term uint64
}

// Leader hints (docs/sharding.md, "Client routing"). Answers come back
// out of order: a request sent before a failover can bring back a hint
// naming the old leader after another request has learnt the new one. A
// hint therefore replaces the cached leader only when it is newer: of a
// higher term, or, when either term is unknown, when the cache still
// holds what the request was routed with (nothing was learnt since).

// hintWins reports whether a hint (leader at term, 0s when unknown) that
// came back to a request routed with seen replaces cur.
func hintWins(cur, seen *rangeEntry, leader, term uint64) bool {
	switch {
	case term != 0 && cur.term != 0 && term != cur.term:
		return term > cur.term
	case cur.leader == seen.leader && cur.term == seen.term:
		return true // nothing learnt since the request was routed
	case term != 0 && term == cur.term:
		return cur.leader == 0 // the same term's leader, now known
	}
	return false
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

// insert caches d with leader (0: unknown) of an unknown term, replacing
// every entry it overlaps unless one of them is a newer descriptor of the
// same range.
func (c *rangeCache) insert(d *kvpb.RangeDescriptor, leader uint64) {
	c.insertTerm(d, leader, 0)
}

// insertTerm is insert with the term leader leads in (0: unknown). For
// the same descriptor, a known leader of a higher term is kept over it.
func (c *rangeCache) insertTerm(d *kvpb.RangeDescriptor, leader, term uint64) {
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
		if e.desc.GetRangeId() == d.GetRangeId() && e.desc.GetGeneration() == d.GetGeneration() {
			if keep := leader == 0 || (e.leader != 0 && e.term != 0 && (term == 0 || term < e.term)); keep {
				leader, term = e.leader, max(e.term, term)
			}
		}
	}
	kept = append(kept, &rangeEntry{desc: d, leader: leader, term: term})
	sort.Slice(kept, func(i, j int) bool { return bytes.Compare(kept[i].desc.GetStartKey(), kept[j].desc.GetStartKey()) < 0 })
	c.entries = kept
}

// hint records leader (0: none known) at term (0: unknown) as range
// rangeID's leader, as a request routed with seen was told, unless the
// cache has learnt a newer leader meanwhile (hintWins).
func (c *rangeCache) hint(rangeID, leader, term uint64, seen *rangeEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, e := range c.entries {
		if e.desc.GetRangeId() == rangeID && hintWins(e, seen, leader, term) {
			c.entries[i] = &rangeEntry{desc: e.desc, leader: leader, term: max(term, e.term)}
		}
	}
}

// forgetLeader forgets range rangeID's leader after a request routed with
// seen failed there (no answer, no connection), unless another request
// has learnt a different leader meanwhile: that one is kept.
func (c *rangeCache) forgetLeader(rangeID uint64, seen *rangeEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, e := range c.entries {
		if e.desc.GetRangeId() == rangeID && e.leader == seen.leader && e.term == seen.term {
			c.entries[i] = &rangeEntry{desc: e.desc, term: e.term}
		}
	}
}

// entry returns the cached entry of range rangeID, or nil.
func (c *rangeCache) entry(rangeID uint64) *rangeEntry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, e := range c.entries {
		if e.desc.GetRangeId() == rangeID {
			return e
		}
	}
	return nil
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
