// Stats: one benchmark thread's counts and timings, reported in RocksDB
// db_bench's line format:
//
//   readrandom   :       3.965 micros/op 252117 ops/sec 0.079 seconds 20000
//   operations;   27.9 MB/s (20000 of 20000 found)
//
// (one line). micros/op is the sum of the threads' busy seconds over all
// operations; ops/sec is all operations over the wall time from the first
// thread's start to the last one's finish; MB/s counts key + value bytes.
//
// Thread safety: none; a thread owns its Stats, Merge runs after the
// threads have joined.

#ifndef SHALE_TOOLS_DB_BENCH_STATS_H_
#define SHALE_TOOLS_DB_BENCH_STATS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "tools/db_bench/histogram.h"

namespace shale {
namespace bench {

enum OpType { kRead = 0, kWrite, kSeek, kOpTypes };

// Microseconds on a monotonic clock.
uint64_t NowMicros();

class Stats {
 public:
  explicit Stats(bool histogram) : histogram_(histogram) {}

  void Start();
  void Stop();
  // Records n operations of one type finishing now; with --histogram, the
  // time since the previous one finished is one histogram sample.
  void FinishedOps(int64_t n, OpType type) {
    done_ += n;
    if (histogram_) RecordLatency(type);
  }
  void AddBytes(int64_t n) { bytes_ += n; }
  void AddMessage(const std::string& msg);
  // The readwhilewriting writer's numbers stay out of the report.
  void SetExcludeFromMerge() { exclude_from_merge_ = true; }
  bool excluded() const { return exclude_from_merge_; }

  void Merge(const Stats& other);
  // Prints the result line and, with --histogram, one block per op type.
  void Report(const std::string& name) const;

 private:
  void RecordLatency(OpType type);

  const bool histogram_;
  bool exclude_from_merge_ = false;
  uint64_t start_ = 0;
  uint64_t finish_ = 0;
  double seconds_ = 0;
  int64_t done_ = 0;
  int64_t bytes_ = 0;
  uint64_t last_op_finish_ = 0;
  std::string message_;
  std::unique_ptr<Histogram> hist_[kOpTypes];
};

}  // namespace bench
}  // namespace shale

#endif  // SHALE_TOOLS_DB_BENCH_STATS_H_
