// The cache-line-blocked Bloom filter.
//
// A classic Bloom filter spreads a key's k probes over the whole bit array,
// so a lookup touches k cache lines. Here each key first picks one 64-byte
// line (512 bits) and sets/tests all k bits inside it: a lookup costs one
// cache miss, and a batched lookup can prefetch every key's line before
// testing any. The price is a slightly higher false-positive rate for the
// same bits per key (lines fill unevenly); at 10 bits/key it stays near 1%.
//
//   filter := lines num_probes num_lines
//   lines := char[64 * num_lines]     (bit i of a line is bit (i & 7) of
//                                      byte (i >> 3))
//   num_probes: uint8                 (k)
//   num_lines: fixed32                (0 for a filter over no keys: it
//                                      matches nothing)
//
// For a key with h = Hash(key, kSeed):
//   line = (h * num_lines) >> 32      (high bits of h pick the line)
//   x = Mix(h)                        (64 well-mixed bits)
//   probe j tests bit (x >> 9*(j % 7)) & 511, remixing x every 7 probes.
//
// DO NOT CHANGE any of this without changing the policy's Name(): filters
// are stored in SSTs.

#include "table/filter_policy.h"

#include <algorithm>
#include <cmath>

#include "table/cache_line_bloom.h"
#include "util/coding.h"
#include "util/hash.h"

namespace shale {

void FilterPolicy::KeysMayMatch(const Slice* keys, int n, const Slice& filter,
                                bool* may_match) const {
  for (int i = 0; i < n; i++) may_match[i] = KeyMayMatch(keys[i], filter);
}

void FilterPolicy::ProbesMayMatch(const uint64_t* probes, int n,
                                  const Slice& filter, bool* may_match) const {
  for (int i = 0; i < n; i++) may_match[i] = ProbeMayMatch(probes[i], filter);
}

namespace {

using bloom::FilterView;
using bloom::kLineBits;
using bloom::kLineBytes;
using bloom::LineFor;
using bloom::Mix;
using bloom::ParseFilter;
using bloom::TestBits;

constexpr uint32_t kSeed = 0xbc9f1d34;
// Keys probed together by KeysMayMatch: enough to overlap many cache misses,
// few enough that the hashes and line pointers stay in registers/L1.
constexpr int kBatch = 16;

inline uint32_t KeyHash(const Slice& key) {
  return Hash(key.data(), key.size(), kSeed);
}

inline void SetBits(uint32_t h, int num_probes, char* line) {
  uint64_t x = Mix(h);
  for (int j = 0; j < num_probes; j++) {
    if (j > 0 && j % 7 == 0) x = Mix(x + j);
    const uint32_t bit = (x >> (9 * (j % 7))) & (kLineBits - 1);
    line[bit >> 3] |= static_cast<char>(1 << (bit & 7));
  }
}

class CacheLineBloomPolicy final : public FilterPolicy {
 public:
  explicit CacheLineBloomPolicy(int bits_per_key)
      : bits_per_key_(std::clamp(bits_per_key, 1, 100)),
        num_probes_(ProbesFor(bits_per_key_)) {}

  const char* Name() const override { return "shale.CacheLineBloom.v1"; }

  void CreateFilter(const Slice* keys, int n, std::string* dst) const override {
    uint32_t num_lines = 0;
    if (n > 0) {
      const uint64_t bits = static_cast<uint64_t>(n) * bits_per_key_;
      num_lines = static_cast<uint32_t>(
          std::max<uint64_t>(1, (bits + kLineBits - 1) / kLineBits));
    }
    const size_t start = dst->size();
    dst->resize(start + static_cast<size_t>(num_lines) * kLineBytes, '\0');
    char* lines = dst->data() + start;
    // Each key sets bits in one random line, and a large table's filter
    // (about 1 MiB for a million keys) is far bigger than the caches:
    // one at a time, every key stalled on a miss, and building filters
    // took a third of a compaction's CPU. Hashing a batch first and
    // prefetching its lines lets the misses overlap.
    uint32_t hashes[kBatch];
    char* targets[kBatch];
    for (int base = 0; base < n; base += kBatch) {
      const int m = std::min(kBatch, n - base);
      for (int i = 0; i < m; i++) {
        hashes[i] = KeyHash(keys[base + i]);
        targets[i] = const_cast<char*>(LineFor(hashes[i], lines, num_lines));
        __builtin_prefetch(targets[i], 1);
      }
      for (int i = 0; i < m; i++) SetBits(hashes[i], num_probes_, targets[i]);
    }
    dst->push_back(static_cast<char>(num_probes_));
    PutFixed32(dst, num_lines);
  }

  bool KeyMayMatch(const Slice& key, const Slice& filter) const override {
    return ProbeMayMatch(KeyHash(key), filter);
  }

  bool PrepareProbe(const Slice& key, uint64_t* probe) const override {
    *probe = KeyHash(key);
    return true;
  }

  bool ProbesCacheLineBloom() const override { return true; }

  bool ProbeMayMatch(uint64_t probe, const Slice& filter) const override {
    const FilterView v = ParseFilter(filter);
    if (!v.usable) return true;
    if (v.num_lines == 0) return false;
    const uint32_t h = static_cast<uint32_t>(probe);
    return TestBits(h, v.num_probes, LineFor(h, v.lines, v.num_lines));
  }

  void ProbesMayMatch(const uint64_t* probes, int n, const Slice& filter,
                      bool* may_match) const override {
    const FilterView v = ParseFilter(filter);
    if (!v.usable || v.num_lines == 0) {
      std::fill(may_match, may_match + n, !v.usable);
      return;
    }
    const char* lines[kBatch];
    for (int base = 0; base < n; base += kBatch) {
      const int m = std::min(kBatch, n - base);
      for (int i = 0; i < m; i++) {
        lines[i] = LineFor(static_cast<uint32_t>(probes[base + i]), v.lines,
                           v.num_lines);
        __builtin_prefetch(lines[i]);
      }
      for (int i = 0; i < m; i++) {
        may_match[base + i] = TestBits(static_cast<uint32_t>(probes[base + i]),
                                       v.num_probes, lines[i]);
      }
    }
  }

  void KeysMayMatch(const Slice* keys, int n, const Slice& filter,
                    bool* may_match) const override {
    const FilterView v = ParseFilter(filter);
    if (!v.usable || v.num_lines == 0) {
      std::fill(may_match, may_match + n, !v.usable);
      return;
    }
    uint32_t hashes[kBatch];
    const char* lines[kBatch];
    for (int base = 0; base < n; base += kBatch) {
      const int m = std::min(kBatch, n - base);
      // Hash every key and start loading its line...
      for (int i = 0; i < m; i++) {
        hashes[i] = KeyHash(keys[base + i]);
        lines[i] = LineFor(hashes[i], v.lines, v.num_lines);
        __builtin_prefetch(lines[i]);
      }
      // ...then test them, by now mostly in cache.
      for (int i = 0; i < m; i++) {
        may_match[base + i] = TestBits(hashes[i], v.num_probes, lines[i]);
      }
    }
  }

 private:
  // The probe count that minimizes the false-positive rate. ln(2) * bits per
  // key is the optimum of an unblocked filter; lines fill unevenly, which
  // favors one probe fewer (measured in filter_policy_test.cc).
  static int ProbesFor(int bits_per_key) {
    const int k = static_cast<int>(std::lround(bits_per_key * 0.69)) - 1;
    return std::clamp(k, 1, bloom::kMaxProbes);
  }

  const int bits_per_key_;
  const int num_probes_;
};

}  // namespace

const FilterPolicy* NewBloomFilterPolicy(int bits_per_key) {
  return new CacheLineBloomPolicy(bits_per_key);
}

}  // namespace shale
