// Flags of db_bench. Names, defaults and meanings follow RocksDB 7.8.3's
// db_bench (`db_bench --help`), so one command line runs either tool.
// Only the flags listed here are accepted: any other flag is an error, not
// silently ignored, so a comparison never runs with a setting one tool
// dropped.

#ifndef SHALE_TOOLS_DB_BENCH_FLAGS_H_
#define SHALE_TOOLS_DB_BENCH_FLAGS_H_

#include <cstdint>
#include <string>

namespace shale {
namespace bench {

struct Flags {
  std::string benchmarks =
      "fillseq,fillrandom,overwrite,readrandom,readseq,readreverse,"
      "seekrandom,multireadrandom,readwhilewriting,stats";
  std::string db;  // "" : dbbench under the system temp directory
  bool use_existing_db = false;

  int64_t num = 1000000;
  int64_t reads = -1;   // < 0: num
  int64_t writes = -1;  // < 0: num
  int32_t threads = 1;
  int32_t duration = 0;  // seconds; 0: num/reads decide
  int32_t key_size = 16;
  int32_t value_size = 100;
  int64_t seed = 0;  // 0: derived from the clock

  std::string compression_type = "snappy";
  double compression_ratio = 0.5;
  int32_t block_size = 4096;
  int32_t bloom_bits = -1;  // < 0: RocksDB's default, no filter
  int64_t cache_size = 8 << 20;
  bool cache_index_and_filter_blocks = false;
  int32_t open_files = -1;
  bool mmap_read = false;

  int64_t write_buffer_size = 64 << 20;
  int32_t max_write_buffer_number = 2;
  int64_t target_file_size_base = 64 << 20;
  uint64_t max_bytes_for_level_base = 256 << 20;
  double max_bytes_for_level_multiplier = 10;
  int32_t level0_file_num_compaction_trigger = 4;
  int32_t level0_slowdown_writes_trigger = 20;
  int32_t level0_stop_writes_trigger = 36;
  int32_t max_background_jobs = 2;
  uint64_t delayed_write_rate = 8 << 20;
  bool disable_auto_compactions = false;

  bool sync = false;
  bool disable_wal = false;

  int64_t batch_size = 1;
  bool multiread_batched = false;
  int32_t seek_nexts = 0;
  uint64_t benchmark_write_rate_limit = 0;  // bytes/s for writers; 0: none

  bool statistics = false;
  bool histogram = false;
};

// Parses argv into *flags. Accepts --name=value, -name=value, --name value
// and, for booleans, --name / --noname. On error (unknown flag, bad value)
// returns false with *error set. Sets *help when --help was given.
bool ParseFlags(int argc, char** argv, Flags* flags, bool* help,
                std::string* error);

// Every flag with its type, default and meaning, one per entry.
std::string FlagsHelp();

}  // namespace bench
}  // namespace shale

#endif  // SHALE_TOOLS_DB_BENCH_FLAGS_H_
