package logstore

import pb "go.etcd.io/raft/v3/raftpb"

// entryCache keeps the most recent entries of one range's log in memory,
// so that feeding followers and applying committed entries rarely reads
// the engine. It holds one contiguous run of indexes [first, first+len),
// ending at the last appended entry, and drops its oldest entries beyond
// its byte budget.
//
// Entries are immutable (Raft's contract), so the cache hands out the same
// *pb.Entry values it holds.
//
// Not safe for concurrent use: REQUIRES the owning replica's raftMu.
type entryCache struct {
	ents   []*pb.Entry
	bytes  int
	budget int
}

func (c *entryCache) first() uint64 {
	if len(c.ents) == 0 {
		return 0
	}
	return c.ents[0].GetIndex()
}

// get returns the cached entry at index, or nil.
func (c *entryCache) get(index uint64) *pb.Entry {
	if len(c.ents) == 0 {
		return nil
	}
	f := c.first()
	if index < f || index >= f+uint64(len(c.ents)) {
		return nil
	}
	return c.ents[index-f]
}

// appendEntries adds ents (consecutive) to the cache, replacing any cached
// entries at or after ents[0]'s index. A gap to the cached run restarts the
// cache at ents[0].
func (c *entryCache) appendEntries(ents []*pb.Entry) {
	if len(ents) == 0 {
		return
	}
	lo := ents[0].GetIndex()
	if len(c.ents) > 0 {
		f := c.first()
		switch {
		case lo < f || lo > f+uint64(len(c.ents)):
			c.reset()
		default:
			for _, e := range c.ents[lo-f:] {
				c.bytes -= EntrySize(e)
			}
			clear(c.ents[lo-f:])
			c.ents = c.ents[:lo-f]
		}
	}
	for _, e := range ents {
		c.ents = append(c.ents, e)
		c.bytes += EntrySize(e)
	}
	c.evict()
}

// truncateFront drops cached entries with index <= index.
func (c *entryCache) truncateFront(index uint64) {
	n := 0
	for n < len(c.ents) && c.ents[n].GetIndex() <= index {
		c.bytes -= EntrySize(c.ents[n])
		n++
	}
	c.dropFront(n)
}

func (c *entryCache) evict() {
	n := 0
	for n < len(c.ents)-1 && c.bytes > c.budget {
		c.bytes -= EntrySize(c.ents[n])
		n++
	}
	c.dropFront(n)
}

func (c *entryCache) dropFront(n int) {
	if n == 0 {
		return
	}
	clear(c.ents[:n])
	c.ents = c.ents[n:]
	// Re-slicing keeps the dropped prefix of the backing array alive; copy
	// once the live part is small compared to it.
	if cap(c.ents) > 64 && len(c.ents) < cap(c.ents)/4 {
		c.ents = append([]*pb.Entry(nil), c.ents...)
	}
}

func (c *entryCache) reset() {
	c.ents = nil
	c.bytes = 0
}
