// Options for building and reading SST files (the table layer).
//
// The table layer is key-format agnostic: it orders keys with the given
// comparator and stores what it is given. The engine passes internal keys
// (user key + 8-byte trailer, see db/dbformat.h) and a comparator/filter
// policy that understand them. The one exception is global_seqno below.

#ifndef SHALE_TABLE_OPTIONS_H_
#define SHALE_TABLE_OPTIONS_H_

#include <cstddef>
#include <cstdint>

namespace shale {

class Cache;
class Comparator;
class FilterPolicy;
class Statistics;

// Per-block compression, stored in each block's trailer. DO NOT CHANGE
// these values: they are in the file format.
enum CompressionType : uint8_t {
  kNoCompression = 0x0,
  kSnappyCompression = 0x1,
};

struct TableOptions {
  // Orders keys. Must outlive every builder and reader using it.
  const Comparator* comparator = nullptr;
  // nullptr: no filter block.
  const FilterPolicy* filter_policy = nullptr;
  // Uncompressed size at which a data block is cut.
  size_t block_size = 4096;
  // Keys between restart points (full keys) in data blocks. Index blocks
  // always use 1.
  int block_restart_interval = 16;
  CompressionType compression = kSnappyCompression;
  // A block is stored compressed only if that saves at least 1/8 of it.
  // Shared block cache for data blocks (and index/filter blocks when
  // cache_index_and_filter_blocks); nullptr disables caching.
  Cache* block_cache = nullptr;
  // false: index and filter blocks live with the open Table (the default,
  // fastest); true: they are loaded through the block cache and charged
  // against it, so memory stays bounded with many open files.
  bool cache_index_and_filter_blocks = false;
  // Optional counters (block cache hits/misses, filter results, bytes read).
  Statistics* statistics = nullptr;
};

struct TableReadOptions {
  // Verify the CRC32C of every block read from disk.
  bool verify_checksums = true;
  // Add blocks read to the block cache.
  bool fill_cache = true;
};

}  // namespace shale

#endif  // SHALE_TABLE_OPTIONS_H_
