// Block: a read-only view of one block built by BlockBuilder (format in
// block_builder.cc), and BlockIter, its iterator.
//
// BlockIter is a concrete class so that hot paths (Table::Get, MultiGet, the
// table iterator) can keep one on the stack or inside another object and
// re-point it at block after block without a heap allocation.
//
// Thread safety: a Block is immutable and may be read by many threads; a
// BlockIter is for one thread at a time.

#ifndef SHALE_TABLE_BLOCK_H_
#define SHALE_TABLE_BLOCK_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "table/format.h"
#include "util/coding.h"
#include "util/iterator.h"

namespace shale {

class Comparator;
class BlockIter;

class Block {
 public:
  // Takes ownership of contents.data if contents.heap_allocated; otherwise
  // the bytes must outlive the Block.
  explicit Block(const BlockContents& contents);
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;
  ~Block();

  size_t size() const { return size_; }
  const char* data() const { return data_; }
  // False when the restart array is malformed; iterators then report
  // Corruption.
  bool ok() const { return restart_offset_ != kMalformed; }

  // Points *iter at this block (unpositioned). global_seqno, when non-zero,
  // replaces the sequence number in the 8-byte internal-key trailer of every
  // key the iterator returns (see Table::Open). error_file and
  // error_offset name the block in Corruption messages; *error_file must
  // outlive the iterator's use of this block. REQUIRES: the block outlives
  // the iterator's use of it.
  void InitIter(const Comparator* comparator, uint64_t global_seqno,
                const std::string* error_file, uint64_t error_offset,
                BlockIter* iter) const;

  // A heap-allocated iterator (for callers that need an Iterator*).
  Iterator* NewIterator(const Comparator* comparator, uint64_t global_seqno = 0,
                        const std::string* error_file = nullptr,
                        uint64_t error_offset = 0) const;

 private:
  static constexpr uint32_t kMalformed = ~uint32_t{0};

  const char* data_;
  size_t size_;
  uint32_t restart_offset_;  // offset of the restart array in data_
  uint32_t num_restarts_;
  bool owned_;  // data_ was allocated with new char[]
};

class BlockIter final : public Iterator {
 public:
  BlockIter() = default;
  BlockIter(const BlockIter&) = delete;
  BlockIter& operator=(const BlockIter&) = delete;

  // Re-points the iterator at a block (see Block::InitIter).
  void Init(const Comparator* comparator, const char* data,
            uint32_t restart_offset, uint32_t num_restarts,
            uint64_t global_seqno, const std::string* error_file,
            uint64_t error_offset);
  // Makes the iterator empty with the given error.
  void InitError(const Status& s);

  bool Valid() const override { return current_ < restart_offset_; }
  Status status() const override { return status_; }
  Slice key() const override { return key_; }
  Slice value() const override { return value_; }

  void Next() override;
  void Prev() override;
  void Seek(const Slice& target) override;
  void SeekToFirst() override;
  void SeekToLast() override;
  // Passes over the entries with the prefix without rebuilding their keys:
  // an entry that shares at least prefix.size() bytes with the entry before
  // it has the prefix if that one does, which its header alone tells (see
  // Iterator::NextPrefix). Only entries sharing fewer bytes (restart points
  // among them) are decoded and compared. For blocks of internal keys.
  void NextPrefix(const Slice& prefix) override;

  // The number of restart points of the block (every entry is one in a
  // block built with restart interval 1, as index blocks are).
  uint32_t num_restarts() const { return num_restarts_; }
  // Positions the iterator at the entry stored at restart point index
  // (invalid if index >= num_restarts()): a seek whose answer the caller
  // found itself (IndexWindows).
  void SeekToRestartEntry(uint32_t index);

 private:
  // Entries decoded while scanning backwards, so that a run of Prev()
  // calls decodes each restart interval once instead of once per step.
  // Allocated on the first Prev(): lookups never pay for it.
  struct PrevCache {
    struct Entry {
      uint32_t offset;      // of the entry in the block
      uint32_t key_offset;  // of its raw key in keys
      uint32_t key_size;
      uint32_t value_offset;  // of its value in the block
      uint32_t value_size;
    };
    std::vector<Entry> entries;  // before current_ in its restart interval,
                                 // in order
    std::string keys;
  };

  void ClearPrevCache() {
    if (prev_ != nullptr) prev_->entries.clear();
  }

  uint32_t RestartPoint(uint32_t index) const {
    return DecodeFixed32(data_ + restart_offset_ + index * sizeof(uint32_t));
  }
  uint32_t NextEntryOffset() const {
    return static_cast<uint32_t>(value_.data() + value_.size() - data_);
  }
  // Sets restart_index_ and the cached offset of the restart point after it.
  void SetRestartIndex(uint32_t index) {
    restart_index_ = index;
    next_restart_ =
        index + 1 < num_restarts_ ? RestartPoint(index + 1) : restart_offset_;
  }
  void SeekToRestartPoint(uint32_t index);
  // Decodes the entry at NextEntryOffset(). False at the end of the block
  // or on corruption (then status_ is set).
  bool ParseNextKey();
  // Seek's scan from the current entry (< target) on; see block.cc.
  bool ScanForward(const Slice& target);
  // Reads the full key stored at a restart point into *key.
  bool RestartKey(uint32_t index, Slice* key) {
    // Inline for the common entry (one-byte lengths, no global sequence
    // number): a seek reads a dozen restart keys.
    const uint32_t offset = RestartPoint(index);
    if (global_seqno_ == 0 && uint64_t{offset} + 3 <= restart_offset_) {
      const uint8_t* p = reinterpret_cast<const uint8_t*>(data_) + offset;
      if (p[0] == 0 && (p[1] | p[2]) < 128 &&
          uint64_t{offset} + 3 + p[1] + p[2] <= restart_offset_) {
        *key = Slice(reinterpret_cast<const char*>(p) + 3, p[1]);
        return true;
      }
    }
    return SlowRestartKey(index, key);
  }
  bool SlowRestartKey(uint32_t index, Slice* key);
  // Makes room for a raw key of n bytes in key_buf_, keeping its contents.
  void GrowKeyBuffer(size_t n);
  // Sets key_ from raw_key_, applying global_seqno_. False on corruption.
  bool SetKeyFromRaw() {
    if (global_seqno_ == 0) {
      key_ = raw_key_;
      return true;
    }
    return ApplyGlobalSeqno();
  }
  bool ApplyGlobalSeqno();
  void CorruptionError(const char* what);
  void MarkInvalid() {
    current_ = restart_offset_;
    restart_index_ = num_restarts_;
    next_restart_ = restart_offset_;
  }

  const Comparator* comparator_ = nullptr;
  const char* data_ = nullptr;
  uint32_t restart_offset_ = 0;  // end of entries, start of restart array
  uint32_t num_restarts_ = 0;
  uint32_t current_ = 0;        // offset of the current entry; >= restart
                                // offset when !Valid()
  uint32_t restart_index_ = 0;  // the restart interval holding current_
  uint32_t next_restart_ = 0;   // offset of restart point restart_index_+1
                                // (restart_offset_ for the last interval)
  uint64_t global_seqno_ = 0;
  const std::string* error_file_ = nullptr;
  uint64_t error_offset_ = 0;

  // raw_key_ is the key as stored (points into the block, or into
  // key_buf_ or prev_->keys); key_ is what callers see (raw_key_, or its
  // copy in seqno_buf_ with the global sequence number applied).
  Slice raw_key_;
  Slice key_;
  Slice value_;
  // Raw key of the current entry when it is not stored whole in the block.
  // Short keys stay in key_inline_, so an iterator on the stack (Get)
  // allocates nothing; longer ones move to key_heap_, kept for reuse.
  char key_inline_[64];
  char* key_buf_ = key_inline_;
  size_t key_capacity_ = sizeof(key_inline_);
  std::unique_ptr<char[]> key_heap_;
  std::string seqno_buf_;  // key with global_seqno_ applied
  Status status_;

  std::unique_ptr<PrevCache> prev_;
};

}  // namespace shale

#endif  // SHALE_TABLE_BLOCK_H_
