// Helpers of the table reader for blocks and filters held for the length
// of a lookup or an iterator's stay on a block: references that release a
// block-cache handle or free an owned block, the 64-byte-aligned filter
// buffer, and what each costs in the block cache.
//
// Internal to table/; not for use by the engine.
//
// Thread safety: a BlockRef or FilterRef belongs to one thread; the blocks
// and filters they point at are immutable and shared.

#ifndef SHALE_TABLE_PINNED_BLOCK_H_
#define SHALE_TABLE_PINNED_BLOCK_H_

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "table/block.h"
#include "util/cache.h"
#include "util/iterator.h"
#include "util/slice.h"
#include "util/statistics.h"

namespace shale {

// Block-cache keys: the table's cache ID, then the block's offset.
constexpr size_t kCacheKeySize = 16;
// Bytes the cache spends per entry besides the value (its handle with the
// key), charged with the entry so that the capacity bounds real memory.
constexpr size_t kCacheEntryOverhead = 64 + kCacheKeySize;

// A filter kept 64-byte aligned so that each of its lines is one cache line.
struct FilterData {
  static constexpr size_t kAlignment = 64;

  explicit FilterData(const Slice& contents) : size(contents.size()) {
    const size_t rounded = (size + kAlignment - 1) / kAlignment * kAlignment;
    bytes = static_cast<char*>(std::aligned_alloc(kAlignment, rounded));
    if (bytes == nullptr) throw std::bad_alloc();
    memcpy(bytes, contents.data(), size);
  }
  FilterData(const FilterData&) = delete;
  FilterData& operator=(const FilterData&) = delete;
  ~FilterData() { std::free(bytes); }

  Slice slice() const { return Slice(bytes, size); }
  // What the filter costs in the block cache, bookkeeping included.
  size_t Charge() const {
    return size + sizeof(FilterData) + kCacheEntryOverhead;
  }

  char* bytes;
  size_t size;
};

inline size_t BlockCharge(const Block& block) {
  return block.size() + sizeof(Block) + kCacheEntryOverhead;
}

inline void DeleteCachedBlock(const Slice& /*key*/, void* value) {
  delete static_cast<Block*>(value);
}

inline void DeleteCachedFilter(const Slice& /*key*/, void* value) {
  delete static_cast<FilterData*>(value);
}

inline void ReleaseCacheHandle(void* cache, void* handle) {
  static_cast<Cache*>(cache)->Release(static_cast<Cache::Handle*>(handle));
}

inline void DeleteBlock(void* block, void* /*unused*/) {
  delete static_cast<Block*>(block);
}

// A block pinned for as long as a lookup uses it: either a block-cache
// handle or a block the lookup owns. Lives on the stack: no allocation.
class BlockRef {
 public:
  BlockRef() = default;
  BlockRef(const BlockRef&) = delete;
  BlockRef& operator=(const BlockRef&) = delete;
  ~BlockRef() { Reset(); }

  void Reset() {
    if (handle_ != nullptr) cache_->Release(handle_);
    delete owned_;
    cache_ = nullptr;
    handle_ = nullptr;
    owned_ = nullptr;
    block_ = nullptr;
  }
  void SetCached(Cache* cache, Cache::Handle* handle) {
    Reset();
    cache_ = cache;
    handle_ = handle;
    block_ = static_cast<const Block*>(cache->Value(handle));
  }
  void SetOwned(Block* block) {
    Reset();
    owned_ = block;
    block_ = block;
  }
  // A block owned by someone else that outlives this reference.
  void SetBorrowed(const Block* block) {
    Reset();
    block_ = block;
  }

  const Block* block() const { return block_; }

  // Hands the pin to iter: it is released when iter is destroyed.
  void TransferTo(Iterator* iter) {
    if (handle_ != nullptr) {
      iter->RegisterCleanup(&ReleaseCacheHandle, cache_, handle_);
    } else if (owned_ != nullptr) {
      iter->RegisterCleanup(&DeleteBlock, owned_, nullptr);
    }
    cache_ = nullptr;
    handle_ = nullptr;
    owned_ = nullptr;
    block_ = nullptr;
  }

 private:
  Cache* cache_ = nullptr;
  Cache::Handle* handle_ = nullptr;
  Block* owned_ = nullptr;
  const Block* block_ = nullptr;
};

// A filter pinned for a lookup (see BlockRef).
class FilterRef {
 public:
  FilterRef() = default;
  FilterRef(const FilterRef&) = delete;
  FilterRef& operator=(const FilterRef&) = delete;
  ~FilterRef() {
    if (handle_ != nullptr) cache_->Release(handle_);
  }

  void SetCached(Cache* cache, Cache::Handle* handle) {
    cache_ = cache;
    handle_ = handle;
    filter_ = static_cast<const FilterData*>(cache->Value(handle))->slice();
  }
  void SetBorrowed(const Slice& filter) { filter_ = filter; }

  const Slice& filter() const { return filter_; }

 private:
  Cache* cache_ = nullptr;
  Cache::Handle* handle_ = nullptr;
  Slice filter_;
};

enum class BlockKind { kData, kIndex };

inline void Record(Statistics* stats, Ticker t, uint64_t n = 1) {
  if (stats != nullptr) stats->Record(t, n);
}

}  // namespace shale

#endif  // SHALE_TABLE_PINNED_BLOCK_H_
