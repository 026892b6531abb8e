// Tests of the memtable: point lookups at sequence numbers, deletions, range
// tombstones (and their cached fragments), and iteration order.

#include "db/memtable.h"

#include <gtest/gtest.h>

#include <memory>

#include "db/get_context.h"

namespace shale {
namespace {

class MemTableTest : public testing::Test {
 protected:
  MemTableTest() : cmp_(BytewiseComparator()), mem_(new MemTable(cmp_)) {}
  ~MemTableTest() override { mem_->Unref(); }

  // "value", "deleted" or "missing", reading at seq.
  std::string Get(const std::string& key, SequenceNumber seq) {
    std::string value;
    GetContext ctx(&cmp_, key, seq, &value, nullptr, 0);
    LookupKey lk(key, seq);
    const bool decided = mem_->Get(lk, &ctx);
    switch (ctx.state()) {
      case GetContext::kFound:
        EXPECT_TRUE(decided);
        return value;
      case GetContext::kDeleted:
        EXPECT_TRUE(decided);
        return "deleted";
      case GetContext::kNotFound:
        EXPECT_FALSE(decided);
        return "missing";
      case GetContext::kCorrupt:
        return "corrupt";
    }
    return "?";
  }

  InternalKeyComparator cmp_;
  MemTable* mem_;
};

TEST_F(MemTableTest, Empty) {
  EXPECT_TRUE(mem_->empty());
  EXPECT_EQ("missing", Get("a", 100));
  EXPECT_EQ(nullptr, mem_->GetFragmentedTombstones());
}

TEST_F(MemTableTest, VersionsBySequence) {
  mem_->Add(10, kTypeValue, "k", "v10");
  mem_->Add(20, kTypeValue, "k", "v20");
  mem_->Add(30, kTypeDeletion, "k", "");
  mem_->Add(40, kTypeValue, "k", "v40");
  EXPECT_EQ("missing", Get("k", 9));
  EXPECT_EQ("v10", Get("k", 10));
  EXPECT_EQ("v10", Get("k", 19));
  EXPECT_EQ("v20", Get("k", 29));
  EXPECT_EQ("deleted", Get("k", 30));
  EXPECT_EQ("deleted", Get("k", 39));
  EXPECT_EQ("v40", Get("k", 1000));
  EXPECT_EQ("missing", Get("j", 1000));
  EXPECT_EQ("missing", Get("kk", 1000));
  EXPECT_EQ(4u, mem_->num_entries());
  EXPECT_EQ(1u, mem_->num_deletes());
  EXPECT_EQ(10u, mem_->first_sequence());
}

TEST_F(MemTableTest, GetIntoCallerBuffer) {
  mem_->Add(1, kTypeValue, "k", "hello");
  char buf[8];
  GetContext fits(&cmp_, "k", 5, nullptr, buf, sizeof(buf));
  LookupKey lk("k", 5);
  ASSERT_TRUE(mem_->Get(lk, &fits));
  EXPECT_TRUE(fits.value_fits());
  EXPECT_EQ("hello", std::string(buf, fits.value_size()));
  GetContext small(&cmp_, "k", 5, nullptr, buf, 3);
  ASSERT_TRUE(mem_->Get(lk, &small));
  EXPECT_EQ(GetContext::kFound, small.state());
  EXPECT_FALSE(small.value_fits());
  EXPECT_EQ(5u, small.value_size());
}

TEST_F(MemTableTest, RangeTombstones) {
  mem_->Add(10, kTypeValue, "b", "b10");
  mem_->Add(11, kTypeValue, "d", "d11");
  mem_->Add(20, kTypeRangeDeletion, "a", "c");  // deletes b@10, not d
  mem_->Add(30, kTypeValue, "b", "b30");        // newer than the tombstone
  EXPECT_EQ("b10", Get("b", 19));
  EXPECT_EQ("deleted", Get("b", 20));
  EXPECT_EQ("deleted", Get("b", 29));
  EXPECT_EQ("b30", Get("b", 30));
  EXPECT_EQ("d11", Get("d", 100));
  // A covered key with no point entry here is decided: older sources hold
  // only older versions.
  EXPECT_EQ("deleted", Get("a", 25));
  EXPECT_EQ("missing", Get("c", 25));  // end is exclusive
  EXPECT_EQ(1u, mem_->num_range_deletes());
}

TEST_F(MemTableTest, FragmentCacheRebuiltAfterNewTombstones) {
  mem_->Add(5, kTypeValue, "x", "x5");
  mem_->Add(10, kTypeRangeDeletion, "a", "m");
  auto first = mem_->GetFragmentedTombstones();
  ASSERT_NE(nullptr, first);
  EXPECT_EQ(first, mem_->GetFragmentedTombstones());  // cached
  EXPECT_EQ("x5", Get("x", 100));
  mem_->Add(11, kTypeRangeDeletion, "m", "z");
  auto second = mem_->GetFragmentedTombstones();
  EXPECT_NE(first, second);
  EXPECT_EQ(2u, second->num_tombstones());
  EXPECT_EQ("deleted", Get("x", 100));
  EXPECT_EQ("x5", Get("x", 10));
}

TEST_F(MemTableTest, IteratorOrder) {
  mem_->Add(1, kTypeValue, "b", "1");
  mem_->Add(2, kTypeValue, "a", "2");
  mem_->Add(3, kTypeDeletion, "b", "");
  mem_->Add(4, kTypeValue, "c", "4");
  std::unique_ptr<Iterator> it(mem_->NewIterator());
  std::string order;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    ParsedInternalKey k;
    ASSERT_TRUE(ParseInternalKey(it->key(), &k));
    order += k.user_key.ToString() + std::to_string(k.sequence) + " ";
  }
  EXPECT_EQ("a2 b3 b1 c4 ", order);
  // Seek takes an internal key.
  it->Seek(InternalKey("b", 2, kValueTypeForSeek).Encode());
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ("1", it->value().ToString());
  it->Prev();
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(InternalKey("b", 3, kTypeDeletion).Encode(), it->key());
  it->SeekToLast();
  EXPECT_EQ("4", it->value().ToString());
}

TEST_F(MemTableTest, MemoryUsageGrows) {
  std::string value(1000, 'v');
  for (int i = 0; i < 1000; i++) {
    mem_->Add(i + 1, kTypeValue, "key" + std::to_string(i), value);
  }
  // Every byte added is held, plus node overhead.
  EXPECT_GT(mem_->ApproximateMemoryUsage(), 1000u * 1000u);
  EXPECT_LT(mem_->ApproximateMemoryUsage(), 2u * 1000u * 1000u);
}

}  // namespace
}  // namespace shale
