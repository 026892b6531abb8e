#include "util/arena.h"

namespace shale {

Arena::Arena(size_t block_size)
    : block_size_(block_size < 4096 ? 4096 : block_size) {}

Arena::~Arena() {
  for (char* block : blocks_) delete[] block;
}

char* Arena::AllocateFallback(size_t bytes) {
  if (bytes > block_size_ / 4) {
    // A large object gets its own block so the rest of the current block is
    // not wasted.
    return AllocateNewBlock(bytes);
  }
  alloc_ptr_ = AllocateNewBlock(block_size_);
  alloc_bytes_remaining_ = block_size_;
  char* result = alloc_ptr_;
  alloc_ptr_ += bytes;
  alloc_bytes_remaining_ -= bytes;
  return result;
}

char* Arena::AllocateAligned(size_t bytes) {
  constexpr size_t align =
      alignof(std::max_align_t) > 8 ? alignof(std::max_align_t) : 8;
  static_assert((align & (align - 1)) == 0, "alignment must be a power of 2");
  size_t current_mod = reinterpret_cast<uintptr_t>(alloc_ptr_) & (align - 1);
  size_t slop = (current_mod == 0 ? 0 : align - current_mod);
  size_t needed = bytes + slop;
  char* result;
  if (needed <= alloc_bytes_remaining_) {
    result = alloc_ptr_ + slop;
    alloc_ptr_ += needed;
    alloc_bytes_remaining_ -= needed;
  } else {
    // AllocateFallback returns the start of a new block, which new[] aligns.
    result = AllocateFallback(bytes);
  }
  assert((reinterpret_cast<uintptr_t>(result) & (align - 1)) == 0);
  return result;
}

char* Arena::AllocateNewBlock(size_t block_bytes) {
  char* result = new char[block_bytes];
  blocks_.push_back(result);
  memory_usage_.fetch_add(block_bytes + sizeof(char*),
                          std::memory_order_relaxed);
  return result;
}

}  // namespace shale
