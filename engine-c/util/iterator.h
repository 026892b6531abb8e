// Iterator: the engine's internal cursor over sorted key/value pairs
// (memtables, SST blocks, whole tables, merged views).
//
// An iterator is used by one thread at a time. Key() and value() point into
// memory the iterator owns; they stay valid only until the iterator is moved
// or destroyed.

#ifndef SHALE_UTIL_ITERATOR_H_
#define SHALE_UTIL_ITERATOR_H_

#include <vector>

#include "util/slice.h"
#include "util/status.h"

namespace shale {

class Iterator {
 public:
  Iterator() = default;
  Iterator(const Iterator&) = delete;
  Iterator& operator=(const Iterator&) = delete;
  // Runs the registered cleanup functions in registration order.
  virtual ~Iterator();

  // True iff the iterator is positioned at an entry.
  virtual bool Valid() const = 0;
  virtual void SeekToFirst() = 0;
  virtual void SeekToLast() = 0;
  // Positions at the first entry with key >= target.
  virtual void Seek(const Slice& target) = 0;
  // REQUIRES: Valid()
  virtual void Next() = 0;
  // REQUIRES: Valid()
  virtual void Prev() = 0;
  // REQUIRES: Valid()
  virtual Slice key() const = 0;
  // REQUIRES: Valid()
  virtual Slice value() const = 0;
  // The first error met, or OK. An iterator that hit an error is !Valid().
  virtual Status status() const = 0;

  // Registers fn(arg1, arg2) to run when the iterator is destroyed (e.g. to
  // release a pinned block or version). The first registration costs no
  // allocation: iterators over single blocks are created on every read.
  using CleanupFunction = void (*)(void* arg1, void* arg2);
  void RegisterCleanup(CleanupFunction fn, void* arg1, void* arg2);

 private:
  struct Cleanup {
    CleanupFunction fn = nullptr;
    void* arg1 = nullptr;
    void* arg2 = nullptr;
  };
  Cleanup first_;              // fn == nullptr when unused
  std::vector<Cleanup> more_;  // the rest, in registration order
};

// An iterator over nothing, carrying status s (OK for a plain empty one).
Iterator* NewEmptyIterator();
Iterator* NewErrorIterator(const Status& s);

}  // namespace shale

#endif  // SHALE_UTIL_ITERATOR_H_
