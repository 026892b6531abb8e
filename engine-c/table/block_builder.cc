// Block encoding. Keys are prefix-compressed against the previous key: each
// entry stores only the number of bytes it shares with the previous key and
// the bytes that differ. Every restart_interval entries a "restart point"
// stores the whole key (shared = 0); the offsets of the restart points are
// kept at the end of the block so that a reader can binary-search them and
// then scan at most restart_interval entries.
//
//   block := entry* restarts num_restarts
//   entry :=
//     shared: varint32        (bytes shared with the previous key; 0 at a
//                              restart point)
//     non_shared: varint32    (bytes of key that follow)
//     value_length: varint32
//     key_delta: char[non_shared]
//     value: char[value_length]
//   restarts := fixed32[num_restarts]  (offset of each restart entry, from
//                                       the start of the block, ascending)
//   num_restarts: fixed32              (>= 1, even for an empty block)
//
// The interval is a trade: 16 (data blocks) keeps a 4 KiB block with
// ~100-byte entries to ~3 restart points of binary search and at most 15
// decoded entries per seek while prefix compression still removes most of
// a sorted key's bytes. Index blocks use 1: every separator is read whole by
// binary search and their keys share little anyway.

#include "table/block_builder.h"

#include <algorithm>
#include <cassert>
#include <cstring>

#include "util/coding.h"

namespace shale {

namespace {

// Length of the longest common prefix of a and b, eight bytes at a time.
size_t SharedPrefixLength(const Slice& a, const Slice& b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i + 8 <= n) {
    uint64_t x, y;
    memcpy(&x, a.data() + i, 8);
    memcpy(&y, b.data() + i, 8);
    if (x != y) {
      // Little-endian: the lowest differing bit is in the first differing
      // byte.
      return i + (__builtin_ctzll(x ^ y) >> 3);
    }
    i += 8;
  }
  while (i < n && a[i] == b[i]) i++;
  return i;
}

}  // namespace

BlockBuilder::BlockBuilder(int restart_interval)
    : restart_interval_(restart_interval) {
  assert(restart_interval_ >= 1);
  restarts_.push_back(0);  // the first restart point is at offset 0
}

void BlockBuilder::Reset() {
  buffer_.clear();
  restarts_.clear();
  restarts_.push_back(0);
  counter_ = 0;
  finished_ = false;
  last_key_.clear();
}

void BlockBuilder::Add(const Slice& key, const Slice& value) {
  assert(!finished_);
  assert(counter_ <= restart_interval_);
  size_t shared = 0;
  if (counter_ < restart_interval_) {
    shared = SharedPrefixLength(last_key_, key);
  } else {
    // A restart point: the whole key is stored.
    restarts_.push_back(static_cast<uint32_t>(buffer_.size()));
    counter_ = 0;
  }
  const size_t non_shared = key.size() - shared;

  char header[3 * kMaxVarint32Length];
  char* p = EncodeVarint32(header, static_cast<uint32_t>(shared));
  p = EncodeVarint32(p, static_cast<uint32_t>(non_shared));
  p = EncodeVarint32(p, static_cast<uint32_t>(value.size()));
  buffer_.append(header, p - header);
  buffer_.append(key.data() + shared, non_shared);
  buffer_.append(value.data(), value.size());

  last_key_.resize(shared);
  last_key_.append(key.data() + shared, non_shared);
  assert(Slice(last_key_) == key);
  counter_++;
}

Slice BlockBuilder::Finish() {
  for (uint32_t restart : restarts_) PutFixed32(&buffer_, restart);
  PutFixed32(&buffer_, static_cast<uint32_t>(restarts_.size()));
  finished_ = true;
  return Slice(buffer_);
}

}  // namespace shale
