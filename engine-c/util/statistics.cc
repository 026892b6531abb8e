#include "util/statistics.h"

#include <functional>
#include <thread>

namespace shale {

const char* TickerName(Ticker t) {
  switch (t) {
    case kBlockCacheHit:
      return "shale.block.cache.hit";
    case kBlockCacheMiss:
      return "shale.block.cache.miss";
    case kBlockCacheAdd:
      return "shale.block.cache.add";
    case kBlockCacheIndexHit:
      return "shale.block.cache.index.hit";
    case kBlockCacheIndexMiss:
      return "shale.block.cache.index.miss";
    case kBlockCacheFilterHit:
      return "shale.block.cache.filter.hit";
    case kBlockCacheFilterMiss:
      return "shale.block.cache.filter.miss";
    case kBlockCacheDataHit:
      return "shale.block.cache.data.hit";
    case kBlockCacheDataMiss:
      return "shale.block.cache.data.miss";
    case kBloomFilterChecked:
      return "shale.bloom.filter.checked";
    case kBloomFilterUseful:
      return "shale.bloom.filter.useful";
    case kSstBytesRead:
      return "shale.sst.read.bytes";
    case kSstBlocksRead:
      return "shale.sst.read.blocks";
    case kUserBytesWritten:
      return "shale.user.bytes.written";
    case kUserKeysWritten:
      return "shale.user.keys.written";
    case kWalBytesWritten:
      return "shale.wal.bytes.written";
    case kWalSyncs:
      return "shale.wal.syncs";
    case kFlushBytesWritten:
      return "shale.flush.bytes.written";
    case kCompactionBytesWritten:
      return "shale.compaction.bytes.written";
    case kCompactionBytesRead:
      return "shale.compaction.bytes.read";
    case kFlushCount:
      return "shale.flush.count";
    case kCompactionCount:
      return "shale.compaction.count";
    case kStallMicros:
      return "shale.stall.micros";
    case kBytesRead:
      return "shale.bytes.read";
    case kKeysRead:
      return "shale.keys.read";
    case kTickerCount:
      break;
  }
  return "shale.unknown";
}

Statistics::Statistics() {
  for (Shard& s : shards_) {
    for (auto& v : s.v) v.store(0, std::memory_order_relaxed);
  }
}

uint64_t Statistics::Get(Ticker t) const {
  uint64_t sum = 0;
  for (const Shard& s : shards_) sum += s.v[t].load(std::memory_order_relaxed);
  return sum;
}

unsigned Statistics::AssignShard() {
  return static_cast<unsigned>(
      std::hash<std::thread::id>()(std::this_thread::get_id()) % kShards);
}

}  // namespace shale
