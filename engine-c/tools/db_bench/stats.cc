#include "tools/db_bench/stats.h"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>

namespace shale {
namespace bench {

uint64_t NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void Stats::Start() { start_ = last_op_finish_ = finish_ = NowMicros(); }

void Stats::Stop() {
  finish_ = NowMicros();
  seconds_ = (finish_ - start_) * 1e-6;
}

void Stats::AddMessage(const std::string& msg) {
  if (!message_.empty()) message_ += " ";
  message_ += msg;
}

void Stats::RecordLatency(OpType type) {
  const uint64_t now = NowMicros();
  if (hist_[type] == nullptr) hist_[type] = std::make_unique<Histogram>();
  hist_[type]->Add(now - last_op_finish_);
  last_op_finish_ = now;
}

void Stats::Merge(const Stats& other) {
  if (other.exclude_from_merge_) return;
  for (int t = 0; t < kOpTypes; t++) {
    if (other.hist_[t] == nullptr) continue;
    if (hist_[t] == nullptr) hist_[t] = std::make_unique<Histogram>();
    hist_[t]->Merge(*other.hist_[t]);
  }
  done_ += other.done_;
  bytes_ += other.bytes_;
  seconds_ += other.seconds_;
  if (start_ == 0 || other.start_ < start_) start_ = other.start_;
  finish_ = std::max(finish_, other.finish_);
  // One thread's message stands for all, as in RocksDB's db_bench.
  if (message_.empty()) message_ = other.message_;
}

void Stats::Report(const std::string& name) const {
  const int64_t done = std::max<int64_t>(done_, 1);
  const double elapsed = std::max<uint64_t>(finish_ - start_, 1) * 1e-6;
  std::string extra;
  if (bytes_ > 0) {
    char rate[64];
    snprintf(rate, sizeof(rate), "%6.1f MB/s", (bytes_ / 1048576.0) / elapsed);
    extra = rate;
  }
  if (!message_.empty()) {
    if (!extra.empty()) extra += " ";
    extra += message_;
  }
  fprintf(stdout,
          "%-12s : %11.3f micros/op %ld ops/sec %.3f seconds %" PRId64
          " operations;%s%s\n",
          name.c_str(), seconds_ * 1e6 / done,
          static_cast<long>(done / elapsed), elapsed, done,
          extra.empty() ? "" : " ", extra.c_str());
  static const char* const kNames[kOpTypes] = {"read", "write", "seek"};
  for (int t = 0; t < kOpTypes; t++) {
    if (hist_[t] == nullptr || hist_[t]->count() == 0) continue;
    fprintf(stdout, "Microseconds per %s:\n%s\n", kNames[t],
            hist_[t]->ToString().c_str());
  }
  fflush(stdout);
}

}  // namespace bench
}  // namespace shale
