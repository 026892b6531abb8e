// Tests of the inline skiplist: ordering and seeks against std::set, the
// sequential-insert fast path, and readers running beside the writer.

#include "db/skiplist.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "util/arena.h"
#include "util/coding.h"
#include "util/random.h"

namespace shale {
namespace {

// Keys are 8-byte big-endian numbers stored inline.
struct U64Comparator {
  int operator()(const char* a, const char* b) const {
    const uint64_t x = DecodeBigEndian64(a), y = DecodeBigEndian64(b);
    return x < y ? -1 : (x > y ? 1 : 0);
  }
};
using TestList = InlineSkipList<U64Comparator>;

void Insert(TestList* list, uint64_t k) {
  char* buf = list->AllocateKey(8);
  EncodeBigEndian64(buf, k);
  list->Insert(buf);
}

std::string Key(uint64_t k) {
  std::string s(8, '\0');
  EncodeBigEndian64(&s[0], k);
  return s;
}

uint64_t At(const TestList::Iterator& it) {
  return DecodeBigEndian64(it.key());
}

TEST(SkipListTest, Empty) {
  Arena arena;
  TestList list(U64Comparator(), &arena);
  EXPECT_FALSE(list.Contains(Key(10).data()));
  TestList::Iterator it(&list);
  it.SeekToFirst();
  EXPECT_FALSE(it.Valid());
  it.Seek(Key(100).data());
  EXPECT_FALSE(it.Valid());
  it.SeekForPrev(Key(100).data());
  EXPECT_FALSE(it.Valid());
  it.SeekToLast();
  EXPECT_FALSE(it.Valid());
}

void CheckAgainstModel(const TestList& list, const std::set<uint64_t>& model,
                       uint64_t max_key) {
  for (uint64_t i = 0; i < max_key; i++) {
    ASSERT_EQ(model.count(i) == 1, list.Contains(Key(i).data())) << i;
  }
  TestList::Iterator it(&list);
  it.SeekToFirst();
  for (uint64_t k : model) {
    ASSERT_TRUE(it.Valid());
    ASSERT_EQ(k, At(it));
    it.Next();
  }
  ASSERT_FALSE(it.Valid());
  it.SeekToLast();
  for (auto r = model.rbegin(); r != model.rend(); ++r) {
    ASSERT_TRUE(it.Valid());
    ASSERT_EQ(*r, At(it));
    it.Prev();
  }
  ASSERT_FALSE(it.Valid());
  for (uint64_t i = 0; i < max_key; i++) {
    it.Seek(Key(i).data());
    auto lb = model.lower_bound(i);
    if (lb == model.end()) {
      ASSERT_FALSE(it.Valid());
    } else {
      ASSERT_TRUE(it.Valid());
      ASSERT_EQ(*lb, At(it));
    }
    it.SeekForPrev(Key(i).data());
    auto ub = model.upper_bound(i);
    if (ub == model.begin()) {
      ASSERT_FALSE(it.Valid());
    } else {
      ASSERT_TRUE(it.Valid());
      ASSERT_EQ(*std::prev(ub), At(it));
    }
  }
}

TEST(SkipListTest, RandomInserts) {
  const uint64_t kMax = 5000;
  Random rnd(1000);
  Arena arena;
  TestList list(U64Comparator(), &arena);
  std::set<uint64_t> model;
  for (int i = 0; i < 2000; i++) {
    const uint64_t k = rnd.Uniform(kMax);
    if (model.insert(k).second) Insert(&list, k);
  }
  CheckAgainstModel(list, model, kMax);
}

TEST(SkipListTest, SequentialAndMixedInserts) {
  // Ascending runs use the splice fast path; descending and random inserts
  // between them must leave the splice consistent.
  Arena arena;
  TestList list(U64Comparator(), &arena);
  std::set<uint64_t> model;
  auto add = [&](uint64_t k) {
    if (model.insert(k).second) Insert(&list, k);
  };
  for (uint64_t k = 1000; k < 3000; k += 2) add(k);
  for (uint64_t k = 999; k > 0; k -= 3) add(k);
  Random rnd(7);
  for (int i = 0; i < 1000; i++) add(rnd.Uniform(4000));
  for (uint64_t k = 3001; k < 3500; k++) add(k);
  CheckAgainstModel(list, model, 4000);
}

TEST(SkipListTest, KeysStoredInline) {
  // Keys of many sizes, all allocated inline with their node.
  struct StrComparator {
    int operator()(const char* a, const char* b) const { return strcmp(a, b); }
  };
  Arena arena;
  InlineSkipList<StrComparator> list(StrComparator(), &arena);
  std::set<std::string> model;
  Random rnd(3);
  for (int i = 0; i < 500; i++) {
    std::string k(1 + rnd.Uniform(300), 'a' + rnd.Uniform(26));
    k += std::to_string(i);
    model.insert(k);
    char* buf = list.AllocateKey(k.size() + 1);
    memcpy(buf, k.c_str(), k.size() + 1);
    list.Insert(buf);
  }
  InlineSkipList<StrComparator>::Iterator it(&list);
  it.SeekToFirst();
  for (const std::string& k : model) {
    ASSERT_TRUE(it.Valid());
    ASSERT_EQ(k, std::string(it.key()));
    it.Next();
  }
  EXPECT_FALSE(it.Valid());
}

TEST(SkipListTest, ConcurrentReadersSeeEveryPublishedKey) {
  // One writer inserts a random permutation and publishes how far it got;
  // readers check that every published key is found and that iteration is
  // always ordered. This exercises the acquire/release argument of
  // skiplist.h.
  const int kN = 20000;
  std::vector<uint64_t> keys(kN);
  for (int i = 0; i < kN; i++) keys[i] = i * 7 + 1;
  Random rnd(42);
  for (int i = kN - 1; i > 0; i--) std::swap(keys[i], keys[rnd.Uniform(i + 1)]);

  Arena arena;
  TestList list(U64Comparator(), &arena);
  std::atomic<int> inserted{0};
  std::atomic<bool> failed{false};
  auto reader = [&](uint64_t seed) {
    Random r(seed);
    while (inserted.load(std::memory_order_acquire) < kN && !failed) {
      const int n = inserted.load(std::memory_order_acquire);
      for (int probe = 0; probe < 20 && n > 0; probe++) {
        const uint64_t k = keys[r.Uniform(n)];
        if (!list.Contains(Key(k).data())) failed = true;
      }
      TestList::Iterator it(&list);
      uint64_t prev = 0;
      int steps = 0;
      for (it.SeekToFirst(); it.Valid() && steps < 500; it.Next(), steps++) {
        if (At(it) <= prev) failed = true;
        prev = At(it);
      }
    }
  };
  std::thread r1(reader, 1), r2(reader, 2);
  for (int i = 0; i < kN; i++) {
    Insert(&list, keys[i]);
    inserted.store(i + 1, std::memory_order_release);
  }
  r1.join();
  r2.join();
  EXPECT_FALSE(failed.load());
  TestList::Iterator it(&list);
  int count = 0;
  for (it.SeekToFirst(); it.Valid(); it.Next()) count++;
  EXPECT_EQ(kN, count);
}

}  // namespace
}  // namespace shale
