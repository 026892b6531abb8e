package node

import (
	"hash/maphash"
	"slices"
	"sync"
)

// latches make read-compare-write requests (CompareAndSwap) atomic with
// respect to every other write, without serializing blind writes against
// each other.
//
// Keys hash onto a fixed set of stripes, each a RWMutex. A blind write
// (Put, Delete, Batch) holds the stripes of its keys shared while it
// commits: blind writes never wait for each other, and the engine orders
// them. A CompareAndSwap holds its key's stripe exclusively from its read
// to the end of its commit, so no write to that key (or to another key on
// the stripe) can slip in between. A range deletion can touch any key, so
// it holds every stripe shared.
//
// Stripes are always taken in ascending order, and an exclusive holder
// takes only one, so there is no deadlock.
type latches struct {
	seed    maphash.Seed
	stripes []sync.RWMutex
}

const numLatchStripes = 1024

func newLatches() *latches {
	return &latches{seed: maphash.MakeSeed(), stripes: make([]sync.RWMutex, numLatchStripes)}
}

func (l *latches) stripe(key []byte) int {
	return int(maphash.Bytes(l.seed, key) % uint64(len(l.stripes)))
}

// latchSet is the set of stripes a write holds shared.
type latchSet struct {
	all     bool  // every stripe (range deletions)
	stripes []int // ascending, distinct
}

// sharedSet returns the stripes of keys.
func (l *latches) sharedSet(keys [][]byte, all bool) latchSet {
	if all {
		return latchSet{all: true}
	}
	s := make([]int, len(keys))
	for i, k := range keys {
		s[i] = l.stripe(k)
	}
	slices.Sort(s)
	return latchSet{stripes: slices.Compact(s)}
}

// acquireShared takes set's stripes shared and returns the release func.
func (l *latches) acquireShared(set latchSet) (release func()) {
	if set.all {
		for i := range l.stripes {
			l.stripes[i].RLock()
		}
		return func() {
			for i := range l.stripes {
				l.stripes[i].RUnlock()
			}
		}
	}
	for _, i := range set.stripes {
		l.stripes[i].RLock()
	}
	return func() {
		for _, i := range set.stripes {
			l.stripes[i].RUnlock()
		}
	}
}

// acquireExclusive takes key's stripe exclusively.
func (l *latches) acquireExclusive(key []byte) (release func()) {
	mu := &l.stripes[l.stripe(key)]
	mu.Lock()
	return mu.Unlock
}
