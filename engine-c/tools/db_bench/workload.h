// The keys, values and pacing of db_bench's workloads, made the way RocksDB
// 7.8.3's db_bench makes them so both tools store the same bytes:
//
// - Key i: the first min(key_size, 8) bytes are i big-endian, the rest is
//   filled with '0' (so keys sort in numeric order).
// - Values: slices of a 1 MiB buffer built from 100-byte pieces, each a
//   random printable run of compression_ratio * 100 bytes repeated to fill
//   the piece, so snappy shrinks them to about compression_ratio.
// - Duration: stops after max_ops operations or, when max_seconds > 0,
//   after that many seconds (checked every 1000 operations).
//
// Thread safety: KeyMaker, ValueGenerator and Duration belong to one
// thread; RateLimiter is shared and locks.

#ifndef SHALE_TOOLS_DB_BENCH_WORKLOAD_H_
#define SHALE_TOOLS_DB_BENCH_WORKLOAD_H_

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "tools/db_bench/stats.h"
#include "util/random.h"
#include "util/slice.h"

namespace shale {
namespace bench {

class KeyMaker {
 public:
  explicit KeyMaker(int key_size) : buf_(std::max(key_size, 1), '0') {}

  // The key for i; valid until the next call.
  Slice Make(uint64_t i) {
    const int n = std::min<int>(buf_.size(), 8);
    for (int b = 0; b < n; b++) {
      buf_[b] = static_cast<char>((i >> ((n - b - 1) * 8)) & 0xff);
    }
    return Slice(buf_.data(), buf_.size());
  }

 private:
  std::string buf_;
};

class ValueGenerator {
 public:
  ValueGenerator(double compression_ratio, int value_size) {
    Random rnd(301);
    const size_t total = std::max(1 << 20, value_size);
    while (data_.size() < total) {
      const int raw = std::max(1, static_cast<int>(100 * compression_ratio));
      std::string piece;
      for (int i = 0; i < raw; i++) {
        piece.push_back(static_cast<char>(' ' + rnd.Uniform(95)));
      }
      while (piece.size() < 100) piece.append(piece, 0, 100 - piece.size());
      data_ += piece;
    }
  }

  Slice Generate(size_t len) {
    if (pos_ + len > data_.size()) pos_ = 0;
    pos_ += len;
    return Slice(data_.data() + pos_ - len, len);
  }

 private:
  std::string data_;
  size_t pos_ = 0;
};

class Duration {
 public:
  Duration(int max_seconds, int64_t max_ops)
      : max_seconds_(max_seconds), max_ops_(max_ops), start_(NowMicros()) {}

  // Counts increment more operations; true when the run is over.
  bool Done(int64_t increment) {
    if (increment <= 0) increment = 1;
    ops_ += increment;
    if (max_seconds_ > 0) {
      if (ops_ / 1000 != (ops_ - increment) / 1000) {
        return (NowMicros() - start_) / 1000000 >=
               static_cast<uint64_t>(max_seconds_);
      }
      return false;
    }
    return ops_ > max_ops_;
  }

 private:
  const int max_seconds_;
  const int64_t max_ops_;
  const uint64_t start_;
  int64_t ops_ = 0;
};

// Paces writers to a global rate in bytes/s (--benchmark_write_rate_limit):
// each request reserves its bytes on a timeline and sleeps until its turn.
class RateLimiter {
 public:
  explicit RateLimiter(uint64_t bytes_per_second)
      : rate_(bytes_per_second), next_(NowMicros()) {}

  void Request(uint64_t bytes) {
    uint64_t wait_until;
    {
      std::lock_guard<std::mutex> l(mu_);
      const uint64_t now = NowMicros();
      // Idle time does not bank credit beyond 100 ms of writes.
      if (next_ + 100000 < now) next_ = now - 100000;
      wait_until = next_;
      next_ += bytes * 1000000 / rate_;
    }
    const uint64_t now = NowMicros();
    if (wait_until > now) {
      std::this_thread::sleep_for(std::chrono::microseconds(wait_until - now));
    }
  }

 private:
  const uint64_t rate_;
  std::mutex mu_;
  uint64_t next_;
};

}  // namespace bench
}  // namespace shale

#endif  // SHALE_TOOLS_DB_BENCH_WORKLOAD_H_
