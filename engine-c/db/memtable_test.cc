// Tests of the memtable: point lookups at sequence numbers, deletions, range
// tombstones (and their cached fragments), and iteration order.

#include "db/memtable.h"

#include <gtest/gtest.h>

#include <memory>

#include "db/get_context.h"
#include "util/coding.h"

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

// A versioned key under the prefix "v": the key, then a 9-byte version
// suffix whose last byte is its length (table/version_suffix_filter.h).
std::string VersionedKey(const std::string& key, uint64_t version) {
  std::string k = "v" + key;
  PutFixed64(&k, version);
  k.push_back(9);
  return k;
}

TEST(MemTableFilterTest, HoldsTheUnversionedKeysOfPointEntries) {
  InternalKeyComparator cmp(BytewiseComparator());
  const std::string prefix = "v";
  MemTable* mem = new MemTable(cmp, 1, 0, 1 << 20, &prefix);
  mem->Add(1, kTypeValue, VersionedKey("put", 7), "x");
  mem->Add(2, kTypeDeletion, VersionedKey("deleted", 7), "");
  mem->Add(3, kTypeRangeDeletion, VersionedKey("range", 9),
           VersionedKey("range", 0));
  mem->Add(4, kTypeValue, "unversioned", "x");  // outside the prefix
  EXPECT_TRUE(mem->MayHoldUnversioned("vput"));
  EXPECT_TRUE(mem->MayHoldUnversioned("vdeleted"));
  // Any version of the key answers the read: the filter holds the key
  // without its version.
  EXPECT_FALSE(mem->MayHoldUnversioned(VersionedKey("put", 7)));
  // Range tombstones only hide entries; a read with nothing found needs
  // none of them.
  EXPECT_FALSE(mem->MayHoldUnversioned("vrange"));
  EXPECT_FALSE(mem->MayHoldUnversioned("vabsent"));
  EXPECT_FALSE(mem->MayHoldUnversioned("unversioned"));
  EXPECT_GE(mem->ApproximateMemoryUsage(), (1u << 20) / 64);
  mem->Unref();
}

TEST(MemTableFilterTest, FewFalsePositives) {
  InternalKeyComparator cmp(BytewiseComparator());
  const std::string prefix = "v";
  // 16 KiB of filter (1/64 of the buffer) for 10,000 keys: 13 bits a key.
  MemTable* mem = new MemTable(cmp, 1, 0, 1 << 20, &prefix);
  for (int i = 0; i < 10000; i++) {
    mem->Add(i + 1, kTypeValue, VersionedKey("k" + std::to_string(i), 5), "");
  }
  for (int i = 0; i < 10000; i++) {
    ASSERT_TRUE(mem->MayHoldUnversioned("vk" + std::to_string(i))) << i;
  }
  int positives = 0;
  for (int i = 0; i < 100000; i++) {
    positives += mem->MayHoldUnversioned("vabsent" + std::to_string(i));
  }
  EXPECT_LT(positives, 1000);  // under 1%
  mem->Unref();
}

TEST(MemTableFilterTest, NoFilterWithoutVersionedKeys) {
  InternalKeyComparator cmp(BytewiseComparator());
  MemTable* mem = new MemTable(cmp);
  EXPECT_TRUE(mem->MayHoldUnversioned("vabsent"));
  mem->Unref();
}

}  // namespace
}  // namespace shale
