// Tests of the version-suffix filter policy: where a versioned key's suffix
// is cut, which keys are left whole, that every version of a key shares its
// filter key, and that the policy's name records the setting.

#include "table/version_suffix_filter.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace shale {
namespace {

// The domain prefix the tests use (a string: "\x03abc" would read as one
// hex escape).
const std::string kUser = "\x03";

// key + a version of n bytes + the suffix length byte (n + 1).
std::string Versioned(const std::string& key, const std::string& version) {
  return key + version + static_cast<char>(version.size() + 1);
}

TEST(VersionSuffixTest, StripsTheSuffixTheLastByteNames) {
  const std::string user = kUser + "abc";
  EXPECT_EQ(user,
            StripVersionSuffix(Versioned(user, "0123"), "\x03").ToString());
  // Empty prefix: every key is versioned.
  EXPECT_EQ("abc", StripVersionSuffix(Versioned("abc", "v"), "").ToString());
  // A suffix that is only the length byte.
  EXPECT_EQ("abc", StripVersionSuffix(Versioned("abc", ""), "").ToString());
  // The whole key after the prefix may be suffix.
  EXPECT_EQ("\x03",
            StripVersionSuffix(Versioned("\x03", "12"), "\x03").ToString());
}

TEST(VersionSuffixTest, LeavesOtherKeysWhole) {
  // Outside the domain.
  const std::string raft = Versioned(std::string(1, '\0') + "raft", "12");
  EXPECT_EQ(raft, StripVersionSuffix(raft, "\x03").ToString());
  // Last byte 0.
  const std::string zero = kUser + "ab" + std::string(1, '\0');
  EXPECT_EQ(zero, StripVersionSuffix(zero, "\x03").ToString());
  // Suffix longer than what follows the prefix.
  const std::string longer = kUser + "ab\x04";
  EXPECT_EQ(longer, StripVersionSuffix(longer, "\x03").ToString());
  // The prefix alone, and the empty key.
  EXPECT_EQ("\x03", StripVersionSuffix("\x03", "\x03").ToString());
  EXPECT_EQ("", StripVersionSuffix("", "").ToString());
}

TEST(VersionSuffixTest, EveryVersionMatchesItsKeysFilter) {
  std::unique_ptr<const FilterPolicy> policy(
      NewVersionSuffixFilterPolicy(NewBloomFilterPolicy(10), "\x03"));
  std::vector<std::string> filter_keys;
  for (int i = 0; i < 100; i++) {
    const std::string key = kUser + "key" + std::to_string(i);
    filter_keys.push_back(
        policy->FilterKey(Versioned(key, "version-1")).ToString());
  }
  std::vector<Slice> slices(filter_keys.begin(), filter_keys.end());
  std::string filter;
  policy->CreateFilter(slices.data(), static_cast<int>(slices.size()), &filter);
  int absent_matches = 0;
  for (int i = 0; i < 100; i++) {
    const std::string key = kUser + "key" + std::to_string(i);
    // Another version, of another length, of a present key: never filtered.
    EXPECT_TRUE(
        policy->KeyMayMatch(policy->FilterKey(Versioned(key, "v2")), filter));
    const std::string absent = kUser + "absent" + std::to_string(i);
    if (policy->KeyMayMatch(policy->FilterKey(Versioned(absent, "v2")),
                            filter)) {
      absent_matches++;
    }
  }
  EXPECT_LT(absent_matches, 10);
}

TEST(VersionSuffixTest, NameRecordsTheDomain) {
  std::unique_ptr<const FilterPolicy> bloom(NewBloomFilterPolicy(10));
  std::unique_ptr<const FilterPolicy> user(
      NewVersionSuffixFilterPolicy(NewBloomFilterPolicy(10), "\x03\xff"));
  std::unique_ptr<const FilterPolicy> all(
      NewVersionSuffixFilterPolicy(NewBloomFilterPolicy(10), ""));
  EXPECT_EQ(std::string(bloom->Name()) + "+vsuffix(03ff)", user->Name());
  EXPECT_EQ(std::string(bloom->Name()) + "+vsuffix()", all->Name());
}

}  // namespace
}  // namespace shale
