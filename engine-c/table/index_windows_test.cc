// Tests of IndexWindows: its seeks land where BlockIter::Seek lands, for
// bytewise and internal keys, with shared prefixes, keys that end inside
// the window, zero and 0xff bytes, and targets before, between, on and
// after the separators.

#include "table/index_windows.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "db/dbformat.h"
#include "table/block.h"
#include "table/block_builder.h"
#include "util/comparator.h"
#include "util/random.h"

namespace shale {

namespace {

std::string RandomSuffix(Random* rnd) {
  static const char kBytes[] = {'\0', '\x01', 'a', 'b', 'z', '\x7f', '\xff'};
  std::string s;
  const int n = static_cast<int>(rnd->Uniform(12));
  for (int i = 0; i < n; i++) s.push_back(kBytes[rnd->Uniform(sizeof(kBytes))]);
  return s;
}

// A key: a shared prefix (most keys) and a random tail.
std::string RandomKey(Random* rnd, const std::string& prefix) {
  if (rnd->OneIn(20)) return RandomSuffix(rnd);  // outside the prefix
  return prefix.substr(0, prefix.size() - rnd->Uniform(2)) + RandomSuffix(rnd);
}

std::string Internal(const std::string& user, SequenceNumber seq) {
  std::string k;
  AppendInternalKey(&k, ParsedInternalKey(user, seq, kTypeValue));
  return k;
}

// Builds a block of keys (sorted by cmp) at restart interval 1, and checks
// a windowed seek against a plain one for every target.
void Check(const Comparator* cmp, std::vector<std::string> keys,
           const std::vector<std::string>& targets, bool expect_windows) {
  std::sort(keys.begin(), keys.end(),
            [&](const std::string& a, const std::string& b) {
              return cmp->Compare(a, b) < 0;
            });
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  BlockBuilder builder(1);
  for (const std::string& k : keys) builder.Add(k, "v");
  const std::string bytes = builder.Finish().ToString();
  BlockContents contents;
  contents.data = Slice(bytes);
  Block block(contents);
  ASSERT_TRUE(block.ok());
  IndexWindows windows;
  windows.Build(block, cmp);
  EXPECT_EQ(expect_windows, !windows.empty());
  BlockIter plain, windowed;
  block.InitIter(cmp, 0, nullptr, 0, &plain);
  block.InitIter(cmp, 0, nullptr, 0, &windowed);
  for (const std::string& t : targets) {
    plain.Seek(t);
    windows.Seek(&windowed, t);
    ASSERT_EQ(plain.Valid(), windowed.Valid());
    if (plain.Valid()) {
      ASSERT_EQ(plain.key().ToString(), windowed.key().ToString());
    }
    ASSERT_TRUE(windowed.status().ok());
  }
}

}  // namespace

TEST(IndexWindowsTest, BytewiseSeeksMatchBlockSeeks) {
  Random rnd(17);
  for (const std::string prefix : {"", "k", "user0000000000", "\xff\xff"}) {
    for (int round = 0; round < 20; round++) {
      std::vector<std::string> keys, targets;
      const int n = 1 + static_cast<int>(rnd.Uniform(200));
      for (int i = 0; i < n; i++) keys.push_back(RandomKey(&rnd, prefix));
      for (const std::string& k : keys) {
        targets.push_back(k);
        targets.push_back(k + '\0');
        targets.push_back(k.substr(0, k.size() / 2));
      }
      for (int i = 0; i < 200; i++) targets.push_back(RandomKey(&rnd, prefix));
      targets.push_back("");
      targets.push_back(std::string(20, '\xff'));
      ASSERT_NO_FATAL_FAILURE(
          Check(BytewiseComparator(), keys, targets, /*expect_windows=*/true));
    }
  }
}

TEST(IndexWindowsTest, InternalSeeksMatchBlockSeeks) {
  InternalKeyComparator icmp(BytewiseComparator());
  Random rnd(29);
  for (const std::string prefix :
       {std::string(), std::string("0000000000"), std::string("\0\0\0", 3)}) {
    for (int round = 0; round < 20; round++) {
      std::vector<std::string> keys, targets;
      const int n = 1 + static_cast<int>(rnd.Uniform(200));
      for (int i = 0; i < n; i++) {
        const std::string user = RandomKey(&rnd, prefix);
        keys.push_back(Internal(user, rnd.Uniform(100)));
      }
      for (int i = 0; i < 300; i++) {
        const std::string user = RandomKey(&rnd, prefix);
        targets.push_back(Internal(user, rnd.Uniform(100)));
        targets.push_back(Internal(user, kMaxSequenceNumber));
        targets.push_back(Internal(user, 0));
      }
      for (const std::string& k : keys) targets.push_back(k);
      ASSERT_NO_FATAL_FAILURE(
          Check(&icmp, keys, targets, /*expect_windows=*/true));
    }
  }
}

TEST(IndexWindowsTest, NoWindowsForWiderRestartIntervals) {
  BlockBuilder builder(16);
  for (int i = 0; i < 100; i++)
    builder.Add("key" + std::to_string(1000 + i), "v");
  const std::string bytes = builder.Finish().ToString();
  BlockContents contents;
  contents.data = Slice(bytes);
  Block block(contents);
  IndexWindows windows;
  windows.Build(block, BytewiseComparator());
  EXPECT_TRUE(windows.empty());
  // Seeks still work (through the block).
  BlockIter it;
  block.InitIter(BytewiseComparator(), 0, nullptr, 0, &it);
  windows.Seek(&it, "key1050");
  ASSERT_TRUE(it.Valid());
  EXPECT_EQ("key1050", it.key().ToString());
}

}  // namespace shale
