#include "table/table_iterator.h"

#include <cassert>

#include "util/comparator.h"

namespace shale {

Status TableIterator::Init() {
  Status s = rep_->GetIndexBlock(options_, &index_ref_);
  if (s.ok()) {
    index_ref_.block()->InitIter(rep_->options.comparator, rep_->global_seqno,
                                 &rep_->file_name, rep_->index_handle.offset(),
                                 &index_iter_);
  }
  return s;
}

void TableIterator::Seek(const Slice& target) {
  status_ = Status::OK();
  // A short seek forward (an MVCC scan stepping over a key's older
  // versions) usually lands in the current block: at or after the current
  // entry and at or before the block's separator in the index, the first
  // entry >= target is in this block or starts the next one, so the index
  // search and the block lookup are skipped.
  if (has_data_ && data_iter_.Valid() && index_iter_.Valid()) {
    const Comparator* cmp = rep_->options.comparator;
    if (CompareInline(cmp, target, data_iter_.key()) >= 0 &&
        CompareInline(cmp, target, index_iter_.key()) <= 0) {
      data_iter_.Seek(target);
      SkipEmptyBlocksForward();
      return;
    }
  }
  index_iter_.Seek(target);
  if (LoadDataBlock()) data_iter_.Seek(target);
  SkipEmptyBlocksForward();
}

void TableIterator::SeekToFirst() {
  status_ = Status::OK();
  index_iter_.SeekToFirst();
  if (LoadDataBlock()) data_iter_.SeekToFirst();
  SkipEmptyBlocksForward();
}

void TableIterator::SeekToLast() {
  status_ = Status::OK();
  index_iter_.SeekToLast();
  if (LoadDataBlock()) data_iter_.SeekToLast();
  SkipEmptyBlocksBackward();
}

void TableIterator::Next() {
  assert(Valid());
  data_iter_.Next();
  if (!data_iter_.Valid()) SkipEmptyBlocksForward();
}

void TableIterator::NextPrefix(const Slice& prefix) {
  assert(Valid());
  data_iter_.NextPrefix(prefix);
  if (data_iter_.Valid()) return;
  if (!status_.ok() || DataBlockFailed() || !index_iter_.Valid()) {
    DropDataBlock();
    return;
  }
  // Every key of a later block lies after the current entry (which has the
  // prefix) and at or before the block's separator: when the separator has
  // the prefix too, so does every key in the block.
  do {
    index_iter_.Next();
  } while (index_iter_.Valid() && UserKeyHasPrefix(index_iter_.key(), prefix));
  if (LoadDataBlock()) {
    data_iter_.SeekToFirst();
    if (data_iter_.Valid() && UserKeyHasPrefix(data_iter_.key(), prefix)) {
      data_iter_.NextPrefix(prefix);
    }
  }
  // Past this block's separator, which does not have the prefix: the next
  // block starts after every key that does.
  SkipEmptyBlocksForward();
}

void TableIterator::Prev() {
  assert(Valid());
  data_iter_.Prev();
  if (!data_iter_.Valid()) SkipEmptyBlocksBackward();
}

bool TableIterator::LoadDataBlock() {
  if (!index_iter_.Valid()) {
    if (!index_iter_.status().ok()) status_ = index_iter_.status();
    DropDataBlock();
    return false;
  }
  BlockHandle handle;
  Slice v = index_iter_.value();
  if (!handle.DecodeFrom(&v).ok()) {
    status_ = rep_->CorruptHandle(rep_->index_handle.offset());
    DropDataBlock();
    return false;
  }
  if (has_data_ && handle.offset() == data_offset_) return true;
  DropDataBlock();
  Status s = rep_->GetBlock(options_, handle, BlockKind::kData, &data_ref_,
                            &readahead_);
  if (!s.ok()) {
    status_ = s;
    return false;
  }
  data_ref_.block()->InitIter(rep_->options.comparator, rep_->global_seqno,
                              &rep_->file_name, handle.offset(), &data_iter_);
  data_offset_ = handle.offset();
  has_data_ = true;
  return true;
}

void TableIterator::DropDataBlock() {
  data_ref_.Reset();
  data_offset_ = kNoBlock;
  has_data_ = false;
}

bool TableIterator::DataBlockFailed() {
  if (has_data_ && !data_iter_.status().ok()) {
    status_ = data_iter_.status();
    DropDataBlock();
    return true;
  }
  return false;
}

void TableIterator::SkipEmptyBlocksForward() {
  while (!has_data_ || !data_iter_.Valid()) {
    if (!status_.ok() || DataBlockFailed() || !index_iter_.Valid()) {
      DropDataBlock();
      return;
    }
    index_iter_.Next();
    if (LoadDataBlock()) data_iter_.SeekToFirst();
  }
}

void TableIterator::SkipEmptyBlocksBackward() {
  while (!has_data_ || !data_iter_.Valid()) {
    if (!status_.ok() || DataBlockFailed() || !index_iter_.Valid()) {
      DropDataBlock();
      return;
    }
    index_iter_.Prev();
    if (LoadDataBlock()) data_iter_.SeekToLast();
  }
}

}  // namespace shale
