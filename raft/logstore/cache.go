package logstore

import (
	"sync/atomic"

	pb "go.etcd.io/raft/v3/raftpb"
)

// CacheBudget bounds the entry caches of every replica of a node together
// (raft.Config.EntryCacheNodeBytes, a share of the node's memory budget):
// each cache also keeps to its own budget, but a node with many busy
// ranges would otherwise hold each one's. A cache that grows while the
// node's caches together are over the limit drops its own oldest entries
// until they are not (or it holds one entry), so the caches' memory stays
// near the limit, and the ranges that write most keep the most. The
// entries dropped are read from the engine when needed. Safe for
// concurrent use.
type CacheBudget struct {
	limit int64
	used  atomic.Int64
}

// NewCacheBudget returns a budget of limit bytes (0 or less: unbounded).
func NewCacheBudget(limit int64) *CacheBudget { return &CacheBudget{limit: limit} }

// Used returns the bytes the caches sharing the budget hold.
func (b *CacheBudget) Used() int64 { return b.used.Load() }

// Limit returns the budget's limit (0 or less: unbounded).
func (b *CacheBudget) Limit() int64 { return b.limit }

func (b *CacheBudget) add(n int) {
	if b != nil {
		b.used.Add(int64(n))
	}
}

func (b *CacheBudget) over() bool {
	return b != nil && b.limit > 0 && b.used.Load() > b.limit
}

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
	// shared is the node-wide budget (nil: none).
	shared *CacheBudget
}

// setBytes sets the cache's byte count, keeping the shared budget's in
// step.
func (c *entryCache) setBytes(n int) {
	c.shared.add(n - c.bytes)
	c.bytes = n
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
				c.setBytes(c.bytes - EntrySize(e))
			}
			clear(c.ents[lo-f:])
			c.ents = c.ents[:lo-f]
		}
	}
	for _, e := range ents {
		c.ents = append(c.ents, e)
		c.setBytes(c.bytes + EntrySize(e))
	}
	c.evict()
}

// truncateFront drops cached entries with index <= index.
func (c *entryCache) truncateFront(index uint64) {
	n := 0
	for n < len(c.ents) && c.ents[n].GetIndex() <= index {
		c.setBytes(c.bytes - EntrySize(c.ents[n]))
		n++
	}
	c.dropFront(n)
}

func (c *entryCache) evict() {
	n := 0
	for n < len(c.ents)-1 && (c.bytes > c.budget || c.shared.over()) {
		c.setBytes(c.bytes - EntrySize(c.ents[n]))
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
	c.setBytes(0)
}
