#include "tools/db_bench/histogram.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <limits>

namespace shale {
namespace bench {

const std::vector<uint64_t>& Histogram::Limits() {
  static const std::vector<uint64_t> limits = [] {
    std::vector<uint64_t> v = {1, 2};
    double next = 2;
    const double top =
        static_cast<double>(std::numeric_limits<uint64_t>::max());
    while ((next *= 1.5) <= top) {
      uint64_t limit = static_cast<uint64_t>(next);
      uint64_t scale = 1;
      while (limit / 10 > 10) {
        limit /= 10;
        scale *= 10;
      }
      v.push_back(limit * scale);
    }
    return v;
  }();
  return limits;
}

size_t Histogram::BucketFor(uint64_t v) {
  const std::vector<uint64_t>& limits = Limits();
  auto it = std::lower_bound(limits.begin(), limits.end(), v);
  return it == limits.end() ? limits.size() - 1 : it - limits.begin();
}

Histogram::Histogram() : buckets_(Limits().size(), 0) {}

void Histogram::Add(uint64_t micros) {
  buckets_[BucketFor(micros)]++;
  count_++;
  min_ = std::min(min_, micros);
  max_ = std::max(max_, micros);
  const double d = static_cast<double>(micros);
  sum_ += d;
  sum_squares_ += d * d;
}

void Histogram::Merge(const Histogram& other) {
  for (size_t i = 0; i < buckets_.size(); i++) buckets_[i] += other.buckets_[i];
  count_ += other.count_;
  min_ = std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
  sum_ += other.sum_;
  sum_squares_ += other.sum_squares_;
}

double Histogram::Average() const { return count_ == 0 ? 0 : sum_ / count_; }

double Histogram::StandardDeviation() const {
  if (count_ == 0) return 0;
  const double n = static_cast<double>(count_);
  const double variance = (sum_squares_ * n - sum_ * sum_) / (n * n);
  return std::sqrt(std::max(0.0, variance));
}

double Histogram::Percentile(double p) const {
  const std::vector<uint64_t>& limits = Limits();
  const double threshold = count_ * (p / 100.0);
  uint64_t cumulative = 0;
  for (size_t b = 0; b < buckets_.size(); b++) {
    cumulative += buckets_[b];
    if (cumulative >= threshold) {
      const double left = b == 0 ? 0 : static_cast<double>(limits[b - 1]);
      const double right = static_cast<double>(limits[b]);
      const uint64_t left_sum = cumulative - buckets_[b];
      const double pos =
          buckets_[b] == 0 ? 0 : (threshold - left_sum) / buckets_[b];
      double r = left + (right - left) * pos;
      if (count_ > 0) {
        r = std::clamp(r, static_cast<double>(min_), static_cast<double>(max_));
      }
      return r;
    }
  }
  return static_cast<double>(max_);
}

std::string Histogram::ToString() const {
  const std::vector<uint64_t>& limits = Limits();
  std::string r;
  char buf[256];
  snprintf(buf, sizeof(buf), "Count: %" PRIu64 " Average: %.4f  StdDev: %.2f\n",
           count_, Average(), StandardDeviation());
  r += buf;
  snprintf(buf, sizeof(buf),
           "Min: %" PRIu64 "  Median: %.4f  Max: %" PRIu64 "\n",
           count_ == 0 ? 0 : min_, Percentile(50), count_ == 0 ? 0 : max_);
  r += buf;
  snprintf(buf, sizeof(buf),
           "Percentiles: P50: %.2f P75: %.2f P99: %.2f P99.9: %.2f P99.99: "
           "%.2f\n",
           Percentile(50), Percentile(75), Percentile(99), Percentile(99.9),
           Percentile(99.99));
  r += buf;
  r += "------------------------------------------------------\n";
  if (count_ == 0) return r;
  const double mult = 100.0 / count_;
  double cumulative = 0;
  for (size_t b = 0; b < buckets_.size(); b++) {
    if (buckets_[b] == 0) continue;
    cumulative += buckets_[b];
    snprintf(buf, sizeof(buf),
             "%c %7" PRIu64 ", %7" PRIu64 " ] %8" PRIu64 " %7.3f%% %7.3f%% ",
             b == 0 ? '[' : '(', b == 0 ? 0 : limits[b - 1], limits[b],
             buckets_[b], mult * buckets_[b], mult * cumulative);
    r += buf;
    const int marks = static_cast<int>(
        20 * (buckets_[b] / static_cast<double>(count_)) + 0.5);
    r.append(marks, '#');
    r += '\n';
  }
  return r;
}

}  // namespace bench
}  // namespace shale
