// Tests of range-tombstone fragmentation and coverage queries.

#include "db/range_tombstone.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <tuple>

#include "db/memtable.h"
#include "util/random.h"

namespace shale {
namespace {

struct Tomb {
  std::string start, end;
  SequenceNumber seq;
};

class RangeTombstoneTest : public testing::Test {
 protected:
  RangeTombstoneTest() : icmp_(BytewiseComparator()) {}

  // Builds the list through a memtable's tombstone iterator, the way the
  // engine does.
  std::shared_ptr<const FragmentedRangeTombstoneList> Build(
      const std::vector<Tomb>& tombs) {
    MemTable* mem = new MemTable(icmp_);
    for (const Tomb& t : tombs) {
      mem->Add(t.seq, kTypeRangeDeletion, t.start, t.end);
    }
    std::unique_ptr<Iterator> it(mem->NewRangeTombstoneIterator());
    Status s;
    auto list = std::make_shared<const FragmentedRangeTombstoneList>(it.get(),
                                                                     icmp_, &s);
    EXPECT_TRUE(s.ok());
    it.reset();
    mem->Unref();  // the list holds copies
    return list;
  }

  std::string Fragments(const FragmentedRangeTombstoneList& list) {
    std::string r;
    for (const auto& f : list.fragments()) {
      r += "[" + f.start.ToString() + "," + f.end.ToString() + ")";
      for (uint32_t i = f.seq_begin; i < f.seq_end; i++) {
        r += (i == f.seq_begin ? "@" : ",") + std::to_string(list.seq(i));
      }
      r += " ";
    }
    return r;
  }

  InternalKeyComparator icmp_;
};

TEST_F(RangeTombstoneTest, NonOverlapping) {
  auto list = Build({{"a", "c", 5}, {"e", "g", 7}});
  EXPECT_EQ("[a,c)@5 [e,g)@7 ", Fragments(*list));
}

TEST_F(RangeTombstoneTest, OverlapsAreSplit) {
  auto list = Build({{"a", "e", 5}, {"c", "g", 7}, {"b", "d", 3}});
  EXPECT_EQ("[a,b)@5 [b,c)@5,3 [c,d)@7,5,3 [d,e)@7,5 [e,g)@7 ",
            Fragments(*list));
  EXPECT_EQ(3u, list->num_tombstones());
}

TEST_F(RangeTombstoneTest, EmptyRangesDropped) {
  auto list = Build({{"m", "m", 5}, {"z", "a", 6}});
  EXPECT_TRUE(list->empty());
}

TEST_F(RangeTombstoneTest, MaxCoveringSeq) {
  auto list = Build({{"a", "e", 5}, {"c", "g", 7}});
  EXPECT_EQ(0u, list->MaxCoveringSeq("0", 100));
  EXPECT_EQ(5u, list->MaxCoveringSeq("a", 100));
  EXPECT_EQ(7u, list->MaxCoveringSeq("c", 100));
  EXPECT_EQ(5u, list->MaxCoveringSeq("c", 6));  // 7 not visible at 6
  EXPECT_EQ(0u, list->MaxCoveringSeq("c", 4));
  EXPECT_EQ(7u, list->MaxCoveringSeq("f", 100));
  EXPECT_EQ(0u, list->MaxCoveringSeq("g", 100));  // end exclusive
}

TEST_F(RangeTombstoneTest, AgreesWithBruteForce) {
  // Random tombstones over one-letter keys against a direct scan.
  Random rnd(17);
  for (int round = 0; round < 50; round++) {
    std::vector<Tomb> tombs;
    const int n = 1 + rnd.Uniform(12);
    for (int i = 0; i < n; i++) {
      char a = 'a' + rnd.Uniform(20), b = 'a' + rnd.Uniform(20);
      if (a > b) std::swap(a, b);
      tombs.push_back({std::string(1, a), std::string(1, b),
                       static_cast<SequenceNumber>(1 + rnd.Uniform(30))});
    }
    // Sequence numbers are unique per memtable entry key (start, seq).
    std::map<std::pair<std::string, SequenceNumber>, Tomb> unique;
    for (const Tomb& t : tombs) unique[{t.start, t.seq}] = t;
    tombs.clear();
    for (auto& [k, t] : unique) tombs.push_back(t);
    auto list = Build(tombs);
    RangeDelAggregator agg(&icmp_, 20);
    agg.AddTombstones(list);
    for (char c = 'a'; c <= 'u'; c++) {
      const std::string key(1, c);
      for (SequenceNumber read : {5, 15, 20, 40}) {
        SequenceNumber want = 0;
        for (const Tomb& t : tombs) {
          if (t.start <= key && key < t.end && t.seq <= read) {
            want = std::max(want, t.seq);
          }
        }
        ASSERT_EQ(want, list->MaxCoveringSeq(key, read))
            << key << " @" << read << " " << Fragments(*list);
      }
      SequenceNumber want20 = 0;
      for (const Tomb& t : tombs) {
        if (t.start <= key && key < t.end && t.seq <= 20) {
          want20 = std::max(want20, t.seq);
        }
      }
      ASSERT_EQ(want20, agg.MaxCoveringSeq(key));
      ASSERT_EQ(want20 > 3,
                agg.ShouldDelete(ParsedInternalKey(key, 3, kTypeValue)));
    }
  }
}

TEST_F(RangeTombstoneTest, AggregatorAcrossSources) {
  RangeDelAggregator agg(&icmp_, 100);
  EXPECT_TRUE(agg.empty());
  agg.AddTombstones(nullptr);
  agg.AddTombstones(Build({}));
  EXPECT_TRUE(agg.empty());
  agg.AddTombstones(Build({{"a", "m", 10}}));
  agg.AddTombstones(Build({{"k", "z", 20}}));
  EXPECT_FALSE(agg.ShouldDelete(ParsedInternalKey("b", 10, kTypeValue)));
  EXPECT_TRUE(agg.ShouldDelete(ParsedInternalKey("b", 9, kTypeValue)));
  EXPECT_TRUE(agg.ShouldDelete(ParsedInternalKey("l", 19, kTypeValue)));
  EXPECT_FALSE(agg.ShouldDelete(ParsedInternalKey("z", 1, kTypeValue)));
  // Backwards after forwards still finds the right fragments.
  EXPECT_TRUE(agg.ShouldDelete(ParsedInternalKey("a", 1, kTypeValue)));
}

}  // namespace
}  // namespace shale
