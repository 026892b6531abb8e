// Options of the DB, of one write and of one read. The C API's
// shale_options_t maps onto Options field by field; the defaults here are
// the documented ones (engine.h, docs/engine.md).

#ifndef SHALE_DB_OPTIONS_H_
#define SHALE_DB_OPTIONS_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "table/options.h"
#include "util/status.h"

namespace shale {

class Env;
class Snapshot;

// How recovery treats a damaged WAL. Values equal engine.h's
// SHALE_WAL_RECOVERY_*.
enum class WalRecoveryMode : int {
  // Drop a torn record at the end of the last WAL; any other damage fails
  // the open with Corruption.
  kTolerateCorruptedTail = 0,
  // Any damage, even a torn tail, fails the open.
  kAbsoluteConsistency = 1,
  // Stop at the first damaged record and open with what came before it.
  kPointInTime = 2,
};

constexpr int kMaxLevels = 7;

struct Options {
  // Where files live and how they are read and written; nullptr means
  // Env::Default(). Must outlive the DB.
  Env* env = nullptr;

  bool create_if_missing = true;
  bool error_if_exists = false;
  // Verify block checksums on every read and fail on any inconsistency met.
  bool paranoid_checks = true;
  WalRecoveryMode wal_recovery_mode = WalRecoveryMode::kTolerateCorruptedTail;

  // Memtable size at which it is switched out and flushed.
  uint64_t write_buffer_size = 64 << 20;
  // Active + immutable memtables; writes stop when all are full.
  int max_write_buffer_number = 2;

  // SST layout.
  uint64_t block_size = 4096;
  int block_restart_interval = 16;
  int bloom_bits_per_key = 10;  // 0: no filters
  // Versioned keys (MVCC). When split_version_suffix is set, every key that
  // begins with versioned_key_prefix (empty: every key) ends with a version
  // suffix whose length, counting the suffix's last byte itself, is that
  // last byte; filters are built and probed on the key without the suffix,
  // so a point read of any version of a key can be answered by the filter
  // (table/version_suffix_filter.h). A table remembers the setting it was
  // built with and is read without its filter under any other.
  bool split_version_suffix = false;
  std::string versioned_key_prefix;  // at most 16 bytes
  CompressionType compression = kSnappyCompression;
  uint64_t block_cache_size = 8 << 20;
  bool cache_index_and_filter_blocks = false;
  bool use_mmap_reads = false;
  int max_open_files = -1;  // -1: no limit on open table readers
  uint64_t bytes_per_sync = 0;

  // Leveled compaction.
  uint64_t target_file_size_base = 64 << 20;
  uint64_t max_bytes_for_level_base = 256 << 20;
  double max_bytes_for_level_multiplier = 10;
  int num_levels = kMaxLevels;
  int level0_file_num_compaction_trigger = 4;
  int level0_slowdown_writes_trigger = 20;
  int level0_stop_writes_trigger = 36;
  int max_background_jobs = 2;
  bool disable_auto_compactions = false;
  uint64_t delayed_write_rate = 16 << 20;  // bytes/s while slowed down

  // Checks the options for values the engine cannot work with.
  Status Validate() const;
};

struct WriteOptions {
  // fsync the WAL before acknowledging. Concurrent synced writes share one
  // fsync.
  bool sync = false;
  // Skip the WAL: the write is lost on a crash until flushed.
  bool disable_wal = false;
  // Fail with Busy instead of waiting on a write stall.
  bool no_slowdown = false;
};

struct ReadOptions {
  // Read as of this snapshot; nullptr reads the latest state.
  const Snapshot* snapshot = nullptr;
  bool verify_checksums = true;
  bool fill_cache = true;
};

}  // namespace shale

#endif  // SHALE_DB_OPTIONS_H_
