// BlockBuilder: builds one block of prefix-compressed, sorted entries (data,
// index, meta blocks). The encoding is described in block_builder.cc.
//
// Thread safety: one thread at a time.

#ifndef SHALE_TABLE_BLOCK_BUILDER_H_
#define SHALE_TABLE_BLOCK_BUILDER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "util/slice.h"

namespace shale {

class BlockBuilder {
 public:
  // A full (unshared) key is stored every restart_interval entries.
  // REQUIRES: restart_interval >= 1
  explicit BlockBuilder(int restart_interval);
  BlockBuilder(const BlockBuilder&) = delete;
  BlockBuilder& operator=(const BlockBuilder&) = delete;

  // Forgets everything added, keeping the allocated buffers.
  void Reset();

  // REQUIRES: Finish() has not been called since the last Reset(); key is
  // larger than any key added so far (the caller checks the order);
  // key.size() and value.size() fit in 32 bits.
  void Add(const Slice& key, const Slice& value);

  // Appends the restart array and returns the finished block. The result
  // points into the builder and stays valid until Reset() or destruction.
  Slice Finish();

  // The size of the block Finish() would return now.
  size_t CurrentSizeEstimate() const {
    return buffer_.size() + restarts_.size() * sizeof(uint32_t) +
           sizeof(uint32_t);
  }

  bool empty() const { return buffer_.empty(); }

  // The last key added (valid until the next Add or Reset).
  Slice last_key() const { return Slice(last_key_); }

 private:
  const int restart_interval_;
  std::string buffer_;              // the block so far
  std::vector<uint32_t> restarts_;  // offsets of the restart points
  int counter_ = 0;                 // entries since the last restart
  bool finished_ = false;
  std::string last_key_;
};

}  // namespace shale

#endif  // SHALE_TABLE_BLOCK_BUILDER_H_
