// Histogram: latency histogram in microseconds whose buckets, percentiles and
// printed form match RocksDB db_bench's --histogram output, so the two
// tools' blocks can be compared line by line.
//
// Buckets: 1, 2, then each limit is 1.5x the previous (unrounded) limit,
// cut to its two most significant digits (3, 4, 6, 10, 15, 22, 34, ...).
// A value v falls in the first bucket whose limit is >= v. Percentiles are
// interpolated linearly inside the bucket that crosses the threshold and
// clamped to [min, max].
//
// Thread safety: none; each benchmark thread owns one, and Merge combines
// them after the threads have finished.

#ifndef SHALE_TOOLS_DB_BENCH_HISTOGRAM_H_
#define SHALE_TOOLS_DB_BENCH_HISTOGRAM_H_

#include <cstdint>
#include <string>
#include <vector>

namespace shale {
namespace bench {

class Histogram {
 public:
  Histogram();

  void Add(uint64_t micros);
  void Merge(const Histogram& other);

  uint64_t count() const { return count_; }
  double Average() const;
  double StandardDeviation() const;
  double Percentile(double p) const;

  // The block db_bench prints after "Microseconds per <op>:".
  std::string ToString() const;

 private:
  static const std::vector<uint64_t>& Limits();
  static size_t BucketFor(uint64_t v);

  std::vector<uint64_t> buckets_;
  uint64_t count_ = 0;
  uint64_t min_ = UINT64_MAX;
  uint64_t max_ = 0;
  double sum_ = 0;
  double sum_squares_ = 0;
};

}  // namespace bench
}  // namespace shale

#endif  // SHALE_TOOLS_DB_BENCH_HISTOGRAM_H_
