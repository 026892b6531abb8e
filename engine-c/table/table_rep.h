// Table::Rep: the state of an open table, and how the reader gets at its
// blocks (block cache, file reads, readahead). Shared by table.cc and
// table_iterator.cc.
//
// Internal to table/; not for use by the engine.
//
// Thread safety: a Rep is immutable once Table::Open returns, so its const
// methods may be called from many threads. A Readahead belongs to one
// iterator.

#ifndef SHALE_TABLE_TABLE_REP_H_
#define SHALE_TABLE_TABLE_REP_H_

#include <cstdint>
#include <memory>
#include <string>

#include "table/block.h"
#include "table/format.h"
#include "table/pinned_block.h"
#include "table/table.h"
#include "util/coding.h"
#include "util/env.h"

namespace shale {

class Readahead;

struct Table::Rep {
  TableOptions options;
  std::unique_ptr<RandomAccessFile> file;
  uint64_t file_size = 0;
  uint64_t file_number = 0;
  uint64_t global_seqno = 0;
  std::string file_name;
  uint64_t cache_id = 0;  // block-cache key prefix (when block_cache)

  TableProperties props;
  BlockHandle index_handle;
  // Index and filter held by the table (not cache_index_blocks), or null.
  std::unique_ptr<Block> index_block;
  std::unique_ptr<FilterData> filter;
  bool has_filter = false;
  BlockHandle filter_handle;
  std::unique_ptr<Block> range_del_block;  // null when the file has none
  uint64_t range_del_offset = 0;
  // True: index and filter go through options.block_cache.
  bool cache_index_and_filter = false;
  // End of the data blocks (they start at offset 0 and are contiguous).
  uint64_t data_end = 0;
  // Reads return memory the file owns (mmap): there is nothing to gain
  // from reading ahead.
  bool file_is_mapped = false;
  // The table was written with compression (its blocks are stored
  // compressed unless compressing did not pay).
  bool compressed = false;

  void CacheKey(uint64_t offset, char* buf) const {
    EncodeFixed64(buf, cache_id);
    EncodeFixed64(buf + 8, offset);
  }

  // Reads a block from the file (no cache).
  Status ReadBlockFromFile(const TableReadOptions& ro,
                           const BlockHandle& handle,
                           BlockContents* contents) const;

  // Reads [offset, offset + size) in one go into *range (*buf holds the
  // bytes unless the file is memory-mapped).
  Status ReadRange(uint64_t offset, uint64_t size, std::unique_ptr<char[]>* buf,
                   FileRange* range) const;

  // Reads a block from range if it lies there, else from the file.
  Status ReadMetaBlock(const TableReadOptions& ro, const FileRange& range,
                       const BlockHandle& handle,
                       BlockContents* contents) const;

  // Pins the data or index block at handle into *ref, through the block
  // cache when there is one. readahead (may be null) follows the access
  // pattern of an iterator and serves sequential reads from larger ones.
  Status GetBlock(const TableReadOptions& ro, const BlockHandle& handle,
                  BlockKind kind, BlockRef* ref,
                  Readahead* readahead = nullptr) const;

  Status GetIndexBlock(const TableReadOptions& ro, BlockRef* ref) const;

  // Reads the filter block (from range if it lies there) into a
  // FilterData.
  Status LoadFilter(const TableReadOptions& ro, const FileRange* range,
                    std::unique_ptr<FilterData>* result) const;

  // Pins the filter into *ref. REQUIRES: has_filter.
  Status GetFilter(const TableReadOptions& ro, FilterRef* ref) const;

  Status CorruptHandle(uint64_t index_offset) const {
    return Status::Corruption("bad block handle in index block",
                              BlockErrorContext(file_name, index_offset));
  }
};

// Readahead for an iterator's forward scans. After two data blocks loaded
// back to back (each starting where the previous ended), block reads that
// miss the cache are served from one larger read, 8 KiB at first and
// doubling up to 256 KiB: a scan of a cold table (or a compaction input)
// then makes one read per 256 KiB instead of one per block. Any other
// pattern (seeks, Prev) reads single blocks.
class Readahead {
 public:
  // Follows the pattern: called for every data block loaded, cached or not.
  void Observe(const BlockHandle& handle) {
    if (handle.offset() == next_offset_) {
      sequential_++;
    } else {
      sequential_ = 0;
      size_ = kInitialSize;
    }
    next_offset_ = handle.offset() + handle.size() + kBlockTrailerSize;
  }

  // Sets *range to bytes holding the block at handle - already read, or read
  // now if the pattern is sequential - or to nullptr (read the block alone).
  // REQUIRES: Observe(handle) was called.
  Status RangeFor(const Table::Rep& rep, const BlockHandle& handle,
                  const FileRange** range);

 private:
  static constexpr size_t kInitialSize = 8 << 10;
  static constexpr size_t kMaxSize = 256 << 10;

  uint64_t next_offset_ = ~uint64_t{0};  // where a sequential read goes next
  int sequential_ = 0;                   // blocks loaded back to back
  size_t size_ = kInitialSize;           // of the next readahead
  std::unique_ptr<char[]> buf_;
  FileRange range_;
  bool valid_ = false;  // range_ holds bytes read by the last readahead
};

}  // namespace shale

#endif  // SHALE_TABLE_TABLE_REP_H_
