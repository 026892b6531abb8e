// IndexWindows: a dense array over a table's index block that a point
// lookup binary-searches instead of the block's restart keys.
//
// A seek in the index block decodes and compares a restart key per step
// (ten or so for a table of a thousand data blocks), each key spread over
// the block. The separators of one table mostly share a long prefix (all
// of them share at least the one of the first and the last), and what
// orders them is the few bytes after it. So each separator's order key
// (the whole key, or the user key of an internal key) is reduced to its
// window: the 8 bytes after the common prefix, big-endian, zero-padded
// past the key's end. A smaller window means a smaller key (a key that
// ends inside the window pads with zeros, which no byte of a longer key
// sorts under), so the search runs over integers and only separators
// whose window equals the target's need the full comparison.
//
// Built for index blocks whose every entry is a restart point (the
// builder's interval 1) under a bytewise or internal-bytewise comparator;
// otherwise empty, and lookups seek the block as before.
//
// Thread safety: immutable after Build; may be read by many threads.

#ifndef SHALE_TABLE_INDEX_WINDOWS_H_
#define SHALE_TABLE_INDEX_WINDOWS_H_

#include <cstdint>
#include <memory>

#include "util/comparator.h"
#include "util/slice.h"

namespace shale {

class Block;
class BlockIter;

class IndexWindows {
 public:
  IndexWindows() = default;
  IndexWindows(const IndexWindows&) = delete;
  IndexWindows& operator=(const IndexWindows&) = delete;

  // Builds the windows of index (whose bytes must outlive this object).
  // Leaves the object empty when the block does not qualify (see above).
  void Build(const Block& index, const Comparator* cmp);

  bool empty() const { return windows_ == nullptr; }

  // Positions it (an iterator over the index block Build was given) at the
  // first entry whose key is >= target, as it->Seek(target) would.
  void Seek(BlockIter* it, const Slice& target) const;

  // Bytes held (for the table's memory accounting).
  size_t MemoryUsage() const { return windows_ == nullptr ? 0 : n_ * 8; }

 private:
  // The order key of a table key: what Comparator::Kind compares first.
  Slice OrderKey(const Slice& key) const {
    return internal_ ? Slice(key.data(), key.size() - 8) : key;
  }
  // The window of an order key that starts with prefix_.
  uint64_t Window(const Slice& order_key) const;

  const Comparator* cmp_ = nullptr;
  bool internal_ = false;  // kInternalBytewise (else kBytewise)
  Slice prefix_;           // shared by every separator's order key
  std::unique_ptr<uint64_t[]> windows_;
  uint32_t n_ = 0;
};

}  // namespace shale

#endif  // SHALE_TABLE_INDEX_WINDOWS_H_
