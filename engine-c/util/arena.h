// Arena: bump allocation for memtable entries, freed all at once.
//
// Thread safety: Allocate* must be called by one thread at a time (the
// memtable's single writer). MemoryUsage() may be called from any thread.

#ifndef SHALE_UTIL_ARENA_H_
#define SHALE_UTIL_ARENA_H_

#include <atomic>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace shale {

class Arena {
 public:
  // block_size: bytes per block (small allocations are carved from
  // blocks; a memtable sizes them from its write buffer).
  explicit Arena(size_t block_size = kDefaultBlockSize);
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  ~Arena();

  // Returns a pointer to bytes of fresh memory. REQUIRES: bytes > 0
  char* Allocate(size_t bytes);

  // Like Allocate, aligned to alignof(std::max_align_t) (at least 8).
  char* AllocateAligned(size_t bytes);

  // Bytes of memory held by the arena (blocks plus bookkeeping).
  size_t MemoryUsage() const {
    return memory_usage_.load(std::memory_order_relaxed);
  }

  // Bytes handed out so far plus the blocks' bookkeeping: MemoryUsage()
  // without the unused tail of the current block. A memtable compares this
  // with its write buffer size, so a block just allocated does not count
  // as full before anything is in it.
  // REQUIRES: called by the thread that allocates, or with it excluded.
  size_t UsedBytes() const { return MemoryUsage() - alloc_bytes_remaining_; }

 private:
  char* AllocateFallback(size_t bytes);
  char* AllocateNewBlock(size_t block_bytes);

  static constexpr size_t kDefaultBlockSize = 4096 * 64;  // 256 KiB

  const size_t block_size_;

  char* alloc_ptr_ = nullptr;
  size_t alloc_bytes_remaining_ = 0;
  std::vector<char*> blocks_;
  std::atomic<size_t> memory_usage_{0};
};

inline char* Arena::Allocate(size_t bytes) {
  assert(bytes > 0);
  if (bytes <= alloc_bytes_remaining_) {
    char* result = alloc_ptr_;
    alloc_ptr_ += bytes;
    alloc_bytes_remaining_ -= bytes;
    return result;
  }
  return AllocateFallback(bytes);
}

}  // namespace shale

#endif  // SHALE_UTIL_ARENA_H_
