// The probe side of the cache-line-blocked Bloom filter (its encoding is
// described in table/filter_policy.cc, which builds it), inline: a table
// that holds such a filter parses its metadata once (ParseFilter) and tests
// keys against the view with no call, where the policy's ProbeMayMatch
// costs two virtual calls (through InternalFilterPolicy) and a parse per
// probe, and a point read probes several tables' filters.
//
// DO NOT CHANGE the bits tested without changing the policy's Name():
// filters are stored in SSTs.

#ifndef SHALE_TABLE_CACHE_LINE_BLOOM_H_
#define SHALE_TABLE_CACHE_LINE_BLOOM_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "util/coding.h"
#include "util/slice.h"

namespace shale {
namespace bloom {

constexpr size_t kLineBytes = 64;
constexpr uint32_t kLineBits = kLineBytes * 8;
constexpr size_t kMetadataBytes = 1 + 4;  // num_probes + num_lines
constexpr int kMaxProbes = 30;

// A 64-bit finalizer (the splitmix64/murmur3 shape): every output bit
// depends on every input bit, so 9-bit slices of it are independent probes.
inline uint64_t Mix(uint64_t x) {
  x ^= x >> 31;
  x *= 0x7fb5d329728ea185ull;
  x ^= x >> 27;
  x *= 0x81dadef4bc2dd44dull;
  x ^= x >> 33;
  return x;
}

inline const char* LineFor(uint32_t h, const char* lines, uint32_t num_lines) {
  const uint64_t line = (static_cast<uint64_t>(h) * num_lines) >> 32;
  return lines + line * kLineBytes;
}

// The bits the builder sets, tested in the same order: seven 9-bit slices
// of each Mix, without a division per probe (a negative answer usually
// stops after two or three).
inline bool TestBits(uint32_t h, int num_probes, const char* line) {
  uint64_t x = Mix(h);
  int j = 0;
  for (;;) {
    const int m = std::min(num_probes - j, 7);
    for (int k = 0; k < m; k++) {
      const uint32_t bit = (x >> (9 * k)) & (kLineBits - 1);
      if ((line[bit >> 3] & (1 << (bit & 7))) == 0) return false;
    }
    j += m;
    if (j >= num_probes) return true;
    x = Mix(x + j);
  }
}

// The parsed metadata of a filter.
struct FilterView {
  const char* lines = nullptr;
  uint32_t num_lines = 0;
  int num_probes = 0;
  // false: the filter is malformed or of an unknown shape; callers must
  // answer "may match" for every key.
  bool usable = false;
};

inline FilterView ParseFilter(const Slice& filter) {
  FilterView v;
  if (filter.size() < kMetadataBytes) return v;
  const char* meta = filter.data() + filter.size() - kMetadataBytes;
  v.num_probes = static_cast<uint8_t>(meta[0]);
  v.num_lines = DecodeFixed32(meta + 1);
  if (static_cast<uint64_t>(v.num_lines) * kLineBytes + kMetadataBytes !=
      filter.size()) {
    return v;
  }
  if (v.num_probes < 1 || v.num_probes > kMaxProbes) return v;
  v.lines = filter.data();
  v.usable = true;
  return v;
}

// The line a probe (the policy's PrepareProbe hash) tests, for a usable
// view of at least one line (to prefetch it).
inline const char* ProbeLine(const FilterView& v, uint64_t probe) {
  return LineFor(static_cast<uint32_t>(probe), v.lines, v.num_lines);
}

// As the policy's ProbeMayMatch(probe, filter) for the filter v views.
inline bool ProbeMayMatch(const FilterView& v, uint64_t probe) {
  if (!v.usable) return true;
  if (v.num_lines == 0) return false;
  const uint32_t h = static_cast<uint32_t>(probe);
  return TestBits(h, v.num_probes, LineFor(h, v.lines, v.num_lines));
}

}  // namespace bloom
}  // namespace shale

#endif  // SHALE_TABLE_CACHE_LINE_BLOOM_H_
