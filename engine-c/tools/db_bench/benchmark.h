// Benchmark: runs db_bench's benchmarks against one engine database, in the
// order --benchmarks lists them, as RocksDB 7.8.3's db_bench does:
//
//   fillseq           --writes (default --num) writes, keys 0, 1, 2, ...
//   fillrandom        --writes writes of uniform random keys in [0, num)
//   overwrite         as fillrandom, on the existing database
//   fillsync          --writes synced writes of random keys in [0, num/1000)
//   readrandom        --reads Gets of random keys in [0, num)
//   readseq           --reads entries of one forward scan from the first key
//   readreverse       --reads entries of one backward scan from the last key
//   seekrandom        --reads Seeks (one iterator per thread), each followed
//                     by --seek_nexts Next()
//   readwhilewriting  readrandom on --threads threads plus one writer of
//                     random keys, paced by --benchmark_write_rate_limit;
//                     the writer is not counted
//   multireadrandom   --reads keys, as MultiGets of --batch_size random keys
//   waitforcompaction waits until no flush or compaction is pending
//   stats             prints per-level files, sizes and scores, and the
//                     engine's counters including write amplification
//
// fill* benchmarks (not overwrite) start from an empty database. Each
// thread does the stated number of operations; --duration bounds the
// random ones by time instead.

#ifndef SHALE_TOOLS_DB_BENCH_BENCHMARK_H_
#define SHALE_TOOLS_DB_BENCH_BENCHMARK_H_

#include <cstdint>
#include <memory>
#include <string>

#include "db/db_impl.h"
#include "tools/db_bench/flags.h"
#include "util/statistics.h"

namespace shale {
namespace bench {

struct ThreadState;
class RateLimiter;

class Benchmark {
 public:
  explicit Benchmark(const Flags& flags);
  ~Benchmark();

  // Runs every benchmark; returns a process exit code.
  int Run();

 private:
  using Method = void (Benchmark::*)(ThreadState*);

  Status OpenDB();
  void CloseDB();
  void PrintHeader() const;
  void PrintStatistics() const;
  void RunBenchmark(int threads, const std::string& name, Method method);

  void DoWrite(ThreadState* thread, bool sequential);
  void WriteSeq(ThreadState* thread) { DoWrite(thread, true); }
  void WriteRandom(ThreadState* thread) { DoWrite(thread, false); }
  void ReadRandom(ThreadState* thread);
  void ReadSequential(ThreadState* thread);
  void ReadReverse(ThreadState* thread);
  void SeekRandom(ThreadState* thread);
  void MultiReadRandom(ThreadState* thread);
  void ReadWhileWriting(ThreadState* thread);
  void BackgroundWriter(ThreadState* thread);

  const Flags flags_;
  std::string path_;
  std::unique_ptr<DBImpl> db_;
  // Counters of databases closed earlier in this run (fill* reopen a fresh
  // one), so --statistics covers the whole run.
  uint64_t carried_[kTickerCount] = {};
  std::unique_ptr<RateLimiter> write_limiter_;

  uint64_t seed_ = 0;
  int thread_serial_ = 0;  // distinct seeds for every thread of the run

  // Per benchmark.
  int64_t num_ = 0;
  int64_t reads_ = 0;
  int64_t writes_ = 0;
  int64_t entries_per_batch_ = 1;
  WriteOptions write_options_;
};

}  // namespace bench
}  // namespace shale

#endif  // SHALE_TOOLS_DB_BENCH_BENCHMARK_H_
