// Iterator: the engine's internal cursor over sorted key/value pairs
// (memtables, SST blocks, whole tables, merged views).
//
// An iterator is used by one thread at a time. Key() and value() point into
// memory the iterator owns; they stay valid only until the iterator is moved
// or destroyed.

#ifndef SHALE_UTIL_ITERATOR_H_
#define SHALE_UTIL_ITERATOR_H_

#include <cstring>
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

  // For iterators over internal keys (a user key and an 8-byte trailer):
  // moves forward to the first entry whose user key does not start with
  // prefix. Keys with a given prefix are contiguous in the engine's
  // (bytewise) order, so that is the first entry at or after the
  // successor of every key with the prefix: an MVCC scan steps over a
  // key's older versions with it (their user keys start with the key's
  // unversioned part). Iterators that can pass over such entries without
  // decoding them (blocks, tables, merges of them) override this; the
  // default steps with Next. Afterwards the iterator is never on a key
  // with the prefix, which callers rely on. prefix must stay valid during
  // the call and must not point into this iterator's key. REQUIRES:
  // Valid(), forward direction, and the current user key starts with
  // prefix. (DBIter, whose keys are user keys, has the same operation on
  // them.)
  virtual void NextPrefix(const Slice& prefix);

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

// Whether internal key ikey's user key (ikey without its 8-byte trailer)
// starts with prefix.
inline bool UserKeyHasPrefix(const Slice& ikey, const Slice& prefix) {
  return ikey.size() >= prefix.size() + 8 &&
         memcmp(ikey.data(), prefix.data(), prefix.size()) == 0;
}

// An iterator over nothing, carrying status s (OK for a plain empty one).
Iterator* NewEmptyIterator();
Iterator* NewErrorIterator(const Status& s);

}  // namespace shale

#endif  // SHALE_UTIL_ITERATOR_H_
