// Tests of the cache-line-blocked Bloom filter: no false negatives, the
// false-positive rate at several sizes, batched and single probes agreeing,
// and robustness against malformed filters.

#include "table/filter_policy.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "util/coding.h"

namespace shale {

namespace {

std::string Key(uint64_t i, uint64_t salt = 0) {
  std::string k;
  PutFixed64(&k, i);
  PutFixed64(&k, salt);
  return k;
}

std::string BuildFilter(const FilterPolicy& policy,
                        const std::vector<std::string>& keys) {
  std::vector<Slice> slices(keys.begin(), keys.end());
  std::string filter;
  policy.CreateFilter(slices.data(), static_cast<int>(slices.size()), &filter);
  return filter;
}

double FalsePositiveRate(const FilterPolicy& policy, const std::string& filter,
                         int probes) {
  int hits = 0;
  for (int i = 0; i < probes; i++) {
    // Keys from another space: none were added.
    if (policy.KeyMayMatch(Key(i, 1), filter)) hits++;
  }
  return static_cast<double>(hits) / probes;
}

}  // namespace

TEST(BloomTest, EmptyFilterMatchesNothing) {
  std::unique_ptr<const FilterPolicy> policy(NewBloomFilterPolicy(10));
  const std::string filter = BuildFilter(*policy, {});
  EXPECT_FALSE(policy->KeyMayMatch("hello", filter));
  EXPECT_FALSE(policy->KeyMayMatch("", filter));
}

TEST(BloomTest, SmallFilter) {
  std::unique_ptr<const FilterPolicy> policy(NewBloomFilterPolicy(10));
  const std::string filter = BuildFilter(*policy, {"hello", "world"});
  EXPECT_TRUE(policy->KeyMayMatch("hello", filter));
  EXPECT_TRUE(policy->KeyMayMatch("world", filter));
  EXPECT_FALSE(policy->KeyMayMatch("x", filter));
  EXPECT_FALSE(policy->KeyMayMatch("foo", filter));
}

TEST(BloomTest, LayoutIsWholeCacheLines) {
  std::unique_ptr<const FilterPolicy> policy(NewBloomFilterPolicy(10));
  for (int n : {1, 10, 51, 52, 1000, 12345}) {
    std::vector<std::string> keys;
    for (int i = 0; i < n; i++) keys.push_back(Key(i));
    const std::string filter = BuildFilter(*policy, keys);
    ASSERT_GE(filter.size(), 5u);
    const uint32_t lines = DecodeFixed32(filter.data() + filter.size() - 4);
    EXPECT_EQ(lines * 64u + 5u, filter.size());
    // 10 bits per key, rounded up to whole 512-bit lines.
    EXPECT_EQ((n * 10u + 511) / 512, lines);
  }
}

// Every added key matches, at every size; the false-positive rate at 10
// bits/key is about 1% and stays well under 2%.
TEST(BloomTest, NoFalseNegativesAndFalsePositiveRate) {
  std::unique_ptr<const FilterPolicy> policy(NewBloomFilterPolicy(10));
  int mediocre = 0;
  for (int n = 1; n <= 100000; n = (n < 10 ? n + 1 : n * 3)) {
    std::vector<std::string> keys;
    for (int i = 0; i < n; i++) keys.push_back(Key(i));
    const std::string filter = BuildFilter(*policy, keys);
    for (const std::string& k : keys) {
      ASSERT_TRUE(policy->KeyMayMatch(k, filter)) << "false negative, n=" << n;
    }
    const double rate = FalsePositiveRate(*policy, filter, 100000);
    if (n >= 1000) {
      // Large filters: the rate is a property of bits/key alone.
      EXPECT_LT(rate, 0.02) << "n=" << n;
      EXPECT_GT(rate, 0.002) << "n=" << n
                             << " (suspiciously low: is the "
                                "filter bigger than asked?)";
    }
    if (rate > 0.0125) mediocre++;
  }
  // Small filters round up to a whole line and so do better; allow a few
  // sizes a little above 1.25%.
  EXPECT_LE(mediocre, 2);
}

TEST(BloomTest, RateFallsWithBitsPerKey) {
  std::vector<std::string> keys;
  for (int i = 0; i < 50000; i++) keys.push_back(Key(i));
  double previous = 1.0;
  for (int bits : {4, 6, 10, 16, 20}) {
    std::unique_ptr<const FilterPolicy> policy(NewBloomFilterPolicy(bits));
    const std::string filter = BuildFilter(*policy, keys);
    const double rate = FalsePositiveRate(*policy, filter, 200000);
    EXPECT_LT(rate, previous) << bits << " bits/key";
    previous = rate;
  }
  EXPECT_LT(previous, 0.001);  // 20 bits/key
}

TEST(BloomTest, BatchedAgreesWithSingle) {
  std::unique_ptr<const FilterPolicy> policy(NewBloomFilterPolicy(10));
  std::vector<std::string> keys;
  for (int i = 0; i < 5000; i++) keys.push_back(Key(i));
  const std::string filter = BuildFilter(*policy, keys);
  // Probe a mix of present and absent keys, in batches of odd sizes.
  std::vector<std::string> probes;
  for (int i = 0; i < 3000; i++) probes.push_back(Key(i * 3, i % 2));
  std::vector<Slice> slices(probes.begin(), probes.end());
  for (int batch : {1, 2, 15, 16, 17, 100, 3000}) {
    for (size_t base = 0; base < slices.size(); base += batch) {
      const int m =
          static_cast<int>(std::min<size_t>(batch, slices.size() - base));
      std::unique_ptr<bool[]> out(new bool[m]);
      policy->KeysMayMatch(&slices[base], m, filter, out.get());
      for (int i = 0; i < m; i++) {
        ASSERT_EQ(policy->KeyMayMatch(slices[base + i], filter), out[i])
            << "key " << base + i << " batch " << batch;
      }
    }
  }
}

// A lookup hashes its key once and probes every table's filter with the
// hash: that must answer exactly as probing by key, on filters of any size
// (including empty and malformed ones).
TEST(BloomTest, ProbeByHashAgreesWithKey) {
  std::unique_ptr<const FilterPolicy> policy(NewBloomFilterPolicy(10));
  std::vector<std::string> filters = {BuildFilter(*policy, {}), "", "x"};
  for (int n : {1, 100, 5000}) {
    std::vector<std::string> keys;
    for (int i = 0; i < n; i++) keys.push_back(Key(i));
    filters.push_back(BuildFilter(*policy, keys));
  }
  for (int i = 0; i < 3000; i++) {
    const std::string key = Key(i * 3, i % 2);
    uint64_t probe = 0;
    ASSERT_TRUE(policy->PrepareProbe(key, &probe));
    for (const std::string& f : filters) {
      ASSERT_EQ(policy->KeyMayMatch(key, f), policy->ProbeMayMatch(probe, f))
          << "key " << i << " filter of " << f.size() << " bytes";
    }
  }
}

// A damaged or unknown filter must answer "may match" (never hide a key),
// and never read outside its bytes.
TEST(BloomTest, MalformedFilterMatchesEverything) {
  std::unique_ptr<const FilterPolicy> policy(NewBloomFilterPolicy(10));
  std::string filter = BuildFilter(*policy, {"a", "b", "c"});
  std::vector<std::string> bad = {"", "x", filter.substr(0, filter.size() - 1),
                                  filter + "x", filter.substr(1)};
  std::string zero_probes = filter;
  zero_probes[zero_probes.size() - 5] = 0;
  bad.push_back(zero_probes);
  std::string huge_lines = filter;
  EncodeFixed32(huge_lines.data() + huge_lines.size() - 4, 0xffffffff);
  bad.push_back(huge_lines);
  for (const std::string& f : bad) {
    EXPECT_TRUE(policy->KeyMayMatch("zzz", f));
    bool out[2];
    Slice probes[2] = {"zzz", "a"};
    policy->KeysMayMatch(probes, 2, f, out);
    EXPECT_TRUE(out[0]);
    EXPECT_TRUE(out[1]);
  }
}

TEST(BloomTest, NameIsStable) {
  std::unique_ptr<const FilterPolicy> policy(NewBloomFilterPolicy(10));
  // Stored in SSTs: changing it makes every existing filter unusable.
  EXPECT_STREQ("shale.CacheLineBloom.v1", policy->Name());
}

}  // namespace shale
