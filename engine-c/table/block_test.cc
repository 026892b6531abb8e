// Tests of BlockBuilder and Block/BlockIter: round trips, seeks and mixed
// direction walks against a std::map, with many restart intervals; global
// sequence numbers; malformed blocks.

#include "table/block.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "db/dbformat.h"
#include "table/block_builder.h"
#include "util/coding.h"
#include "util/comparator.h"
#include "util/random.h"

namespace shale {

namespace {

using Model = std::map<std::string, std::string>;

// Keys with long shared prefixes (so prefix compression matters) and some
// random bytes, values of varied length (some empty, some > 127 bytes so
// that varints take two bytes).
Model RandomModel(Random* rnd, int n) {
  Model m;
  while (static_cast<int>(m.size()) < n) {
    std::string key = "key" + std::to_string(rnd->Uniform(4));
    const int extra = static_cast<int>(rnd->Uniform(20));
    for (int i = 0; i < extra; i++) {
      key.push_back(static_cast<char>('a' + rnd->Uniform(26)));
    }
    if (rnd->OneIn(10)) key.push_back('\xff');
    std::string value(rnd->Skewed(9), 'v');
    if (!value.empty()) value[0] = static_cast<char>(rnd->Uniform(256));
    m[key] = value;
  }
  return m;
}

std::string BuildBlock(const Model& m, int restart_interval) {
  BlockBuilder builder(restart_interval);
  for (const auto& [k, v] : m) builder.Add(k, v);
  return builder.Finish().ToString();
}

// A block over bytes the test owns.
Block MakeBlock(const std::string& bytes) {
  BlockContents contents;
  contents.data = Slice(bytes);
  return Block(contents);
}

// Checks that it is at m's entry pos (or invalid when pos == end).
void ExpectAt(const Model& m, Model::const_iterator pos, const Iterator& it) {
  if (pos == m.end()) {
    ASSERT_FALSE(it.Valid());
    return;
  }
  ASSERT_TRUE(it.Valid());
  ASSERT_EQ(pos->first, it.key().ToString());
  ASSERT_EQ(pos->second, it.value().ToString());
}

}  // namespace

TEST(BlockTest, EmptyBlock) {
  BlockBuilder builder(16);
  EXPECT_TRUE(builder.empty());
  const std::string bytes = builder.Finish().ToString();
  EXPECT_EQ(8u, bytes.size());  // one restart point and the count
  Block block = MakeBlock(bytes);
  ASSERT_TRUE(block.ok());
  std::unique_ptr<Iterator> it(block.NewIterator(BytewiseComparator()));
  it->SeekToFirst();
  EXPECT_FALSE(it->Valid());
  it->SeekToLast();
  EXPECT_FALSE(it->Valid());
  it->Seek("anything");
  EXPECT_FALSE(it->Valid());
  EXPECT_TRUE(it->status().ok());
}

TEST(BlockTest, EncodingMatchesGrammar) {
  BlockBuilder builder(2);
  builder.Add("apple", "1");
  builder.Add("apricot", "22");
  builder.Add("banana", "");
  const std::string bytes = builder.Finish().ToString();
  std::string expected;
  // shared, non_shared, value_length, key_delta, value
  expected += std::string("\x00\x05\x01", 3) + "apple" + "1";
  const uint32_t second = 0;
  (void)second;
  expected += std::string("\x02\x05\x02", 3) + "ricot" + "22";
  const uint32_t restart1 = static_cast<uint32_t>(expected.size());
  expected += std::string("\x00\x06\x00", 3) + "banana";
  PutFixed32(&expected, 0);
  PutFixed32(&expected, restart1);
  PutFixed32(&expected, 2);
  EXPECT_EQ(expected, bytes);
}

TEST(BlockTest, RoundTripAndSeekAllIntervals) {
  Random rnd(301);
  for (int interval : {1, 2, 3, 7, 16, 64, 1000}) {
    SCOPED_TRACE("restart interval " + std::to_string(interval));
    const Model m = RandomModel(&rnd, 500);
    const std::string bytes = BuildBlock(m, interval);
    Block block = MakeBlock(bytes);
    ASSERT_TRUE(block.ok());
    std::unique_ptr<Iterator> it(block.NewIterator(BytewiseComparator()));

    // Forward.
    auto pos = m.begin();
    for (it->SeekToFirst(); it->Valid(); it->Next(), ++pos) {
      ExpectAt(m, pos, *it);
    }
    EXPECT_EQ(m.end(), pos);

    // Backward.
    auto rpos = m.rbegin();
    for (it->SeekToLast(); it->Valid(); it->Prev(), ++rpos) {
      ASSERT_NE(m.rend(), rpos);
      ASSERT_EQ(rpos->first, it->key().ToString());
      ASSERT_EQ(rpos->second, it->value().ToString());
    }
    EXPECT_EQ(m.rend(), rpos);

    // Seek to every key, and to a key just before and after each.
    for (const auto& [k, v] : m) {
      it->Seek(k);
      ExpectAt(m, m.find(k), *it);
      const std::string after = k + '\0';
      it->Seek(after);
      ExpectAt(m, m.lower_bound(after), *it);
      std::string before = k;
      before.back() = static_cast<char>(before.back() - 1);
      it->Seek(before);
      ExpectAt(m, m.lower_bound(before), *it);
    }
    it->Seek("");
    ExpectAt(m, m.begin(), *it);
    it->Seek("\xff\xff\xff\xff");
    ExpectAt(m, m.end(), *it);
    EXPECT_TRUE(it->status().ok());
  }
}

// Random walks mixing Seek, Next and Prev, checked step by step (this also
// exercises the Prev cache and the Seek shortcut from the current entry).
TEST(BlockTest, RandomWalks) {
  Random rnd(7);
  for (int interval : {1, 4, 16}) {
    const Model m = RandomModel(&rnd, 300);
    const std::string bytes = BuildBlock(m, interval);
    Block block = MakeBlock(bytes);
    BlockIter it;
    block.InitIter(BytewiseComparator(), 0, nullptr, 0, &it);
    auto pos = m.end();
    for (int step = 0; step < 20000; step++) {
      const uint64_t op = rnd.Uniform(10);
      if (op == 0 || pos == m.end()) {
        // Seek to a random existing or missing key.
        auto pick = m.begin();
        std::advance(pick, rnd.Uniform(m.size()));
        std::string target = pick->first;
        if (rnd.OneIn(2)) target.push_back('\x01');
        it.Seek(target);
        pos = m.lower_bound(target);
      } else if (op < 6) {
        it.Next();
        ++pos;
      } else {
        if (pos == m.begin()) {
          it.Prev();
          ASSERT_FALSE(it.Valid());
          pos = m.end();
          continue;
        }
        it.Prev();
        --pos;
      }
      ExpectAt(m, pos, it);
    }
  }
}

// Seeks a few entries ahead of the current one (a scan stepping over a
// key's versions), within a restart interval and across one or more:
// each lands where a fresh seek does.
TEST(BlockTest, ShortForwardSeeks) {
  Random rnd(11);
  for (int interval : {1, 2, 16}) {
    const Model m = RandomModel(&rnd, 400);
    const std::string bytes = BuildBlock(m, interval);
    Block block = MakeBlock(bytes);
    BlockIter it;
    block.InitIter(BytewiseComparator(), 0, nullptr, 0, &it);
    it.SeekToFirst();
    auto pos = m.begin();
    while (pos != m.end()) {
      auto ahead = pos;
      const int steps = static_cast<int>(rnd.Uniform(interval * 3 + 2));
      for (int i = 0; i < steps && ahead != m.end(); i++) ++ahead;
      std::string target =
          ahead == m.end() ? std::string("\xff\xff\xff") : ahead->first;
      if (rnd.OneIn(3) && ahead != m.end()) target.push_back('\x01');
      if (rnd.OneIn(4)) target = pos->first;  // the current key itself
      it.Seek(target);
      pos = m.lower_bound(target);
      ExpectAt(m, pos, it);
      if (pos != m.end() && rnd.OneIn(2)) {
        it.Next();
        ++pos;
        ExpectAt(m, pos, it);
      }
    }
  }
}

// NextPrefix from every entry, with every prefix length of its user key,
// against a linear scan: the first later entry whose user key (the key
// without its last 8 bytes) does not start with the prefix. Keys are in
// internal-key order, as in the engine's data blocks: many versions of few
// user keys (long runs to pass over, crossing restart points), some user
// keys prefixes of others.
TEST(BlockTest, NextPrefix) {
  Random rnd(301);
  for (int interval : {1, 2, 3, 16}) {
    for (uint64_t global_seqno : {uint64_t{0}, uint64_t{77}}) {
      // (user key, trailer) -> value, in internal-key order: user keys
      // ascending, trailers descending.
      std::map<std::pair<std::string, uint64_t>, std::string,
               std::function<bool(const std::pair<std::string, uint64_t>&,
                                  const std::pair<std::string, uint64_t>&)>>
          m([](const auto& a, const auto& b) {
            return a.first != b.first ? a.first < b.first : a.second > b.second;
          });
      while (m.size() < 400) {
        std::string user = "u" + std::to_string(rnd.Uniform(12));
        if (rnd.OneIn(3)) user += "/" + std::to_string(rnd.Uniform(3));
        if (rnd.OneIn(20)) user.resize(1);
        m[{user, rnd.Next64()}] = std::string(rnd.Uniform(200), 'v');
      }
      std::vector<std::pair<std::string, std::string>> entries;
      BlockBuilder builder(interval);
      for (const auto& [uk, v] : m) {
        std::string key = uk.first;
        PutFixed64(&key, uk.second);
        builder.Add(key, v);
        entries.emplace_back(key, v);
      }
      const std::string bytes = builder.Finish().ToString();
      Block block = MakeBlock(bytes);
      ASSERT_TRUE(block.ok());
      BlockIter it;
      block.InitIter(BytewiseComparator(), global_seqno, nullptr, 0, &it);
      for (size_t i = 0; i < entries.size(); i++) {
        const std::string& k = entries[i].first;
        const std::string user = k.substr(0, k.size() - 8);
        for (size_t len = 0; len <= user.size(); len++) {
          const std::string prefix = user.substr(0, len);
          it.SeekToFirst();
          for (size_t step = 0; step < i; step++) it.Next();
          ASSERT_TRUE(it.Valid());
          it.NextPrefix(prefix);
          size_t j = i + 1;
          while (j < entries.size() &&
                 UserKeyHasPrefix(entries[j].first, prefix)) {
            j++;
          }
          ASSERT_TRUE(it.status().ok()) << it.status().ToString();
          if (j == entries.size()) {
            ASSERT_FALSE(it.Valid()) << "interval " << interval << " entry "
                                     << i << " prefix " << prefix;
            continue;
          }
          ASSERT_TRUE(it.Valid()) << "interval " << interval << " entry " << i
                                  << " prefix " << prefix;
          std::string want = entries[j].first;
          if (global_seqno != 0) {
            const uint64_t packed =
                DecodeFixed64(want.data() + want.size() - 8);
            EncodeFixed64(want.data() + want.size() - 8,
                          (global_seqno << 8) | (packed & 0xff));
          }
          ASSERT_EQ(want, it.key().ToString());
          ASSERT_EQ(entries[j].second, it.value().ToString());
          // The iterator goes on from there as from a seek.
          it.Next();
          if (j + 1 == entries.size()) {
            ASSERT_FALSE(it.Valid());
          } else {
            ASSERT_TRUE(it.Valid());
            ASSERT_EQ(entries[j + 1].second, it.value().ToString());
          }
        }
      }
    }
  }
}

// Seeks in blocks of internal keys, the scan's shortcuts among them: keys
// whose user keys share long prefixes, are prefixes of one another, end in
// zero or 0xff bytes, and repeat with other sequence numbers; targets on,
// between and around them. Each seek lands where the model says.
TEST(BlockTest, InternalKeySeeksMatchModel) {
  InternalKeyComparator icmp(BytewiseComparator());
  Random rnd(41);
  static const char kBytes[] = {'\0', '\x01', '0', '1', '9', 'a', '\xff'};
  auto user_key = [&] {
    // A big-endian number then a fixed tail (db_bench's shape), or a short
    // random string.
    std::string k;
    if (rnd.OneIn(2)) {
      const uint64_t v = rnd.Uniform(4000);
      for (int b = 7; b >= 0; b--) k.push_back(static_cast<char>(v >> (8 * b)));
      k += std::string(rnd.Uniform(3) * 4, '0');
    } else {
      const int n = static_cast<int>(rnd.Uniform(6));
      for (int i = 0; i < n; i++) k.push_back(kBytes[rnd.Uniform(7)]);
    }
    return k;
  };
  auto internal = [](const std::string& user, SequenceNumber seq) {
    std::string k;
    AppendInternalKey(&k, ParsedInternalKey(user, seq, kTypeValue));
    return k;
  };
  auto less = [&](const std::string& a, const std::string& b) {
    return icmp.Compare(a, b) < 0;
  };
  for (int interval : {1, 2, 5, 16, 64}) {
    for (int round = 0; round < 10; round++) {
      std::vector<std::string> keys;
      const int n = 1 + static_cast<int>(rnd.Uniform(150));
      for (int i = 0; i < n; i++) {
        keys.push_back(internal(user_key(), rnd.Uniform(50)));
      }
      std::sort(keys.begin(), keys.end(), less);
      keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
      BlockBuilder builder(interval);
      for (const std::string& k : keys) builder.Add(k, "v" + k);
      const std::string bytes = builder.Finish().ToString();
      Block block = MakeBlock(bytes);
      ASSERT_TRUE(block.ok());
      BlockIter it;
      block.InitIter(&icmp, 0, nullptr, 0, &it);
      std::vector<std::string> targets = keys;
      for (int i = 0; i < 300; i++) {
        const std::string u = user_key();
        targets.push_back(internal(u, rnd.Uniform(50)));
        targets.push_back(internal(u, kMaxSequenceNumber));
        targets.push_back(internal(u, 0));
      }
      for (const std::string& t : targets) {
        // From a fresh position and from wherever the last seek left it.
        for (bool fresh : {true, false}) {
          if (fresh) block.InitIter(&icmp, 0, nullptr, 0, &it);
          it.Seek(t);
          auto want = std::lower_bound(keys.begin(), keys.end(), t, less);
          if (want == keys.end()) {
            ASSERT_FALSE(it.Valid());
          } else {
            ASSERT_TRUE(it.Valid());
            ASSERT_EQ(*want, it.key().ToString());
            ASSERT_EQ("v" + *want, it.value().ToString());
          }
          ASSERT_TRUE(it.status().ok());
        }
      }
    }
  }
}

TEST(BlockTest, GlobalSeqnoReplacesTrailer) {
  // Internal-key-shaped keys: user key + fixed64(seq << 8 | type).
  BlockBuilder builder(2);
  std::vector<std::string> keys;
  for (int i = 0; i < 10; i++) {
    std::string k = "user" + std::to_string(i);
    PutFixed64(&k, (uint64_t{0} << 8) | (i % 2));  // seq 0, type 0 or 1
    keys.push_back(k);
    builder.Add(k, "v" + std::to_string(i));
  }
  const std::string bytes = builder.Finish().ToString();
  Block block = MakeBlock(bytes);
  const uint64_t kSeq = 12345;
  std::unique_ptr<Iterator> it(block.NewIterator(BytewiseComparator(), kSeq));
  int i = 0;
  for (it->SeekToFirst(); it->Valid(); it->Next(), i++) {
    Slice k = it->key();
    ASSERT_EQ(keys[i].size(), k.size());
    EXPECT_EQ(keys[i].substr(0, keys[i].size() - 8),
              k.ToString().substr(0, k.size() - 8));
    const uint64_t packed = DecodeFixed64(k.data() + k.size() - 8);
    EXPECT_EQ(kSeq, packed >> 8);
    EXPECT_EQ(static_cast<uint64_t>(i % 2), packed & 0xff);
  }
  EXPECT_EQ(10, i);
  // Walking back gives the same rewritten keys.
  i = 9;
  for (it->SeekToLast(); it->Valid(); it->Prev(), i--) {
    const uint64_t packed =
        DecodeFixed64(it->key().data() + it->key().size() - 8);
    EXPECT_EQ(kSeq, packed >> 8);
  }
  EXPECT_EQ(-1, i);

  // A key too short to carry a trailer is a corruption, not a crash.
  BlockBuilder short_builder(16);
  short_builder.Add("abc", "v");
  const std::string short_bytes = short_builder.Finish().ToString();
  Block short_block = MakeBlock(short_bytes);
  std::unique_ptr<Iterator> bad(
      short_block.NewIterator(BytewiseComparator(), kSeq));
  bad->SeekToFirst();
  EXPECT_FALSE(bad->Valid());
  EXPECT_TRUE(bad->status().IsCorruption());
}

TEST(BlockTest, MalformedRestartArray) {
  const std::string file = "test.sst";
  for (const std::string& bytes :
       {std::string(), std::string("\x01\x00", 2),
        std::string("\x00\x00\x00\x00", 4),     // zero restarts
        std::string("\x05\x00\x00\x00", 4)}) {  // more restarts than fit
    Block block = MakeBlock(bytes);
    EXPECT_FALSE(block.ok());
    std::unique_ptr<Iterator> it(
        block.NewIterator(BytewiseComparator(), 0, &file, 77));
    it->SeekToFirst();
    EXPECT_FALSE(it->Valid());
    EXPECT_TRUE(it->status().IsCorruption());
    EXPECT_NE(std::string::npos, it->status().ToString().find("test.sst"));
    EXPECT_NE(std::string::npos, it->status().ToString().find("offset 77"));
  }
}

// Flipping bytes anywhere in a block must never crash or read out of
// bounds (run under ASAN to be sure); it may only yield Corruption or
// different (unchecked) bytes.
TEST(BlockTest, CorruptBytesNeverCrash) {
  Random rnd(99);
  const Model m = RandomModel(&rnd, 200);
  const std::string good = BuildBlock(m, 16);
  const std::string file = "x.sst";
  int corruptions = 0;
  for (int trial = 0; trial < 3000; trial++) {
    std::string bytes = good;
    const int flips = 1 + static_cast<int>(rnd.Uniform(4));
    for (int f = 0; f < flips; f++) {
      bytes[rnd.Uniform(bytes.size())] ^=
          static_cast<char>(1 + rnd.Uniform(255));
    }
    Block block = MakeBlock(bytes);
    std::unique_ptr<Iterator> it(
        block.NewIterator(BytewiseComparator(), 0, &file, 0));
    int steps = 0;
    for (it->SeekToFirst(); it->Valid() && steps < 1000; it->Next()) steps++;
    for (it->SeekToLast(); it->Valid() && steps < 2000; it->Prev()) steps++;
    it->Seek("key2m");
    if (it->Valid()) it->Prev();
    if (!it->status().ok()) {
      corruptions++;
      EXPECT_TRUE(it->status().IsCorruption()) << it->status().ToString();
    }
  }
  EXPECT_GT(corruptions, 0);
}

}  // namespace shale
