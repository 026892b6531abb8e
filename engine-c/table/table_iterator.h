// TableIterator: the iterator Table::NewIterator returns.
//
// A two-level walk (index block -> data blocks) specialized for tables.
// Both levels are BlockIters held by value and re-pointed block after
// block, so moving from one data block to the next costs a cache lookup and
// no allocation, and every step is a direct (not virtual) call. Forward
// scans read ahead (table_rep.h). Errors stop the iteration as in
// two_level_iterator.h.
//
// Internal to table/; the engine gets it as an Iterator* from Table.
//
// Thread safety: one thread at a time, like any Iterator.

#ifndef SHALE_TABLE_TABLE_ITERATOR_H_
#define SHALE_TABLE_TABLE_ITERATOR_H_

#include <cstdint>

#include "table/block.h"
#include "table/options.h"
#include "table/pinned_block.h"
#include "table/table.h"
#include "table/table_rep.h"
#include "util/iterator.h"

namespace shale {

class TableIterator final : public Iterator {
 public:
  // rep must outlive the iterator.
  TableIterator(const Table::Rep* rep, const TableReadOptions& options)
      : rep_(rep), options_(options) {}

  // Pins the index block. Must succeed before the iterator is used.
  Status Init();

  bool Valid() const override { return has_data_ && data_iter_.Valid(); }
  Slice key() const override { return data_iter_.key(); }
  Slice value() const override { return data_iter_.value(); }
  Status status() const override { return status_; }

  void Seek(const Slice& target) override;
  void SeekToFirst() override;
  void SeekToLast() override;
  void Next() override;
  void Prev() override;
  // In the block as BlockIter::NextPrefix does; blocks whose index
  // separator has the prefix hold nothing else and are passed over unread.
  void NextPrefix(const Slice& prefix) override;

 private:
  static constexpr uint64_t kNoBlock = ~uint64_t{0};

  // Points data_iter_ at the block the index entry names (keeping it if it
  // is already there). False, with has_data_ cleared, at the end of the
  // index or on an error (then status_ is set).
  bool LoadDataBlock();
  void DropDataBlock();
  // True (after dropping the block) if the current data block failed.
  bool DataBlockFailed();
  void SkipEmptyBlocksForward();
  void SkipEmptyBlocksBackward();

  const Table::Rep* const rep_;
  const TableReadOptions options_;
  Readahead readahead_;
  BlockRef index_ref_;  // pins the index block
  BlockIter index_iter_;
  BlockRef data_ref_;  // pins the current data block
  BlockIter data_iter_;
  bool has_data_ = false;  // data_iter_ is on the block at data_offset_
  uint64_t data_offset_ = kNoBlock;
  Status status_;  // the first error since the last Seek*
};

}  // namespace shale

#endif  // SHALE_TABLE_TABLE_ITERATOR_H_
