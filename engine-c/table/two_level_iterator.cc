#include "table/two_level_iterator.h"

#include <string>

#include "table/iterator_wrapper.h"

namespace shale {

namespace {

class TwoLevelIterator final : public Iterator {
 public:
  TwoLevelIterator(Iterator* index_iter, BlockFunction block_function,
                   void* arg, const TableReadOptions& options)
      : block_function_(block_function),
        arg_(arg),
        options_(options),
        index_iter_(index_iter) {}

  bool Valid() const override { return data_iter_.Valid(); }
  Slice key() const override { return data_iter_.key(); }
  Slice value() const override { return data_iter_.value(); }
  Status status() const override { return status_; }

  void Seek(const Slice& target) override {
    status_ = Status::OK();
    index_iter_.Seek(target);
    InitDataBlock();
    if (data_iter_.iter() != nullptr) data_iter_.Seek(target);
    SkipEmptyDataBlocksForward();
  }

  void SeekToFirst() override {
    status_ = Status::OK();
    index_iter_.SeekToFirst();
    InitDataBlock();
    if (data_iter_.iter() != nullptr) data_iter_.SeekToFirst();
    SkipEmptyDataBlocksForward();
  }

  void SeekToLast() override {
    status_ = Status::OK();
    index_iter_.SeekToLast();
    InitDataBlock();
    if (data_iter_.iter() != nullptr) data_iter_.SeekToLast();
    SkipEmptyDataBlocksBackward();
  }

  void Next() override {
    assert(Valid());
    data_iter_.Next();
    SkipEmptyDataBlocksForward();
  }

  void Prev() override {
    assert(Valid());
    data_iter_.Prev();
    SkipEmptyDataBlocksBackward();
  }

  void NextPrefix(const Slice& prefix) override {
    assert(Valid());
    // The keys with the prefix may run on into the next blocks (files);
    // within one, NextPrefix leaves none behind.
    do {
      data_iter_.NextPrefix(prefix);
      if (data_iter_.Valid()) return;
      SkipEmptyDataBlocksForward();
    } while (data_iter_.Valid() && UserKeyHasPrefix(data_iter_.key(), prefix));
  }

 private:
  // True (after recording the error and dropping the data iterator) if the
  // index or the current block failed.
  bool Failed() {
    if (data_iter_.iter() != nullptr && !data_iter_.Valid() &&
        !data_iter_.status().ok()) {
      status_ = data_iter_.status();
    } else if (!index_iter_.Valid() && !index_iter_.status().ok()) {
      status_ = index_iter_.status();
    } else {
      return false;
    }
    data_iter_.Set(nullptr);
    data_block_handle_.clear();
    return true;
  }

  void SkipEmptyDataBlocksForward() {
    while (data_iter_.iter() == nullptr || !data_iter_.Valid()) {
      if (Failed()) return;
      if (!index_iter_.Valid()) {
        SetDataIterator(nullptr);
        return;
      }
      index_iter_.Next();
      InitDataBlock();
      if (data_iter_.iter() != nullptr) data_iter_.SeekToFirst();
    }
  }

  void SkipEmptyDataBlocksBackward() {
    while (data_iter_.iter() == nullptr || !data_iter_.Valid()) {
      if (Failed()) return;
      if (!index_iter_.Valid()) {
        SetDataIterator(nullptr);
        return;
      }
      index_iter_.Prev();
      InitDataBlock();
      if (data_iter_.iter() != nullptr) data_iter_.SeekToLast();
    }
  }

  void SetDataIterator(Iterator* data_iter) {
    data_iter_.Set(data_iter);
    if (data_iter == nullptr) data_block_handle_.clear();
  }

  void InitDataBlock() {
    if (!index_iter_.Valid()) {
      SetDataIterator(nullptr);
      return;
    }
    const Slice handle = index_iter_.value();
    if (data_iter_.iter() != nullptr && handle == Slice(data_block_handle_)) {
      // Already open on this block: keep it (and its position cache).
      return;
    }
    Iterator* iter = (*block_function_)(arg_, options_, handle);
    data_block_handle_.assign(handle.data(), handle.size());
    SetDataIterator(iter);
  }

  const BlockFunction block_function_;
  void* const arg_;
  const TableReadOptions options_;
  Status status_;
  IteratorWrapper index_iter_;
  IteratorWrapper data_iter_;  // may be nullptr
  // The index value that data_iter_ was opened with.
  std::string data_block_handle_;
};

}  // namespace

Iterator* NewTwoLevelIterator(Iterator* index_iter,
                              BlockFunction block_function, void* arg,
                              const TableReadOptions& options) {
  return new TwoLevelIterator(index_iter, block_function, arg, options);
}

}  // namespace shale
