// Tests of the compaction picker's choices and of where compaction outputs
// are cut, on file sets written straight into a VersionSet (real MANIFEST,
// no data files: the picker looks at file metadata only).

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "db/compaction.h"
#include "db/table_cache.h"
#include "db/version_edit.h"
#include "db/version_set.h"
#include "table/options.h"
#include "util/comparator.h"
#include "util/env.h"
#include "util/mutex.h"
#include "util/testutil.h"

namespace shale {
namespace {

constexpr uint64_t kMiB = 1 << 20;

class CompactionPickerTest : public testing::Test {
 protected:
  CompactionPickerTest()
      : dbname_(test::TempDir("compaction_picker_test")),
        icmp_(BytewiseComparator()) {
    options_.env = Env::Default();
    options_.target_file_size_base = 1 * kMiB;
    options_.max_bytes_for_level_base = 2 * kMiB;
    options_.max_bytes_for_level_multiplier = 10;
    options_.level0_file_num_compaction_trigger = 4;
    options_.level0_slowdown_writes_trigger = 20;
    options_.level0_stop_writes_trigger = 36;
    table_options_.comparator = &icmp_;
    table_cache_ = std::make_unique<TableCache>(dbname_, options_.env,
                                                table_options_, -1, false);
    vset_ = std::make_unique<VersionSet>(dbname_, &options_, options_.env,
                                         table_cache_.get(), &icmp_, &mu_);
    EXPECT_TRUE(vset_->CreateNew().ok());
  }
  ~CompactionPickerTest() override {
    for (Compaction* c : picked_) {
      c->MarkFilesBeingCompacted(false);
      delete c;
    }
    vset_.reset();
    test::RemoveDirRecursively(dbname_);
  }

  // A file of size bytes holding user keys [smallest, largest] at level;
  // returns its number.
  uint64_t Add(int level, const std::string& smallest,
               const std::string& largest, uint64_t size) {
    FileMetaData f;
    f.number = vset_->NewFileNumber();
    f.file_size = size;
    const SequenceNumber seq = ++seq_;
    f.smallest = InternalKey(smallest, seq, kTypeValue);
    f.largest = InternalKey(largest, seq, kTypeValue);
    f.smallest_seqno = f.largest_seqno = seq;
    f.num_entries = 1;
    edit_.AddFile(level, f);
    return f.number;
  }

  // Installs the files added since the last Apply.
  void Apply() {
    MutexLock l(&mu_);
    edit_.SetLastSequence(seq_);
    ASSERT_TRUE(vset_->LogAndApply(&edit_).ok());
    edit_ = VersionEdit();
  }

  CompactionPicker Picker() const { return CompactionPicker(options_, &icmp_); }

  // The picker's next compaction (kept until the test ends), or nullptr.
  Compaction* Pick(bool flush_pending = false) {
    MutexLock l(&mu_);
    Compaction* c = Picker().Pick(vset_->current(), running_, flush_pending);
    if (c != nullptr) picked_.push_back(c);
    return c;
  }

  // A manual compaction of all of level into level + 1.
  Compaction* Manual(int level) {
    MutexLock l(&mu_);
    bool busy = false;
    Compaction* c = Picker().PickManual(vset_->current(), level, nullptr,
                                        nullptr, false, running_, &busy);
    if (c != nullptr) picked_.push_back(c);
    return c;
  }

  // Carries out c, a trivial move picked by Pick, as RunCompaction would.
  void ApplyMove(Compaction* c) {
    ASSERT_TRUE(c->IsTrivialMove());
    for (const FileMetaData* f : c->inputs(0)) {
      edit_.DeleteFile(c->level(), f->number);
      edit_.AddFile(c->output_level(), *f);
    }
    c->MarkFilesBeingCompacted(false);
    picked_.erase(std::find(picked_.begin(), picked_.end(), c));
    delete c;
    Apply();
  }

  static std::vector<uint64_t> Numbers(const std::vector<FileMetaData*>& v) {
    std::vector<uint64_t> r;
    for (const FileMetaData* f : v) r.push_back(f->number);
    return r;
  }

  // The internal key a compaction job would pass for user key k.
  // Its sequence number is above the files' below, as new data's is.
  static std::string Key(const std::string& k) {
    return InternalKey(k, 1000, kTypeValue).Encode().ToString();
  }

  const std::string dbname_;
  InternalKeyComparator icmp_;
  Options options_;
  TableOptions table_options_;
  std::unique_ptr<TableCache> table_cache_;
  Mutex mu_;
  std::unique_ptr<VersionSet> vset_;
  VersionEdit edit_;
  SequenceNumber seq_ = 0;
  std::vector<Compaction*> running_;
  std::vector<Compaction*> picked_;
};

TEST_F(CompactionPickerTest, NothingToDoBelowTheTriggers) {
  Add(0, "a", "z", kMiB);
  Add(1, "a", "m", kMiB);
  Apply();
  EXPECT_EQ(nullptr, Pick());
}

TEST_F(CompactionPickerTest, LevelFileWithSmallestOverlapRatioGoes) {
  // L1 is 3 MiB against a 2 MiB target. Per byte of its own, the middle
  // file rewrites the fewest L2 bytes.
  Add(1, "a", "c", kMiB);
  const uint64_t middle = Add(1, "d", "f", kMiB);
  Add(1, "g", "i", kMiB);
  Add(2, "a", "c", 3 * kMiB);
  const uint64_t under_middle = Add(2, "d", "e", kMiB / 2);
  Add(2, "g", "i", 2 * kMiB);
  Apply();
  Compaction* c = Pick();
  ASSERT_NE(nullptr, c);
  EXPECT_EQ(1, c->level());
  EXPECT_EQ(2, c->output_level());
  EXPECT_EQ(std::vector<uint64_t>{middle}, Numbers(c->inputs(0)));
  EXPECT_EQ(std::vector<uint64_t>{under_middle}, Numbers(c->inputs(1)));
  EXPECT_FALSE(c->IsTrivialMove());
}

TEST_F(CompactionPickerTest, NeighboursInsideTheNextLevelRangeRideAlong) {
  // "b-c" has the smallest ratio; the L2 file under it spans a-h, which
  // also holds "d-e" and "f-g" whole, so they join at no cost below. "h-k"
  // reaches past h (it would add the second L2 file) and stays.
  const uint64_t first = Add(1, "b", "c", kMiB);
  const uint64_t second = Add(1, "d", "e", kMiB / 4);
  const uint64_t third = Add(1, "f", "g", kMiB / 2);
  Add(1, "h", "k", kMiB);
  const uint64_t below = Add(2, "a", "h", kMiB);
  Add(2, "j", "z", 8 * kMiB);
  Apply();
  Compaction* c = Pick();
  ASSERT_NE(nullptr, c);
  EXPECT_EQ(1, c->level());
  EXPECT_EQ((std::vector<uint64_t>{first, second, third}),
            Numbers(c->inputs(0)));
  EXPECT_EQ(std::vector<uint64_t>{below}, Numbers(c->inputs(1)));
  for (const FileMetaData* f : c->inputs(0)) EXPECT_TRUE(f->being_compacted);
  // What L1 has left outside the compaction is under its target.
  EXPECT_EQ(nullptr, Pick());
}

TEST_F(CompactionPickerTest, TrivialMoveGoesBeforeAnL0Compaction) {
  // L0 is at twice its trigger (score 2), L1 just over its target (score
  // 1.5): by score L0 would go first and rewrite all of L1. A file of L1
  // with nothing under it moves down first, for free.
  for (int i = 0; i < 8; i++) Add(0, "a", "z", kMiB / 4);
  Add(1, "a", "f", 2 * kMiB);
  const uint64_t movable = Add(1, "p", "t", kMiB);
  Add(2, "a", "f", 4 * kMiB);
  Apply();
  Compaction* c = Pick();
  ASSERT_NE(nullptr, c);
  EXPECT_EQ(1, c->level());
  EXPECT_TRUE(c->IsTrivialMove());
  EXPECT_EQ(std::vector<uint64_t>{movable}, Numbers(c->inputs(0)));
  ApplyMove(c);
  // Then L0, whose compaction now reads one L1 file, not two.
  Compaction* l0 = Pick();
  ASSERT_NE(nullptr, l0);
  EXPECT_EQ(0, l0->level());
  EXPECT_EQ(8u, l0->inputs(0).size());
  EXPECT_EQ(1u, l0->inputs(1).size());
}

TEST_F(CompactionPickerTest, FreeMovesBeforeAnL0CompactionThatOverfillsL1) {
  // L1 (1.5 MiB) is under its 2 MiB target, but the L0 compaction due
  // (1 MiB) will take it over: the L1 file with nothing under it in L2
  // moves down first instead of being rewritten and moved right after.
  for (int i = 0; i < 4; i++) Add(0, "a", "z", kMiB / 4);
  Add(1, "a", "f", kMiB);
  const uint64_t movable = Add(1, "p", "t", kMiB / 2);
  Add(2, "a", "f", 4 * kMiB);
  Apply();
  Compaction* c = Pick();
  ASSERT_NE(nullptr, c);
  EXPECT_EQ(1, c->level());
  EXPECT_TRUE(c->IsTrivialMove());
  EXPECT_EQ(std::vector<uint64_t>{movable}, Numbers(c->inputs(0)));
  ApplyMove(c);
  Compaction* l0 = Pick();
  ASSERT_NE(nullptr, l0);
  EXPECT_EQ(0, l0->level());
  EXPECT_EQ(1u, l0->inputs(1).size());
}

TEST_F(CompactionPickerTest, NoEarlyMoveWhenL1StaysWithinItsTarget) {
  // L1 + L0 = 1.5 MiB, under the 2 MiB target: L1 stays as it is (moving
  // its data down early would only make L2 denser sooner).
  for (int i = 0; i < 4; i++) Add(0, "a", "z", kMiB / 8);
  Add(1, "a", "f", kMiB / 2);
  Add(1, "p", "t", kMiB / 2);
  Add(2, "a", "f", 4 * kMiB);
  Apply();
  Compaction* c = Pick();
  ASSERT_NE(nullptr, c);
  EXPECT_EQ(0, c->level());
  EXPECT_EQ(2u, c->inputs(1).size());
  // Nor is part of it written to L2 directly.
  EXPECT_FALSE(c->has_deep_range());
  EXPECT_TRUE(c->inputs(2).empty());
}

TEST_F(CompactionPickerTest, DeepRangeWhenAnL0CompactionOverfillsL1) {
  // L0 (1 MiB) into L1 (1.5 MiB) makes 2.5 MiB against a 2 MiB target.
  // Every L1 file has L2 data under it, so none moves for free first.
  // With L0's bytes spread over it, any one L1 file holds the 0.5 MiB
  // excess; the middle one rewrites the fewest L2 bytes per byte, so its
  // range goes straight to L2, with the L2 file under it.
  for (int i = 0; i < 4; i++) Add(0, "a", "z", kMiB / 4);
  const uint64_t l1a = Add(1, "a", "c", kMiB / 2);
  const uint64_t l1b = Add(1, "d", "f", kMiB / 2);
  const uint64_t l1c = Add(1, "g", "i", kMiB / 2);
  Add(2, "a", "c", 3 * kMiB);
  const uint64_t under_middle = Add(2, "d", "e", kMiB / 2);
  Add(2, "g", "i", 2 * kMiB);
  Apply();
  Compaction* c = Pick();
  ASSERT_NE(nullptr, c);
  EXPECT_EQ(0, c->level());
  EXPECT_EQ(1, c->output_level());
  EXPECT_EQ((std::vector<uint64_t>{l1a, l1b, l1c}), Numbers(c->inputs(1)));
  ASSERT_TRUE(c->has_deep_range());
  EXPECT_EQ("d", c->deep_lower());
  EXPECT_EQ(std::string("f\0", 2), c->deep_upper());
  EXPECT_EQ(std::vector<uint64_t>{under_middle}, Numbers(c->inputs(2)));
  for (const FileMetaData* f : c->inputs(2)) EXPECT_TRUE(f->being_compacted);
  EXPECT_FALSE(c->IsTrivialMove());
  // L2 holds data under both kinds of output; L3 holds none.
  EXPECT_FALSE(c->bottommost());
  EXPECT_TRUE(c->deep_bottommost());
  EXPECT_NE(std::string::npos, c->DebugString().find("deep to L2"));
}

TEST_F(CompactionPickerTest, DeepRangeCoversItsL2FilesWhole) {
  // The L2 file under "d-f" starts at "cc", before it: the range widens
  // to "cc", so the L2 outputs cover that file's keys and the L2 files
  // left in place stay disjoint from them. ("c" sorts before "cc", so the
  // L1 file "a-c" stays out of the range.)
  for (int i = 0; i < 4; i++) Add(0, "a", "z", kMiB / 4);
  Add(1, "a", "c", kMiB / 2);
  Add(1, "d", "f", kMiB / 2);
  Add(1, "g", "i", kMiB / 2);
  Add(2, "a", "b", 3 * kMiB);
  const uint64_t under = Add(2, "cc", "e", kMiB / 4);
  Add(2, "h", "i", 2 * kMiB);
  Apply();
  Compaction* c = Pick();
  ASSERT_NE(nullptr, c);
  ASSERT_TRUE(c->has_deep_range());
  EXPECT_EQ("cc", c->deep_lower());
  EXPECT_EQ(std::string("f\0", 2), c->deep_upper());
  EXPECT_EQ(std::vector<uint64_t>{under}, Numbers(c->inputs(2)));
}

TEST_F(CompactionPickerTest, DeepRangeNeverMeetsAnL1FileLeftInPlace) {
  // L0 spans only a-f, so the L1 file "g-i" is not an input. Under "d-f"
  // lies an L2 file reaching to "h": the range would widen into "g-i",
  // whose data is older than the L0 data going to L2 there, and is
  // refused. "a-c" goes instead, though it rewrites more L2 bytes.
  for (int i = 0; i < 4; i++) Add(0, "a", "f", kMiB / 4);
  const uint64_t first = Add(1, "a", "c", kMiB / 2);
  const uint64_t second = Add(1, "d", "f", kMiB / 2);
  Add(1, "g", "i", kMiB / 2);
  const uint64_t under_first = Add(2, "a", "b", 3 * kMiB);
  Add(2, "e", "h", kMiB / 4);
  Apply();
  Compaction* c = Pick();
  ASSERT_NE(nullptr, c);
  EXPECT_EQ(0, c->level());
  EXPECT_EQ((std::vector<uint64_t>{first, second}), Numbers(c->inputs(1)));
  ASSERT_TRUE(c->has_deep_range());
  EXPECT_EQ("a", c->deep_lower());
  EXPECT_EQ(std::string("c\0", 2), c->deep_upper());
  EXPECT_EQ(std::vector<uint64_t>{under_first}, Numbers(c->inputs(2)));
}

TEST_F(CompactionPickerTest, DeepRangeTakesAsManyL1FilesAsTheExcessNeeds) {
  // L0 (2 MiB) into L1 (1 MiB in four files) makes 3 MiB: 1 MiB over the
  // target. Scaled by L0's bytes (3x), one L1 file holds 0.75 MiB: two
  // neighbours are needed. Of the runs of two, "g-i" + "j-l" has the
  // least L2 under it.
  for (int i = 0; i < 8; i++) Add(0, "a", "z", kMiB / 4);
  Add(1, "a", "c", kMiB / 4);
  Add(1, "d", "f", kMiB / 4);
  Add(1, "g", "i", kMiB / 4);
  Add(1, "j", "l", kMiB / 4);
  Add(2, "a", "c", 2 * kMiB);
  Add(2, "d", "f", kMiB);
  const uint64_t under_third = Add(2, "g", "i", kMiB / 4);
  const uint64_t under_fourth = Add(2, "j", "l", kMiB / 4);
  Apply();
  Compaction* c = Pick();
  ASSERT_NE(nullptr, c);
  ASSERT_TRUE(c->has_deep_range());
  EXPECT_EQ("g", c->deep_lower());
  EXPECT_EQ(std::string("l\0", 2), c->deep_upper());
  EXPECT_EQ((std::vector<uint64_t>{under_third, under_fourth}),
            Numbers(c->inputs(2)));
}

TEST_F(CompactionPickerTest, NoDeepRangeOverL2FilesBeingCompacted) {
  // Same shape as DeepRangeWhenAnL0CompactionOverfillsL1, but all of L2 is
  // being compacted into L3: the L0 compaction writes L1 only.
  for (int i = 0; i < 4; i++) Add(0, "a", "z", kMiB / 4);
  Add(1, "a", "c", kMiB / 2);
  Add(1, "d", "f", kMiB / 2);
  Add(1, "g", "i", kMiB / 2);
  Add(2, "a", "c", 3 * kMiB);
  Add(2, "d", "e", kMiB / 2);
  Add(2, "g", "i", 2 * kMiB);
  Apply();
  Compaction* l2 = Manual(2);
  ASSERT_NE(nullptr, l2);
  running_.push_back(l2);
  Compaction* c = Pick();
  ASSERT_NE(nullptr, c);
  EXPECT_EQ(0, c->level());
  EXPECT_FALSE(c->has_deep_range());
  EXPECT_TRUE(c->inputs(2).empty());
}

TEST_F(CompactionPickerTest, DeepOutputsAreCutOnTheirOwnGrandparents) {
  // The deep range's outputs (into L2) line up with L3 files, the L1
  // outputs with L2 files; each kind is followed on its own.
  for (int i = 0; i < 4; i++) Add(0, "a", "z", kMiB / 4);
  Add(1, "a", "c", kMiB / 2);
  Add(1, "d", "f", kMiB / 2);
  Add(1, "g", "i", kMiB / 2);
  Add(2, "a", "c", 3 * kMiB);
  Add(2, "d", "d", kMiB / 2);
  Add(2, "g", "i", 2 * kMiB);
  Add(3, "a", "dd", kMiB);
  Add(3, "e", "z", kMiB);
  Apply();
  Compaction* c = Pick();
  ASSERT_NE(nullptr, c);
  ASSERT_TRUE(c->has_deep_range());
  ASSERT_EQ("d", c->deep_lower());
  EXPECT_FALSE(c->deep_bottommost());
  const uint64_t target = c->target_output_file_size();
  // An L1 output over "a-c" (inside L2's "a-c") is not cut.
  EXPECT_FALSE(c->ShouldStopBefore(Key("b"), true, target + 1));
  // The deep output starts: past L3's "a-dd" at "e" is a boundary.
  EXPECT_FALSE(c->ShouldStopBefore(Key("d"), false, 0, /*deep=*/true));
  EXPECT_TRUE(c->ShouldStopBefore(Key("e"), true, target / 2, true));
  // The L1 output after the range: past L2's "d-d" and "g-i" only counts
  // once an output is open.
  EXPECT_FALSE(c->ShouldStopBefore(Key("j"), false, 0));
  EXPECT_FALSE(c->ShouldStopBefore(Key("k"), true, target));
}

TEST_F(CompactionPickerTest, DisjointL0FilesMoveDownTogether) {
  // A sequential load: four L0 files, each after the last, above an L1
  // that ends before them. They move to L1 at once, even while a flush is
  // under way, rewriting nothing.
  Add(1, "a", "b", kMiB);
  std::vector<uint64_t> l0;
  for (const char* k : {"c", "e", "g", "i"}) {
    l0.push_back(Add(0, std::string(k) + "1", std::string(k) + "2", kMiB / 4));
  }
  Apply();
  Compaction* c = Pick(/*flush_pending=*/true);
  ASSERT_NE(nullptr, c);
  EXPECT_EQ(0, c->level());
  EXPECT_EQ(1, c->output_level());
  EXPECT_TRUE(c->IsTrivialMove());
  std::vector<uint64_t> moved = Numbers(c->inputs(0));
  std::sort(moved.begin(), moved.end());
  EXPECT_EQ(l0, moved);
  EXPECT_TRUE(c->inputs(1).empty());
  ApplyMove(c);
  EXPECT_EQ(0u, vset_->current()->files(0).size());
  EXPECT_EQ(5u, vset_->current()->files(1).size());
}

TEST_F(CompactionPickerTest, L0FilesAroundAnL1FileAreCompacted) {
  // Disjoint L0 files whose span holds an L1 file: moving them would not
  // overlap it file by file, but the L0 compaction must merge with it.
  Add(0, "a", "b", kMiB / 4);
  Add(0, "e", "f", kMiB / 4);
  Add(0, "g", "h", kMiB / 4);
  Add(0, "i", "j", kMiB / 4);
  const uint64_t between = Add(1, "c", "d", kMiB);
  Apply();
  Compaction* c = Pick();
  ASSERT_NE(nullptr, c);
  EXPECT_EQ(0, c->level());
  EXPECT_FALSE(c->IsTrivialMove());
  EXPECT_EQ(4u, c->inputs(0).size());
  EXPECT_EQ(std::vector<uint64_t>{between}, Numbers(c->inputs(1)));
}

TEST_F(CompactionPickerTest, L0MoveRefusedOverTooMuchOfL2) {
  // The disjoint L0 files would land on 11 MiB of L2 (more than ten
  // target file sizes): moved, their later compaction into L2 would be
  // huge, so they are compacted into L1 now, as RocksDB decides.
  for (const char* k : {"c", "e", "g", "i"}) {
    Add(0, std::string(k) + "1", std::string(k) + "2", kMiB / 4);
  }
  Add(2, "a", "z", 11 * kMiB);
  Apply();
  Compaction* c = Pick();
  ASSERT_NE(nullptr, c);
  EXPECT_EQ(0, c->level());
  EXPECT_FALSE(c->IsTrivialMove());
}

TEST_F(CompactionPickerTest, OverlappingL0FilesAreNotMoved) {
  // Three disjoint files and a fourth overlapping one of them: all of L0
  // goes through a compaction (L1 is empty).
  Add(0, "a", "b", kMiB / 4);
  Add(0, "c", "d", kMiB / 4);
  Add(0, "e", "f", kMiB / 4);
  Add(0, "a", "f", kMiB / 4);
  Apply();
  Compaction* c = Pick();
  ASSERT_NE(nullptr, c);
  EXPECT_EQ(0, c->level());
  EXPECT_FALSE(c->IsTrivialMove());
  EXPECT_EQ(4u, c->inputs(0).size());
}

TEST_F(CompactionPickerTest, L0WaitsForAFlushUnderWay) {
  for (int i = 0; i < 4; i++) Add(0, "a", "z", kMiB / 4);
  Apply();
  // A flush is about to add a fifth file: wait for it.
  EXPECT_EQ(nullptr, Pick(/*flush_pending=*/true));
  Compaction* c = Pick(/*flush_pending=*/false);
  ASSERT_NE(nullptr, c);
  EXPECT_EQ(0, c->level());
  EXPECT_EQ(4u, c->inputs(0).size());
}

TEST_F(CompactionPickerTest, L0DoesNotWaitOnceTwiceTheTriggerDeep) {
  for (int i = 0; i < 8; i++) Add(0, "a", "z", kMiB / 4);
  Apply();
  Compaction* c = Pick(/*flush_pending=*/true);
  ASSERT_NE(nullptr, c);
  EXPECT_EQ(0, c->level());
  EXPECT_EQ(8u, c->inputs(0).size());
}

TEST_F(CompactionPickerTest, OutputsEndOnGrandparentBoundaries) {
  // L0 -> L1 with L2 files below: [b, d] [f, h] [j, l] [n, p].
  Add(0, "a", "z", kMiB);
  Add(2, "b", "d", kMiB);
  Add(2, "f", "h", kMiB);
  Add(2, "j", "l", kMiB);
  Add(2, "n", "p", kMiB);
  Apply();
  Compaction* c = Manual(0);
  ASSERT_NE(nullptr, c);
  EXPECT_FALSE(c->bottommost());
  const uint64_t target = c->target_output_file_size();
  EXPECT_EQ(2 * target, c->max_output_file_size());
  // Nothing open yet: never a cut.
  EXPECT_FALSE(c->ShouldStopBefore(Key("a"), false, 0));
  // Inside [b, d]: no boundary, no cut even past the target.
  EXPECT_FALSE(c->ShouldStopBefore(Key("c"), true, target / 4));
  EXPECT_FALSE(c->ShouldStopBefore(Key("d"), true, target + 1));
  // "e" is past the end of [b, d]: a boundary, and the output is large
  // enough to end there.
  EXPECT_TRUE(c->ShouldStopBefore(Key("e"), true, target + 1));
  // A new output: past [f, h] at a third of the target is too small to end.
  EXPECT_FALSE(c->ShouldStopBefore(Key("g"), true, target / 10));
  EXPECT_FALSE(c->ShouldStopBefore(Key("i"), true, target / 3));
  // Past [j, l] at 54%: having let one boundary pass, it needs 55%.
  EXPECT_FALSE(c->ShouldStopBefore(Key("m"), true, target / 100 * 54));
  // Past [n, p] at 61% (needs 60% after two boundaries): cut.
  EXPECT_TRUE(c->ShouldStopBefore(Key("q"), true, target / 100 * 61));
  // No grandparent left: only the maximum cuts.
  EXPECT_FALSE(c->ShouldStopBefore(Key("r"), true, 2 * target - 1));
  EXPECT_TRUE(c->ShouldStopBefore(Key("s"), true, 2 * target));
}

TEST_F(CompactionPickerTest, BottomOutputsAreCutAtTheTarget) {
  Add(0, "a", "z", kMiB);
  Add(1, "a", "m", kMiB);
  Apply();
  Compaction* c = Manual(0);
  ASSERT_NE(nullptr, c);
  EXPECT_TRUE(c->bottommost());
  const uint64_t target = c->target_output_file_size();
  EXPECT_EQ(target, c->max_output_file_size());
  EXPECT_FALSE(c->ShouldStopBefore(Key("b"), true, target - 1));
  EXPECT_TRUE(c->ShouldStopBefore(Key("c"), true, target));
}

}  // namespace
}  // namespace shale
