// Statistics: the engine's always-on counters (tickers).
//
// Counters are sharded by thread so that two threads bumping the same ticker
// do not bounce one cache line between cores; Get() sums the shards. All
// operations are relaxed atomics: a reader may see a slightly stale sum, never
// a torn one.
//
// Thread safety: every method may be called concurrently.

#ifndef SHALE_UTIL_STATISTICS_H_
#define SHALE_UTIL_STATISTICS_H_

#include <atomic>
#include <cstdint>

namespace shale {

// Add new tickers at the end (before kTickerCount); names in statistics.cc.
enum Ticker : uint32_t {
  // Block cache (table/).
  kBlockCacheHit = 0,
  kBlockCacheMiss,
  kBlockCacheAdd,
  kBlockCacheIndexHit,
  kBlockCacheIndexMiss,
  kBlockCacheFilterHit,
  kBlockCacheFilterMiss,
  kBlockCacheDataHit,
  kBlockCacheDataMiss,
  // Bloom filters (table/): checked = lookups that consulted a filter;
  // useful = lookups the filter answered "absent", so no data block was read.
  kBloomFilterChecked,
  kBloomFilterUseful,
  // Bytes read from SST files by pread/mmap (table/).
  kSstBytesRead,
  kSstBlocksRead,
  // Write path and background work (db/).
  kUserBytesWritten,
  kUserKeysWritten,
  kWalBytesWritten,
  kWalSyncs,
  kFlushBytesWritten,
  kCompactionBytesWritten,
  kCompactionBytesRead,
  kFlushCount,
  kCompactionCount,
  kStallMicros,
  // Read path (db/).
  kBytesRead,
  kKeysRead,
  kTickerCount
};

// Returns the stable name of a ticker ("shale.block.cache.hit", ...).
const char* TickerName(Ticker t);

class Statistics {
 public:
  Statistics();
  Statistics(const Statistics&) = delete;
  Statistics& operator=(const Statistics&) = delete;

  void Record(Ticker t, uint64_t n = 1) {
    shards_[ShardIndex()].v[t].fetch_add(n, std::memory_order_relaxed);
  }

  uint64_t Get(Ticker t) const;

 private:
  static constexpr int kShards = 16;
  struct alignas(64) Shard {
    std::atomic<uint64_t> v[kTickerCount];
  };

  // The calling thread's shard, picked on its first Record. Inline with a
  // constant-initialized thread_local, so a Record (a point read makes
  // about ten) costs no call and no initialization guard.
  static unsigned ShardIndex() {
    if (shard_index_ == kUnassigned) shard_index_ = AssignShard();
    return shard_index_;
  }
  static unsigned AssignShard();

  static constexpr unsigned kUnassigned = ~0u;
  inline static thread_local unsigned shard_index_ = kUnassigned;

  Shard shards_[kShards];
};

}  // namespace shale

#endif  // SHALE_UTIL_STATISTICS_H_
