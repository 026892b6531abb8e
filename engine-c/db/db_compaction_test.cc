// Tests of the LSM machinery: flushes, automatic and manual compaction,
// what survives them (snapshots, deletions, range tombstones), trivial
// moves, write stalls, background errors and Resume, obsolete files.

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <thread>

#include "db/db_test_util.h"
#include "util/comparator.h"
#include "util/fault_injection_env.h"
#include "util/random.h"

namespace shale {
namespace {

class DBCompactionTest : public test::DBTestBase {
 protected:
  DBCompactionTest() : DBTestBase("db_compaction_test") {
    // Small everything, so a few MiB of writes build several levels.
    options_.write_buffer_size = 64 << 10;
    options_.target_file_size_base = 64 << 10;
    options_.max_bytes_for_level_base = 256 << 10;
    options_.max_bytes_for_level_multiplier = 4;
    options_.level0_file_num_compaction_trigger = 2;
    options_.block_size = 1024;
  }

  ~DBCompactionTest() override {
    // The database goes first: it may be waiting on the gate, and it uses
    // the gate's Env until it is closed.
    if (gate_ != nullptr) gate_->Release();
    db_.reset();
  }

  // Makes the next Reopen use an Env whose SST creations the test can
  // hold (SstGateEnv).
  test::SstGateEnv* UseGate() {
    gate_ = std::make_unique<test::SstGateEnv>(env_);
    options_.env = gate_.get();
    return gate_.get();
  }

  // Waits (up to 10 s) until n SST creations wait at the gate.
  void WaitForHeld(int n) {
    for (int i = 0; i < 10000 && gate_->waiting() < n; i++) {
      env_->SleepForMicroseconds(1000);
    }
    ASSERT_EQ(n, gate_->waiting());
  }

  static std::string Key(int i) {
    char buf[16];
    snprintf(buf, sizeof(buf), "key%06d", i);
    return buf;
  }

  // n puts of value_size bytes at keys i * stride.
  void Fill(int n, size_t value_size, int stride = 1, uint64_t seed = 1) {
    Random rnd(seed);
    for (int i = 0; i < n; i++) {
      std::string v(value_size, 'v');
      for (size_t j = 0; j < v.size(); j += 8) v[j] = 'a' + rnd.Uniform(26);
      ASSERT_TRUE(Put(Key(i * stride), v).ok());
    }
  }

  int NumFiles(int level) {
    return static_cast<int>(db_->TEST_LevelFiles(level).size());
  }

  int TotalFiles() {
    int n = 0;
    for (int l = 0; l < options_.num_levels; l++) n += NumFiles(l);
    return n;
  }

  DBStats Stats() {
    DBStats st;
    db_->GetStats(&st);
    return st;
  }

  std::unique_ptr<test::SstGateEnv> gate_;
};

TEST_F(DBCompactionTest, FlushWritesL0AndRetiresWal) {
  Reopen();
  ASSERT_TRUE(Put("a", "1").ok());
  ASSERT_TRUE(Put("b", "2").ok());
  ASSERT_TRUE(db_->Flush(true).ok());
  ASSERT_EQ(1, NumFiles(0));
  const FileMetaData f = db_->TEST_LevelFiles(0)[0];
  EXPECT_EQ(2u, f.num_entries);
  EXPECT_EQ("a", f.smallest.user_key().ToString());
  EXPECT_EQ("b", f.largest.user_key().ToString());
  EXPECT_EQ(1u, Files(FileType::kLogFile).size());
  EXPECT_EQ("1", Get("a"));
  EXPECT_EQ("a=1 b=2", Contents());
  Reopen();
  EXPECT_EQ("a=1 b=2", Contents());
}

TEST_F(DBCompactionTest, FlushKeepsWhatSnapshotsSee) {
  Reopen();
  for (int i = 0; i < 100; i++) ASSERT_TRUE(Put("k", std::to_string(i)).ok());
  const Snapshot* snap = db_->GetSnapshot();
  ASSERT_TRUE(Put("k", "latest").ok());
  ASSERT_TRUE(Delete("gone").ok());
  ASSERT_TRUE(db_->Flush(true).ok());
  // Versions hidden within a stripe are gone: one per side of the snapshot,
  // plus the deletion.
  ASSERT_EQ(1, NumFiles(0));
  EXPECT_EQ(3u, db_->TEST_LevelFiles(0)[0].num_entries);
  EXPECT_EQ("99", Get("k", snap));
  EXPECT_EQ("latest", Get("k"));
  db_->ReleaseSnapshot(snap);
}

TEST_F(DBCompactionTest, AutomaticCompactionBuildsLevels) {
  Reopen();
  Fill(6000, 500, 7, 1);   // ~3 MiB, random-ish order by stride below
  Fill(3000, 500, 13, 2);  // overwrites part of it
  ASSERT_TRUE(db_->WaitForCompaction().ok());
  EXPECT_LT(NumFiles(0), options_.level0_file_num_compaction_trigger);
  int deepest = 0;
  for (int l = 1; l < options_.num_levels; l++) {
    if (NumFiles(l) > 0) deepest = l;
  }
  EXPECT_GE(deepest, 2) << [&] {
    std::string p;
    db_->GetProperty("shale.levelstats", &p);
    return p;
  }();
  // Every level but the last is within its target (after compaction).
  const DBStats st = Stats();
  EXPECT_GT(st.compaction_count, 0u);
  EXPECT_GT(st.compaction_bytes_written, 0u);
  // Each file is within twice the target size (an output waiting for a
  // boundary of the level below) plus one block of slack.
  for (int l = 1; l < options_.num_levels; l++) {
    for (const FileMetaData& f : db_->TEST_LevelFiles(l)) {
      EXPECT_LT(f.file_size, 2 * options_.target_file_size_base + 8192);
    }
  }
  // Everything reads back, by Get and by scan.
  Random rnd(2);
  std::string v;
  for (int i = 0; i < 6000; i += 11) {
    ASSERT_TRUE(db_->Get(ReadOptions(), Key(i * 7), &v).ok()) << i;
    ASSERT_EQ(500u, v.size());
  }
  std::unique_ptr<DBIter> it(db_->NewIterator(ReadOptions(), nullptr, nullptr));
  int n = 0;
  for (it->SeekToFirst(); it->Valid(); it->Next()) n++;
  ASSERT_TRUE(it->status().ok());
  std::set<int> keys;
  for (int i = 0; i < 6000; i++) keys.insert(i * 7);
  for (int i = 0; i < 3000; i++) keys.insert(i * 13);
  EXPECT_EQ(static_cast<int>(keys.size()), n);
  // Obsolete files are gone: only the live ones remain on disk.
  EXPECT_EQ(static_cast<size_t>(TotalFiles()),
            Files(FileType::kTableFile).size());
}

TEST_F(DBCompactionTest, CompactRangeDropsDeletionsAtTheBottom) {
  Reopen();
  Fill(2000, 100);
  ASSERT_TRUE(db_->Flush(true).ok());
  for (int i = 0; i < 1000; i++) ASSERT_TRUE(Delete(Key(i)).ok());
  ASSERT_TRUE(DeleteRange(Key(1000), Key(2000)).ok());
  ASSERT_TRUE(db_->CompactRange(nullptr, nullptr).ok());
  EXPECT_EQ("", Contents());
  // Nothing is left: deletions and tombstones reached the bottom with
  // nothing under them and no snapshot to see them.
  EXPECT_EQ(0, TotalFiles());
  EXPECT_EQ(0u, Stats().live_sst_bytes);
}

TEST_F(DBCompactionTest, CompactionKeepsVersionsVisibleToSnapshots) {
  Reopen();
  ASSERT_TRUE(Put("a", "old").ok());
  ASSERT_TRUE(Put("b", "old").ok());
  const Snapshot* snap = db_->GetSnapshot();
  ASSERT_TRUE(Put("a", "new").ok());
  ASSERT_TRUE(Delete("b").ok());
  ASSERT_TRUE(DeleteRange("a", "az").ok());
  ASSERT_TRUE(db_->CompactRange(nullptr, nullptr).ok());
  EXPECT_EQ("old", Get("a", snap));
  EXPECT_EQ("old", Get("b", snap));
  EXPECT_EQ("a=old b=old", Contents(snap));
  EXPECT_EQ("", Contents());
  db_->ReleaseSnapshot(snap);
  ASSERT_TRUE(db_->CompactRange(nullptr, nullptr).ok());
  EXPECT_EQ(0, TotalFiles());
}

TEST_F(DBCompactionTest, RangeTombstonesAcrossLevels) {
  Reopen();
  Fill(3000, 200);
  ASSERT_TRUE(db_->CompactRange(nullptr, nullptr).ok());  // all below L0
  // A tombstone in the memtable over data in the levels.
  ASSERT_TRUE(DeleteRange(Key(100), Key(2900)).ok());
  ASSERT_TRUE(Put(Key(500), "back").ok());  // newer than the tombstone
  auto check = [&] {
    EXPECT_EQ("NOT_FOUND", Get(Key(100)));
    EXPECT_EQ("NOT_FOUND", Get(Key(2899)));
    EXPECT_EQ("back", Get(Key(500)));
    EXPECT_NE("NOT_FOUND", Get(Key(99)));
    EXPECT_NE("NOT_FOUND", Get(Key(2900)));
    std::unique_ptr<DBIter> it(
        db_->NewIterator(ReadOptions(), nullptr, nullptr));
    int n = 0;
    for (it->SeekToFirst(); it->Valid(); it->Next()) n++;
    EXPECT_EQ(100 + 1 + 100, n);
    n = 0;
    for (it->SeekToLast(); it->Valid(); it->Prev()) n++;
    EXPECT_EQ(201, n);
    it->Seek(Key(101));
    ASSERT_TRUE(it->Valid());
    EXPECT_EQ(Key(500), it->key().ToString());
    it->Next();
    ASSERT_TRUE(it->Valid());
    EXPECT_EQ(Key(2900), it->key().ToString());
  };
  check();
  ASSERT_TRUE(db_->Flush(true).ok());  // the tombstone in L0
  check();
  const std::vector<std::string> key_strings = {Key(50), Key(150), Key(500)};
  std::vector<Slice> keys(key_strings.begin(), key_strings.end());
  std::vector<std::string> values(3);
  std::vector<Status> statuses(3);
  db_->MultiGet(ReadOptions(), 3, keys.data(), values.data(), statuses.data());
  EXPECT_TRUE(statuses[0].ok());
  EXPECT_TRUE(statuses[1].IsNotFound());
  EXPECT_EQ("back", values[2]);
  Fill(100, 10, 1, 9);  // more L0 files, more compaction
  ASSERT_TRUE(db_->WaitForCompaction().ok());
  Reopen();
  EXPECT_EQ("NOT_FOUND", Get(Key(150)));
  EXPECT_EQ("back", Get(Key(500)));
  ASSERT_TRUE(db_->CompactRange(nullptr, nullptr).ok());
  EXPECT_EQ("NOT_FOUND", Get(Key(2000)));
  EXPECT_EQ("back", Get(Key(500)));
}

// A MultiGet batch whose keys share data blocks and files, come from the
// memtable, L0 and the bottom level, repeat, and miss (between keys, past
// the end, deleted, range-deleted) answers as Get does, key by key.
TEST_F(DBCompactionTest, MultiGetBatchAcrossSourcesSharedBlocksAndDuplicates) {
  options_.disable_auto_compactions = true;  // L0 stays L0
  Reopen();
  Fill(3000, 200);
  ASSERT_TRUE(db_->CompactRange(nullptr, nullptr).ok());  // all below L0
  ASSERT_EQ(0, NumFiles(0));
  for (int i = 0; i < 3000; i += 3) {
    ASSERT_TRUE(Put(Key(i), "l0-" + std::to_string(i)).ok());
  }
  ASSERT_TRUE(db_->Flush(true).ok());
  for (int i = 0; i < 3000; i += 11) {
    ASSERT_TRUE(Put(Key(i), "l0b-" + std::to_string(i)).ok());
  }
  ASSERT_TRUE(db_->Flush(true).ok());
  ASSERT_EQ(2, NumFiles(0));
  // The memtable: newer values, deletions and a range deletion over both.
  for (int i = 0; i < 3000; i += 5) {
    ASSERT_TRUE(Put(Key(i), "mem-" + std::to_string(i)).ok());
  }
  for (int i = 1; i < 3000; i += 7) ASSERT_TRUE(Delete(Key(i)).ok());
  ASSERT_TRUE(DeleteRange(Key(1200), Key(1300)).ok());
  ASSERT_TRUE(Put(Key(1250), "after-range").ok());

  Random rnd(301);
  for (int round = 0; round < 50; round++) {
    std::vector<std::string> key_strings;
    // A run of neighbours (shared blocks), random keys, misses and repeats.
    const int start = static_cast<int>(rnd.Uniform(3000));
    for (int i = start; i < start + 12; i++) key_strings.push_back(Key(i));
    for (int i = 0; i < 8; i++) {
      key_strings.push_back(Key(static_cast<int>(rnd.Uniform(3100))));
    }
    key_strings.push_back(Key(start) + "x");  // between two keys
    key_strings.push_back(Key(1250));
    key_strings.push_back(Key(1260));  // range-deleted
    key_strings.push_back("");
    for (int i = 0; i < 6; i++) {
      key_strings.push_back(
          key_strings[rnd.Uniform(static_cast<uint32_t>(key_strings.size()))]);
    }
    for (size_t i = key_strings.size() - 1; i > 0; i--) {
      std::swap(key_strings[i],
                key_strings[rnd.Uniform(static_cast<uint32_t>(i + 1))]);
    }
    std::vector<Slice> keys(key_strings.begin(), key_strings.end());
    std::vector<std::string> values(keys.size(), "stale");
    std::vector<Status> statuses(keys.size());
    db_->MultiGet(ReadOptions(), keys.size(), keys.data(), values.data(),
                  statuses.data());
    for (size_t i = 0; i < keys.size(); i++) {
      const std::string want = Get(key_strings[i]);
      const std::string got = statuses[i].ok() ? values[i]
                                               : (statuses[i].IsNotFound()
                                                      ? "NOT_FOUND"
                                                      : statuses[i].ToString());
      EXPECT_EQ(want, got) << key_strings[i];
      if (!statuses[i].ok()) {
        EXPECT_EQ("", values[i]);
      }
    }
  }
  // Spot checks against what was written.
  EXPECT_EQ("mem-10", Get(Key(10)));
  EXPECT_EQ("l0-3", Get(Key(3)));
  EXPECT_EQ("l0b-33", Get(Key(33)));
  EXPECT_EQ("NOT_FOUND", Get(Key(8)));
  EXPECT_EQ("NOT_FOUND", Get(Key(1260)));
  EXPECT_EQ("after-range", Get(Key(1250)));
  EXPECT_EQ(200u, Get(Key(2)).size());
}

TEST_F(DBCompactionTest, DeepRangeKeepsEveryKeyAndTombstone) {
  // Random puts, deletes and range deletes over a key space larger than
  // L1's target, so that L0 compactions overfill L1 and write a deep range
  // to L2 directly, with a snapshot held through part of it. Every key,
  // deletion and tombstone must read back as a std::map applying the same
  // operations says, at the latest state and at the snapshot, and the
  // levels must keep their invariants.
  Reopen();
  Random rnd(301);
  std::map<std::string, std::string> model, at_snapshot;
  const Snapshot* snap = nullptr;
  for (int i = 0; i < 30000; i++) {
    const int n = rnd.Uniform(8000);
    const std::string k = Key(n);
    const uint32_t r = rnd.Uniform(100);
    if (r < 85) {
      // Barely compressible: the live data (~1.5 MiB) must reach L2.
      std::string v(100 + rnd.Uniform(200), 'v');
      for (char& ch : v) ch = 'a' + rnd.Uniform(26);
      ASSERT_TRUE(Put(k, v).ok());
      model[k] = v;
    } else if (r < 98) {
      ASSERT_TRUE(Delete(k).ok());
      model.erase(k);
    } else {
      // Narrow ranges, so the live data keeps growing.
      const std::string end = Key(n + 1 + rnd.Uniform(40));
      ASSERT_TRUE(DeleteRange(k, end).ok());
      model.erase(model.lower_bound(k), model.lower_bound(end));
    }
    if (i == 10000) {
      snap = db_->GetSnapshot();
      at_snapshot = model;
    }
    if (i == 20000) {
      db_->ReleaseSnapshot(snap);
      snap = nullptr;
      EXPECT_GT(db_->TEST_DeepCompactions(), 0u)
          << "no deep range was written under the snapshot";
    }
    if (i == 15000) {
      // The snapshot sees its state while compactions go on under it.
      std::string want;
      for (const auto& [key, value] : at_snapshot) {
        want += (want.empty() ? "" : " ") + key + "=" + value;
      }
      ASSERT_EQ(want, Contents(snap));
    }
  }
  ASSERT_TRUE(db_->WaitForCompaction().ok());
  const uint64_t deep = db_->TEST_DeepCompactions();
  EXPECT_GT(deep, 1u);
  std::string want;
  for (const auto& [key, value] : model) {
    want += (want.empty() ? "" : " ") + key + "=" + value;
  }
  ASSERT_EQ(want, Contents());
  for (int i = 0; i < 8000; i += 7) {
    auto it = model.find(Key(i));
    EXPECT_EQ(it == model.end() ? "NOT_FOUND" : it->second, Get(Key(i)));
  }
  // Below L0 each level's files are sorted and disjoint, and the levels
  // above the last are within their targets.
  InternalKeyComparator icmp(BytewiseComparator());
  uint64_t target = options_.max_bytes_for_level_base;
  int deepest = 0;
  for (int level = 1; level < options_.num_levels; level++) {
    const std::vector<FileMetaData> files = db_->TEST_LevelFiles(level);
    uint64_t bytes = 0;
    for (size_t j = 0; j < files.size(); j++) {
      bytes += files[j].file_size;
      EXPECT_LT(
          icmp.Compare(files[j].smallest.Encode(), files[j].largest.Encode()),
          1);
      if (j > 0) {
        EXPECT_LT(icmp.Compare(files[j - 1].largest.Encode(),
                               files[j].smallest.Encode()),
                  0)
            << "L" << level << " files " << files[j - 1].number << " and "
            << files[j].number << " overlap";
      }
    }
    if (!files.empty()) deepest = level;
    if (level + 1 < options_.num_levels && !files.empty()) {
      EXPECT_LE(bytes, target) << "L" << level;
    }
    target *= options_.max_bytes_for_level_multiplier;
  }
  EXPECT_GE(deepest, 2);
  Reopen();
  ASSERT_EQ(want, Contents());
  // A full compaction drops what the tombstones hid; nothing comes back.
  ASSERT_TRUE(db_->CompactRange(nullptr, nullptr).ok());
  ASSERT_EQ(want, Contents());
}

TEST_F(DBCompactionTest, TrivialMoveKeepsTheFile) {
  options_.disable_auto_compactions = true;
  Reopen();
  Fill(100, 100);
  ASSERT_TRUE(db_->Flush(true).ok());
  ASSERT_EQ(1, NumFiles(0));
  const uint64_t number = db_->TEST_LevelFiles(0)[0].number;
  const uint64_t written = Stats().compaction_bytes_written;
  ASSERT_TRUE(db_->CompactRange(nullptr, nullptr).ok());
  ASSERT_EQ(0, NumFiles(0));
  ASSERT_EQ(1, NumFiles(1));
  EXPECT_EQ(number, db_->TEST_LevelFiles(1)[0].number);
  EXPECT_EQ(written, Stats().compaction_bytes_written);
  std::string v;
  for (int i = 0; i < 100; i++) {
    ASSERT_TRUE(db_->Get(ReadOptions(), Key(i), &v).ok()) << i;
  }
}

// A level over its target whose files overlap nothing below drains by
// trivial moves of up to four files at a time, rewriting nothing.
TEST_F(DBCompactionTest, TrivialMoveTakesNeighboursAlong) {
  options_.disable_auto_compactions = true;
  // One memtable per fill: with compactions off, many small L0 files would
  // reach the stop trigger and stall the fill for good.
  options_.write_buffer_size = 8 << 20;
  Reopen();
  // Two overlapping L0 files, merged by one real compaction into 8 or more
  // L1 files of 64 KiB (L1's target is 256 KiB; L2 is empty).
  Fill(6000, 300, 1, 1);
  ASSERT_TRUE(db_->Flush(true).ok());
  Fill(6000, 300, 1, 2);
  ASSERT_TRUE(db_->Flush(true).ok());
  ASSERT_TRUE(db_->CompactRange(nullptr, nullptr).ok());
  ASSERT_EQ(0, NumFiles(0));
  const int l1_files = NumFiles(1);
  ASSERT_GE(l1_files, 8);
  ASSERT_EQ(0, NumFiles(2));

  Close();
  options_.disable_auto_compactions = false;
  Reopen();
  ASSERT_TRUE(db_->WaitForCompaction().ok());
  const DBStats after = Stats();
  // Only moves: no bytes written, and fewer compactions than files moved.
  EXPECT_EQ(0u, after.compaction_bytes_written);
  const int moved = l1_files - NumFiles(1);
  EXPECT_EQ(moved, NumFiles(2));
  EXPECT_GE(moved, 4);
  EXPECT_LT(after.compaction_count, static_cast<uint64_t>(moved));
  std::string v;
  for (int i = 0; i < 6000; i++) {
    ASSERT_TRUE(db_->Get(ReadOptions(), Key(i), &v).ok()) << i;
  }
}

// A sequential load flushes L0 files that overlap neither each other nor
// anything below: they move down level by level and nothing is rewritten
// (RocksDB's trivial move, L0 included).
TEST_F(DBCompactionTest, SequentialLoadIsMovedNotRewritten) {
  Reopen();
  Fill(20000, 300);  // about 6 MB: ~90 flushes of 64 KiB memtables
  ASSERT_TRUE(db_->Flush(true).ok());
  ASSERT_TRUE(db_->WaitForCompaction().ok());
  const DBStats stats = Stats();
  EXPECT_GE(stats.flush_count, 50u);
  EXPECT_EQ(0u, stats.compaction_bytes_written);
  EXPECT_EQ(0u, stats.compaction_bytes_read);
  // The moves did reach past L1 (L1's target is 256 KiB).
  int deeper = 0;
  for (int l = 2; l < options_.num_levels; l++) deeper += NumFiles(l);
  EXPECT_GT(deeper, 0);
  std::string v;
  for (int i = 0; i < 20000; i += 7) {
    ASSERT_TRUE(db_->Get(ReadOptions(), Key(i), &v).ok()) << i;
  }
  Reopen();
  ASSERT_TRUE(db_->Get(ReadOptions(), Key(19999), &v).ok());
}

// Values every reader sees are written at the bottom with sequence 0; a
// version a snapshot still needs keeps its number.
TEST_F(DBCompactionTest, BottomLevelValuesGetSequenceZero) {
  options_.disable_auto_compactions = true;
  Reopen();
  ASSERT_TRUE(Put("a", "old").ok());
  ASSERT_TRUE(Put("b", "only").ok());
  ASSERT_TRUE(db_->Flush(true).ok());
  const Snapshot* snap = db_->GetSnapshot();
  ASSERT_TRUE(Put("a", "new").ok());
  // Two overlapping L0 files: a real compaction, not a trivial move.
  ASSERT_TRUE(db_->Flush(true).ok());
  ASSERT_TRUE(db_->CompactRange(nullptr, nullptr).ok());
  ASSERT_EQ(0, NumFiles(0));
  ASSERT_EQ(1, NumFiles(1));
  FileMetaData f = db_->TEST_LevelFiles(1)[0];
  EXPECT_EQ(0u, f.smallest_seqno);                   // "a" old and "b": zeroed
  EXPECT_EQ(snap->sequence() + 1, f.largest_seqno);  // "a" new: kept
  EXPECT_EQ("old", Get("a", snap));
  EXPECT_EQ("new", Get("a"));
  EXPECT_EQ("only", Get("b", snap));
  EXPECT_EQ("a=new b=only", Contents());
  db_->ReleaseSnapshot(snap);
  ASSERT_TRUE(db_->CompactRange(nullptr, nullptr).ok());
  f = db_->TEST_LevelFiles(1)[0];
  EXPECT_EQ(0u, f.largest_seqno);  // nothing needs a number any more
  EXPECT_EQ("a=new b=only", Contents());
  Reopen();
  EXPECT_EQ("a=new b=only", Contents());
  // A newer write still wins over a zeroed value.
  ASSERT_TRUE(Put("b", "newer").ok());
  EXPECT_EQ("newer", Get("b"));
}

TEST_F(DBCompactionTest, IteratorPinsFilesThroughCompaction) {
  Reopen();
  Fill(2000, 100);
  ASSERT_TRUE(db_->Flush(true).ok());
  std::unique_ptr<DBIter> it(db_->NewIterator(ReadOptions(), nullptr, nullptr));
  it->SeekToFirst();
  // Rewrite everything underneath the iterator.
  for (int i = 0; i < 2000; i++) ASSERT_TRUE(Delete(Key(i)).ok());
  ASSERT_TRUE(db_->CompactRange(nullptr, nullptr).ok());
  int n = 0;
  for (; it->Valid(); it->Next()) n++;
  ASSERT_TRUE(it->status().ok()) << it->status().ToString();
  EXPECT_EQ(2000, n);
  it.reset();
  EXPECT_EQ("", Contents());
}

TEST_F(DBCompactionTest, NoSlowdownWriterGetsBusyDuringStall) {
  // The L0 compaction is held at its first output file, so L0 stays at
  // the slowdown trigger.
  test::SstGateEnv* gate = UseGate();
  options_.level0_file_num_compaction_trigger = 2;
  options_.level0_slowdown_writes_trigger = 2;
  options_.level0_stop_writes_trigger = 3;
  Reopen();
  // The two L0 files overlap ("k1" lies inside k0-k9), so they are
  // compacted, not moved down.
  ASSERT_TRUE(Put("k0", "v").ok());
  ASSERT_TRUE(Put("k9", "v").ok());
  ASSERT_TRUE(db_->Flush(true).ok());
  gate->HoldAfter(1);  // the next flush's file; then the compaction waits
  ASSERT_TRUE(Put("k1", "v").ok());
  ASSERT_TRUE(db_->Flush(true).ok());
  WaitForHeld(1);
  ASSERT_EQ(2, NumFiles(0));
  WriteBatch b;
  b.Put("x", "y");
  WriteOptions wo;
  wo.no_slowdown = true;
  Status s = db_->Write(wo, b.Data());
  EXPECT_EQ(Status::kBusy, s.code()) << s.ToString();
  EXPECT_NE(std::string::npos, s.ToString().find("L0 files")) << s.ToString();
  EXPECT_EQ("NOT_FOUND", Get("x"));  // nothing written
  // A normal write is slowed, not refused.
  ASSERT_TRUE(db_->Write(WriteOptions(), b.Data()).ok());
  gate->Release();
  ASSERT_TRUE(db_->WaitForCompaction().ok());
  EXPECT_EQ(0, NumFiles(0));
  EXPECT_TRUE(db_->Write(wo, b.Data()).ok());
}

TEST_F(DBCompactionTest, WritesStopAndMemoryStaysBounded) {
  // With the L0 compaction held at its first output file (and every later
  // SST with it), L0 sits at the stop trigger and writers wait; memory
  // stays at the memtable limit. Letting the compaction go frees them.
  test::SstGateEnv* gate = UseGate();
  options_.level0_file_num_compaction_trigger = 2;
  options_.level0_slowdown_writes_trigger = 2;
  options_.level0_stop_writes_trigger = 2;
  options_.max_write_buffer_number = 2;
  options_.delayed_write_rate = 64 << 20;
  Reopen();
  gate->HoldAfter(2);  // two flushes' files
  std::atomic<bool> done{false};
  std::thread writer([&] {
    std::string v(1000, 'x');
    // Keys in a scattered order (7919 is prime to 1500), so the L0 files
    // overlap and must be compacted, not moved down.
    for (int i = 0; i < 1500; i++) {
      ASSERT_TRUE(Put(Key(i * 7919 % 1500), v).ok());
    }
    done = true;
  });
  WaitForHeld(1);
  // The writer fills what memory it may, then stops.
  uint64_t max_memtable = 0;
  for (int i = 0; i < 100; i++) {
    const DBStats st = Stats();
    max_memtable = std::max(max_memtable, st.memtable_bytes);
    env_->SleepForMicroseconds(2000);
  }
  EXPECT_FALSE(done);
  EXPECT_EQ(2, NumFiles(0));
  EXPECT_LE(max_memtable, 3u * options_.write_buffer_size);
  WriteBatch b;
  b.Put("x", "y");
  WriteOptions wo;
  wo.no_slowdown = true;
  const Status s = db_->Write(wo, b.Data());
  EXPECT_EQ(Status::kBusy, s.code()) << s.ToString();
  gate->Release();
  writer.join();
  EXPECT_TRUE(done);
  ASSERT_TRUE(db_->WaitForCompaction().ok());
  EXPECT_LT(Stats().level_files[0], 2u);
  EXPECT_GT(Stats().stall_micros, 0u);
  EXPECT_EQ(std::string(1000, 'x'), Get(Key(1499)));
}

TEST_F(DBCompactionTest, NoL0StallWithAutoCompactionsDisabled) {
  // As in RocksDB: with automatic compaction off nothing would ever bring
  // L0 back under the triggers, so they do not stop or slow writes.
  options_.disable_auto_compactions = true;
  options_.level0_file_num_compaction_trigger = 2;
  options_.level0_slowdown_writes_trigger = 2;
  options_.level0_stop_writes_trigger = 3;
  Reopen();
  for (int i = 0; i < 5; i++) {
    ASSERT_TRUE(Put("k" + std::to_string(i), "v").ok());
    ASSERT_TRUE(db_->Flush(true).ok());
  }
  ASSERT_EQ(5, NumFiles(0));
  WriteBatch b;
  b.Put("x", "y");
  WriteOptions wo;
  wo.no_slowdown = true;  // would be Busy if L0 slowed writes
  Status s = db_->Write(wo, b.Data());
  ASSERT_TRUE(s.ok()) << s.ToString();
  // Many memtables' worth: each switch adds an L0 file, far past the stop
  // trigger, and the writes go on.
  Fill(500, 1000);
  ASSERT_TRUE(db_->Flush(true).ok());
  EXPECT_GT(NumFiles(0), 8);
  EXPECT_EQ(0, NumFiles(1));
  EXPECT_EQ("y", Get("x"));
  // A manual compaction still works, and the data reads back.
  ASSERT_TRUE(db_->CompactRange(nullptr, nullptr).ok());
  EXPECT_EQ(0, NumFiles(0));
  EXPECT_EQ("v", Get("k4"));
}

TEST_F(DBCompactionTest, DisableWalWritesSurviveClose) {
  Reopen();
  WriteBatch b;
  b.Put("nowal", "1");
  WriteOptions wo;
  wo.disable_wal = true;
  ASSERT_TRUE(db_->Write(wo, b.Data()).ok());
  Close();  // flushes what only the memtable held
  Reopen();
  EXPECT_EQ("1", Get("nowal"));
}

TEST_F(DBCompactionTest, ApproximateSize) {
  options_.compression = kNoCompression;  // sizes are on-disk bytes
  Reopen();
  Fill(4000, 1000);
  ASSERT_TRUE(db_->CompactRange(nullptr, nullptr).ok());
  uint64_t all_bytes, all_keys, half_bytes, half_keys;
  const std::string half_end_key = Key(2000);
  const Slice z("z"), half_end(half_end_key);
  ASSERT_TRUE(db_->ApproximateSize("", &z, &all_bytes, &all_keys).ok());
  ASSERT_TRUE(
      db_->ApproximateSize(Key(0), &half_end, &half_bytes, &half_keys).ok());
  // No upper bound covers everything too; an empty span covers nothing.
  uint64_t unbounded_bytes, unbounded_keys, empty_bytes, empty_keys;
  ASSERT_TRUE(
      db_->ApproximateSize("", nullptr, &unbounded_bytes, &unbounded_keys)
          .ok());
  EXPECT_EQ(all_bytes, unbounded_bytes);
  const Slice empty("");
  ASSERT_TRUE(db_->ApproximateSize("", &empty, &empty_bytes, &empty_keys).ok());
  EXPECT_EQ(0u, empty_bytes);
  EXPECT_GT(all_bytes, 3000u * 1000);
  EXPECT_LT(all_bytes, 5000u * 1000);
  EXPECT_NEAR(4000.0, static_cast<double>(all_keys), 400);
  EXPECT_NEAR(all_bytes / 2.0, static_cast<double>(half_bytes),
              all_bytes / 10.0);
  EXPECT_NEAR(2000.0, static_cast<double>(half_keys), 300);
}

TEST_F(DBCompactionTest, WriteAmplificationIsComputable) {
  Reopen();
  Fill(3000, 400);
  ASSERT_TRUE(db_->WaitForCompaction().ok());
  const DBStats st = Stats();
  EXPECT_GT(st.user_bytes_written, 3000u * 400);
  EXPECT_GT(st.flush_bytes_written, 0u);
  const double wamp =
      static_cast<double>(st.wal_bytes_written + st.flush_bytes_written +
                          st.compaction_bytes_written) /
      st.user_bytes_written;
  EXPECT_GT(wamp, 1.0);
  EXPECT_LT(wamp, 20.0);
  std::string prop;
  ASSERT_TRUE(db_->GetProperty("shale.stats", &prop));
  EXPECT_NE(std::string::npos, prop.find("write amplification")) << prop;
  ASSERT_TRUE(db_->GetProperty("shale.sstables", &prop));
  EXPECT_NE(std::string::npos, prop.find("--- level 1 ---")) << prop;
}

class DBFaultTest : public DBCompactionTest {
 protected:
  DBFaultTest() : fault_env_(Env::Default()) { options_.env = &fault_env_; }
  ~DBFaultTest() override { db_.reset(); }  // before fault_env_ goes

  FaultInjectionEnv fault_env_;
};

TEST_F(DBFaultTest, FlushErrorStopsWritesUntilResume) {
  Reopen();
  ASSERT_TRUE(Put("a", "1").ok());
  fault_env_.SetWriteFault(Status::NoSpace("injected", "disk full"), ".sst");
  Status s = db_->Flush(true);
  EXPECT_TRUE(s.IsNoSpace()) << s.ToString();
  EXPECT_NE(std::string::npos, s.ToString().find("flush")) << s.ToString();
  // Writes stop with an error that says what failed; reads go on.
  s = Put("b", "2");
  EXPECT_TRUE(s.IsNoSpace()) << s.ToString();
  EXPECT_NE(std::string::npos, s.ToString().find("call resume"));
  EXPECT_EQ("1", Get("a"));
  EXPECT_EQ(Status::kNoSpace, Stats().background_error);
  // Still failing: Resume clears the error, the flush fails again.
  ASSERT_TRUE(db_->Resume().ok());
  EXPECT_FALSE(db_->Flush(true).ok());
  fault_env_.ClearFault();
  ASSERT_TRUE(db_->Resume().ok());
  ASSERT_TRUE(db_->Flush(true).ok());
  ASSERT_TRUE(Put("b", "2").ok());
  EXPECT_EQ(Status::kOk, Stats().background_error);
  Reopen();
  EXPECT_EQ("a=1 b=2", Contents());
}

TEST_F(DBFaultTest, WalErrorLosesNothingAcknowledged) {
  Reopen();
  ASSERT_TRUE(Put("a", "1").ok());
  fault_env_.SetWriteFault(Status::IOError("injected", "EIO"), ".log");
  Status s = Put("b", "2");
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  s = Put("c", "3");
  EXPECT_EQ(Status::kBackgroundError, s.code()) << s.ToString();
  EXPECT_NE(std::string::npos, s.ToString().find("WAL append")) << s.ToString();
  EXPECT_EQ("NOT_FOUND", Get("b"));
  fault_env_.ClearFault();
  ASSERT_TRUE(db_->Resume().ok());
  ASSERT_TRUE(Put("d", "4").ok());
  Reopen();
  EXPECT_EQ("a=1 d=4", Contents());
}

TEST_F(DBFaultTest, SyncWALErrorStopsWritesUntilResume) {
  Reopen();
  ASSERT_TRUE(Put("a", "1").ok());
  ASSERT_TRUE(db_->SyncWAL().ok());
  fault_env_.SetWriteFault(Status::IOError("injected", "EIO"), ".log");
  Status s = db_->SyncWAL();
  EXPECT_EQ(Status::kBackgroundError, s.code()) << s.ToString();
  EXPECT_NE(std::string::npos, s.ToString().find("syncing WAL"))
      << s.ToString();
  // Whether unsynced data reached the disk is unknown: writes stop.
  s = Put("b", "2");
  EXPECT_EQ(Status::kBackgroundError, s.code()) << s.ToString();
  EXPECT_EQ("1", Get("a"));
  fault_env_.ClearFault();
  ASSERT_TRUE(db_->Resume().ok());
  ASSERT_TRUE(Put("c", "3").ok());
  ASSERT_TRUE(db_->SyncWAL().ok());
  Reopen();
  EXPECT_EQ("a=1 c=3", Contents());
}

TEST_F(DBFaultTest, CompactionErrorThenResume) {
  Reopen();
  Fill(500, 100);
  ASSERT_TRUE(db_->Flush(true).ok());
  Fill(500, 100, 1, 7);
  ASSERT_TRUE(db_->Flush(true).ok());
  fault_env_.SetWriteFault(Status::NoSpace("injected", "disk full"), ".sst");
  Status s = db_->CompactRange(nullptr, nullptr);
  EXPECT_TRUE(s.IsNoSpace()) << s.ToString();
  // Reads are unaffected and see the newest data.
  std::string v;
  ASSERT_TRUE(db_->Get(ReadOptions(), Key(10), &v).ok());
  fault_env_.ClearFault();
  ASSERT_TRUE(db_->Resume().ok());
  ASSERT_TRUE(db_->CompactRange(nullptr, nullptr).ok());
  std::string v2;
  ASSERT_TRUE(db_->Get(ReadOptions(), Key(10), &v2).ok());
  EXPECT_EQ(v, v2);
  EXPECT_EQ(0, NumFiles(0));
}

}  // namespace
}  // namespace shale
