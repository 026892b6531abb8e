// Random: a small, fast, seedable pseudo-random generator (xorshift64*),
// for skiplist heights, tests and benchmarks. Not for anything secret.
// Not thread-safe: give each thread its own.

#ifndef SHALE_UTIL_RANDOM_H_
#define SHALE_UTIL_RANDOM_H_

#include <cstdint>

namespace shale {

class Random {
 public:
  explicit Random(uint64_t seed)
      : state_(seed ? seed : 0x9E3779B97F4A7C15ull) {}

  uint64_t Next64() {
    state_ ^= state_ >> 12;
    state_ ^= state_ << 25;
    state_ ^= state_ >> 27;
    return state_ * 0x2545F4914F6CDD1Dull;
  }
  uint32_t Next() { return static_cast<uint32_t>(Next64() >> 32); }

  // Uniform in [0, n). REQUIRES: n > 0
  uint64_t Uniform(uint64_t n) { return Next64() % n; }

  // True with probability 1/n. REQUIRES: n > 0
  bool OneIn(uint64_t n) { return Uniform(n) == 0; }

  // Picks a base uniformly from [0, max_log] and returns a uniform value in
  // [0, 2^base): small numbers are exponentially more likely.
  uint64_t Skewed(int max_log) {
    return Uniform(uint64_t{1} << Uniform(max_log + 1));
  }

 private:
  uint64_t state_;
};

}  // namespace shale

#endif  // SHALE_UTIL_RANDOM_H_
