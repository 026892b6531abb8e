// MemTableFilter: a Bloom filter over the unversioned keys of one memtable
// (the key without its version suffix, as the tables' filters hold them:
// table/version_suffix_filter.h), so that a versioned point read
// (DBImpl::SeekPrefix) of a key the memtable has no version of answers
// "none here" without a skiplist seek. A put of a new key reads its key's
// newest version first (package mvcc's Writer), and most keys a put writes
// are new; the seek is a chain of cache misses in a large memtable
// (docs/put-cost.md). RocksDB's memtable prefix Bloom filter
// (memtable_prefix_bloom_size_ratio) answers the same question.
//
// Cache-line blocked like the tables' filter (table/filter_policy.cc): a key
// picks one 64-byte line and sets or tests all its probes inside it, so a
// lookup costs one cache miss. Its size is fixed when the memtable is made
// (a share of the write buffer), so its false-positive rate grows with the
// number of keys; a false positive costs only the seek it would skip.
//
// Thread safety: Add() needs external synchronization (the memtable's one
// writer); MayContain() may run concurrently with it. A key added before
// the memtable entry it stands for is published (the sequence a reader
// reads at is released after the write) is seen by every reader that can
// see that entry.

#ifndef SHALE_DB_MEMTABLE_FILTER_H_
#define SHALE_DB_MEMTABLE_FILTER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>

#include "util/hash.h"
#include "util/slice.h"

namespace shale {

class MemTableFilter {
 public:
  // A filter of bytes bytes (rounded to whole 64-byte lines, at least one).
  explicit MemTableFilter(size_t bytes)
      : num_lines_(bytes / kLineBytes > 0 ? bytes / kLineBytes : 1),
        raw_(static_cast<char*>(
            std::calloc(num_lines_ * kLineBytes + kLineBytes, 1))),
        words_(Align(raw_)) {
    if (raw_ == nullptr) throw std::bad_alloc();
  }
  ~MemTableFilter() { std::free(raw_); }
  MemTableFilter(const MemTableFilter&) = delete;
  MemTableFilter& operator=(const MemTableFilter&) = delete;

  size_t ApproximateMemoryUsage() const { return num_lines_ * kLineBytes; }

  // REQUIRES: external synchronization (one writer).
  void Add(const Slice& key) {
    const uint32_t h = KeyHash(key);
    const uint64_t x = Mix(h);
    uint64_t* line = Line(h);
    for (int j = 0; j < kProbes; j++) {
      const uint32_t bit = (x >> (9 * j)) & (kLineBits - 1);
      std::atomic_ref<uint64_t> w(line[bit >> 6]);
      const uint64_t mask = uint64_t{1} << (bit & 63);
      // One writer: a plain read-modify-write, no locked instruction.
      const uint64_t old = w.load(std::memory_order_relaxed);
      if ((old & mask) == 0) w.store(old | mask, std::memory_order_relaxed);
    }
  }

  // False only if key was never added.
  bool MayContain(const Slice& key) const {
    const uint32_t h = KeyHash(key);
    const uint64_t x = Mix(h);
    uint64_t* line = Line(h);
    for (int j = 0; j < kProbes; j++) {
      const uint32_t bit = (x >> (9 * j)) & (kLineBits - 1);
      if ((std::atomic_ref<uint64_t>(line[bit >> 6])
               .load(std::memory_order_relaxed) &
           (uint64_t{1} << (bit & 63))) == 0) {
        return false;
      }
    }
    return true;
  }

 private:
  static constexpr size_t kLineBytes = 64;
  static constexpr size_t kWordsPerLine = kLineBytes / 8;
  static constexpr uint32_t kLineBits = kLineBytes * 8;
  // Six probes of 9 bits each from one 64-bit mix of the hash; the line
  // from the hash's high bits (as the tables' filter does). Six is the best
  // count near 8-9 bits a key, the filter's share at a memtable of small
  // entries; larger entries leave it emptier and more exact.
  static constexpr int kProbes = 6;
  static constexpr uint32_t kSeed = 0x6d656d66;  // not the tables' seed

  static uint32_t KeyHash(const Slice& key) {
    return Hash(key.data(), key.size(), kSeed);
  }

  // A 64-bit finalizer (splitmix64's): every output bit depends on every
  // input bit.
  static uint64_t Mix(uint64_t x) {
    x ^= x >> 31;
    x *= 0x7fb5d329728ea185ull;
    x ^= x >> 27;
    x *= 0x81dadef4bc2dd44dull;
    x ^= x >> 33;
    return x;
  }

  // The line of a key's hash: its high bits pick it.
  uint64_t* Line(uint32_t h) const {
    const uint64_t line = (static_cast<uint64_t>(h) * num_lines_) >> 32;
    return words_ + line * kWordsPerLine;
  }

  // The first line boundary in raw (which has a line to spare).
  static uint64_t* Align(char* raw) {
    const uintptr_t p = reinterpret_cast<uintptr_t>(raw);
    return reinterpret_cast<uint64_t*>((p + kLineBytes - 1) &
                                       ~uintptr_t{kLineBytes - 1});
  }

  const size_t num_lines_;
  // calloc: a large filter comes as untouched zero pages, so a memtable
  // that holds few keys does not make its whole filter resident.
  char* const raw_;
  // The lines, read and written through std::atomic_ref (readers run
  // concurrently with the writer).
  uint64_t* const words_;
};

}  // namespace shale

#endif  // SHALE_DB_MEMTABLE_FILTER_H_
