// A merged view of several sorted internal iterators (memtables, L0 files,
// levels): a binary heap of the children, ordered by key in the direction
// of travel.
//
// Thread safety: one thread at a time, like every iterator.

#ifndef SHALE_DB_MERGING_ITERATOR_H_
#define SHALE_DB_MERGING_ITERATOR_H_

#include <vector>

#include "db/dbformat.h"
#include "util/iterator.h"

namespace shale {

// Returns an iterator over the union of children, which it takes ownership
// of. If several children hold equal keys, each is yielded. cmp must
// outlive the result.
Iterator* NewMergingIterator(const InternalKeyComparator* cmp,
                             std::vector<Iterator*> children);

}  // namespace shale

#endif  // SHALE_DB_MERGING_ITERATOR_H_
