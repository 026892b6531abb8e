// A merging iterator: the sorted union of n child iterators (memtables and
// tables for a DB iterator or a compaction).
//
// Children are kept in a binary heap keyed by their current key, so a step
// costs O(log n) comparisons. Next() and Prev() may be mixed freely: on a
// change of direction every other child is re-positioned around the current
// key. Entries with equal keys in several children are returned in child
// order going forward (child 0 first) and in the reverse order going back,
// so a backward walk is exactly the forward walk reversed.
//
// An error from any child ends the iteration: the merged iterator becomes
// !Valid() and status() reports the error until the next Seek*.
//
// Thread safety: one thread at a time, like any Iterator.

#ifndef SHALE_TABLE_MERGING_ITERATOR_H_
#define SHALE_TABLE_MERGING_ITERATOR_H_

#include <vector>

#include "util/iterator.h"

namespace shale {

class Comparator;

// Takes ownership of children[0, n) (not of the array). comparator must
// outlive the result. n == 1 returns children[0] itself.
Iterator* NewMergingIterator(const Comparator* comparator, Iterator** children,
                             int n);

}  // namespace shale

#endif  // SHALE_TABLE_MERGING_ITERATOR_H_
