// A two-level iterator: an index iterator whose values name blocks, and a
// function that opens an iterator over the block a value names. Iterating
// it walks every entry of every block in index order. Tables use it
// (index block -> data blocks); so can the engine (a level's file list ->
// tables).
//
// Thread safety: one thread at a time, like any Iterator.

#ifndef SHALE_TABLE_TWO_LEVEL_ITERATOR_H_
#define SHALE_TABLE_TWO_LEVEL_ITERATOR_H_

#include "table/options.h"
#include "util/iterator.h"

namespace shale {

// Returns an iterator over the block that index_value names (never nullptr:
// an error iterator on failure).
using BlockFunction = Iterator* (*)(void* arg, const TableReadOptions& options,
                                    const Slice& index_value);

// Takes ownership of index_iter. arg must outlive the result. Errors of the
// index or of a block stop the iteration: the iterator becomes !Valid() and
// status() reports the error until the next Seek*.
Iterator* NewTwoLevelIterator(Iterator* index_iter,
                              BlockFunction block_function, void* arg,
                              const TableReadOptions& options);

}  // namespace shale

#endif  // SHALE_TABLE_TWO_LEVEL_ITERATOR_H_
