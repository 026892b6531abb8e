// IteratorWrapper: an Iterator* plus a cached copy of its Valid() and key(),
// so that the iterators built on top of others (two-level, merging) avoid a
// virtual call per comparison.
//
// Thread safety: as the wrapped iterator (one thread at a time).

#ifndef SHALE_TABLE_ITERATOR_WRAPPER_H_
#define SHALE_TABLE_ITERATOR_WRAPPER_H_

#include <cassert>

#include "util/iterator.h"

namespace shale {

class IteratorWrapper {
 public:
  IteratorWrapper() = default;
  explicit IteratorWrapper(Iterator* iter) { Set(iter); }
  IteratorWrapper(const IteratorWrapper&) = delete;
  IteratorWrapper& operator=(const IteratorWrapper&) = delete;
  ~IteratorWrapper() { delete iter_; }

  Iterator* iter() const { return iter_; }

  // Takes ownership of iter (which may be nullptr), deleting the previous
  // one.
  void Set(Iterator* iter) {
    delete iter_;
    iter_ = iter;
    if (iter_ == nullptr) {
      valid_ = false;
    } else {
      Update();
    }
  }

  bool Valid() const { return valid_; }
  // REQUIRES: Valid()
  Slice key() const {
    assert(Valid());
    return key_;
  }
  // REQUIRES: Valid()
  Slice value() const {
    assert(Valid());
    return iter_->value();
  }
  // REQUIRES: iter() != nullptr
  Status status() const { return iter_->status(); }

  // REQUIRES: iter() != nullptr (and Valid() for Next/Prev)
  void Next() {
    iter_->Next();
    Update();
  }
  void Prev() {
    iter_->Prev();
    Update();
  }
  void NextPrefix(const Slice& prefix) {
    iter_->NextPrefix(prefix);
    Update();
  }
  void Seek(const Slice& k) {
    iter_->Seek(k);
    Update();
  }
  void SeekToFirst() {
    iter_->SeekToFirst();
    Update();
  }
  void SeekToLast() {
    iter_->SeekToLast();
    Update();
  }

 private:
  void Update() {
    valid_ = iter_->Valid();
    if (valid_) key_ = iter_->key();
  }

  Iterator* iter_ = nullptr;
  bool valid_ = false;
  Slice key_;
};

}  // namespace shale

#endif  // SHALE_TABLE_ITERATOR_WRAPPER_H_
