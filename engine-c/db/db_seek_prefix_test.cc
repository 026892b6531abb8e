// Tests of DBImpl::SeekPrefix, the versioned point read: it finds the
// newest version at or below a target among one key's versions, wherever
// they are (memtable, L0, deeper levels), honours deletions, range
// tombstones and snapshots, skips tables whose filter rules the key out
// without reading a block, and agrees with an iterator over the same
// view in a randomized model.

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "db/db_test_util.h"
#include "table/version_suffix_filter.h"
#include "util/coding.h"

namespace shale {
namespace {

// A versioned key as the Go mvcc package lays one out, without its
// escaping: the prefix 0x03, the key, the inverted 8-byte version, 4 bytes
// of logical time and the suffix length byte (13). Newer versions sort
// first.
std::string Versioned(const std::string& key, uint64_t version) {
  std::string k = "\x03" + key;
  PutFixed64(&k, ~version);  // little-endian: invert byte order below
  std::reverse(k.end() - 8, k.end());
  PutFixed32(&k, 0);
  k.push_back(13);
  return k;
}

std::string Key(int i) {
  char buf[16];
  snprintf(buf, sizeof(buf), "key%04d", i);
  // A terminator keeps the unversioned parts prefix-free, as mvcc's are.
  return std::string(buf) + std::string("\x00\x01", 2);
}

struct Found {
  std::string key, value;
};

void Collect(void* arg, size_t i, const Slice& key, const Slice& value) {
  auto* out = static_cast<std::vector<Found>*>(arg);
  (*out)[i] = Found{key.ToString(), value.ToString()};
}

class DBSeekPrefixTest : public test::DBTestBase {
 protected:
  DBSeekPrefixTest() : DBTestBase("db_seek_prefix_test") {
    options_.split_version_suffix = true;
    options_.versioned_key_prefix = "\x03";
    Reopen();
  }

  DBStats Stats() {
    DBStats s;
    db_->GetStats(&s);
    return s;
  }

  // "key=value" of the first version of target's key at or after target,
  // "NOT_FOUND", or the error.
  std::string Seek(const std::string& target, const Snapshot* snap = nullptr) {
    std::vector<std::string> r = SeekMany({target}, snap);
    return r[0];
  }

  std::vector<std::string> SeekMany(const std::vector<std::string>& targets,
                                    const Snapshot* snap = nullptr) {
    std::vector<Slice> slices(targets.begin(), targets.end());
    std::vector<Status> statuses(targets.size());
    std::vector<Found> found(targets.size());
    ReadOptions ro;
    ro.snapshot = snap;
    db_->SeekPrefix(ro, targets.size(), slices.data(), statuses.data(), &found,
                    &Collect);
    std::vector<std::string> r;
    for (size_t i = 0; i < targets.size(); i++) {
      if (statuses[i].IsNotFound()) {
        r.push_back("NOT_FOUND");
      } else if (!statuses[i].ok()) {
        r.push_back(statuses[i].ToString());
      } else {
        r.push_back(found[i].key + "=" + found[i].value);
      }
    }
    return r;
  }

  // What an iterator over the same view answers: the first live key at or
  // after target whose unversioned part is target's.
  std::string SeekByIterator(const std::string& target) {
    const Slice prefix = StripVersionSuffix(target, "\x03");
    std::unique_ptr<DBIter> it(
        db_->NewIterator(ReadOptions(), nullptr, nullptr));
    for (it->Seek(target); it->Valid(); it->Next()) {
      if (!it->key().starts_with(prefix)) break;
      if (StripVersionSuffix(it->key(), "\x03") == prefix) {
        return it->key().ToString() + "=" + it->value().ToString();
      }
    }
    EXPECT_TRUE(it->status().ok()) << it->status().ToString();
    return "NOT_FOUND";
  }

  static std::string Entry(const std::string& key, uint64_t v,
                           const std::string& value) {
    return Versioned(key, v) + "=" + value;
  }
};

TEST_F(DBSeekPrefixTest, FindsTheNewestVersionAtOrBelowTheTarget) {
  for (int i = 0; i < 10; i++) {
    for (uint64_t v = 10; v <= 30; v += 10) {
      ASSERT_TRUE(Put(Versioned(Key(i), v), "v" + std::to_string(v)).ok());
    }
  }
  for (bool flushed : {false, true}) {
    SCOPED_TRACE(flushed ? "in an SST" : "in the memtable");
    for (int i = 0; i < 10; i++) {
      EXPECT_EQ(Entry(Key(i), 30, "v30"), Seek(Versioned(Key(i), 99)));
      EXPECT_EQ(Entry(Key(i), 30, "v30"), Seek(Versioned(Key(i), 30)));
      EXPECT_EQ(Entry(Key(i), 20, "v20"), Seek(Versioned(Key(i), 29)));
      EXPECT_EQ(Entry(Key(i), 10, "v10"), Seek(Versioned(Key(i), 10)));
      // Below the oldest version: the next key's versions do not count.
      EXPECT_EQ("NOT_FOUND", Seek(Versioned(Key(i), 9)));
    }
    EXPECT_EQ("NOT_FOUND", Seek(Versioned(Key(10), 99)));
    ASSERT_TRUE(db_->Flush(true).ok());
  }
}

// A callback that reads the database from inside SeekPrefix: the inner
// Get runs while the outer read holds this thread's SuperVersion slot.
struct NestedRead {
  DBImpl* db;
  std::string inner;  // what the nested Get found
  Status inner_status;
};

void GetInside(void* arg, size_t /*i*/, const Slice& /*key*/,
               const Slice& /*value*/) {
  auto* n = static_cast<NestedRead*>(arg);
  n->inner_status = n->db->Get(ReadOptions(), "plain", &n->inner);
}

TEST_F(DBSeekPrefixTest, ReadInsideACallback) {
  ASSERT_TRUE(Put(Versioned(Key(1), 10), "v10").ok());
  ASSERT_TRUE(Put("plain", "p1").ok());
  for (int round = 0; round < 3; round++) {
    NestedRead n{db_.get(), "", Status()};
    const std::string target = Versioned(Key(1), 99);
    const Slice t(target);
    Status st;
    db_->SeekPrefix(ReadOptions(), 1, &t, &st, &n, &GetInside);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ASSERT_TRUE(n.inner_status.ok()) << n.inner_status.ToString();
    EXPECT_EQ("p" + std::to_string(round + 1), n.inner);
    // The outer read's slot is back in use by plain reads afterwards.
    EXPECT_EQ("p" + std::to_string(round + 1), Get("plain"));
    ASSERT_TRUE(Put("plain", "p" + std::to_string(round + 2)).ok());
    if (round == 1) ASSERT_TRUE(db_->Flush(true).ok());
  }
}

TEST_F(DBSeekPrefixTest, TakesTheSmallestKeyOverSourcesWrittenOutOfOrder) {
  // A newer version written first sits in an older source: the read is
  // decided by the smallest key at or after the target over every source
  // (L1, L0, the memtable), not by the newest source holding the key.
  ASSERT_TRUE(Put(Versioned(Key(1), 30), "v30").ok());
  ASSERT_TRUE(db_->CompactRange(nullptr, nullptr).ok());
  ASSERT_TRUE(Put(Versioned(Key(1), 20), "v20").ok());
  ASSERT_TRUE(db_->Flush(true).ok());
  ASSERT_TRUE(Put(Versioned(Key(1), 10), "v10").ok());
  EXPECT_EQ(Entry(Key(1), 30, "v30"), Seek(Versioned(Key(1), 99)));
  EXPECT_EQ(Entry(Key(1), 20, "v20"), Seek(Versioned(Key(1), 29)));
  EXPECT_EQ(Entry(Key(1), 10, "v10"), Seek(Versioned(Key(1), 19)));
  EXPECT_EQ("NOT_FOUND", Seek(Versioned(Key(1), 9)));
  // A range tombstone over the newest version only: the next one answers.
  ASSERT_TRUE(DeleteRange(Versioned(Key(1), 30), Versioned(Key(1), 25)).ok());
  EXPECT_EQ(Entry(Key(1), 20, "v20"), Seek(Versioned(Key(1), 99)));
  ASSERT_TRUE(db_->Flush(true).ok());
  EXPECT_EQ(Entry(Key(1), 20, "v20"), Seek(Versioned(Key(1), 99)));
  // A newer point entry in a newer source replaces an older one of the
  // same version.
  ASSERT_TRUE(Put(Versioned(Key(1), 20), "v20b").ok());
  EXPECT_EQ(Entry(Key(1), 20, "v20b"), Seek(Versioned(Key(1), 99)));
  ASSERT_TRUE(Delete(Versioned(Key(1), 20)).ok());
  EXPECT_EQ(Entry(Key(1), 10, "v10"), Seek(Versioned(Key(1), 99)));
}

TEST_F(DBSeekPrefixTest, AbsentKeysReadNoBlock) {
  // Even keys in three tables of one level (compacted), odd keys absent.
  for (int i = 0; i < 600; i += 2) {
    ASSERT_TRUE(Put(Versioned(Key(i), 10), std::string(100, 'x')).ok());
    if (i % 200 == 198) {
      ASSERT_TRUE(db_->Flush(true).ok());
    }
  }
  ASSERT_TRUE(db_->CompactRange(nullptr, nullptr).ok());
  std::vector<std::string> targets;
  for (int i = 1; i < 600; i += 2) targets.push_back(Versioned(Key(i), 99));
  const DBStats before = Stats();
  std::vector<std::string> got = SeekMany(targets);
  const DBStats after = Stats();
  for (const std::string& g : got) EXPECT_EQ("NOT_FOUND", g);
  const uint64_t checked =
      after.bloom_filter_checked - before.bloom_filter_checked;
  const uint64_t useful =
      after.bloom_filter_useful - before.bloom_filter_useful;
  // Every target but the last (past every table) meets one table.
  EXPECT_EQ(targets.size() - 1, checked);
  // About 1% false positives at 10 bits per key; each one costs a block.
  EXPECT_GE(useful, targets.size() * 9 / 10);
  const uint64_t blocks = (after.block_cache_hits + after.block_cache_misses) -
                          (before.block_cache_hits + before.block_cache_misses);
  EXPECT_LE(blocks, 2 * (checked - useful));

  // Present keys are never filtered out.
  targets.clear();
  for (int i = 0; i < 600; i += 2) targets.push_back(Versioned(Key(i), 99));
  const DBStats before2 = Stats();
  got = SeekMany(targets);
  const DBStats after2 = Stats();
  for (size_t j = 0; j < targets.size(); j++) {
    EXPECT_EQ(Entry(Key(2 * static_cast<int>(j)), 10, std::string(100, 'x')),
              got[j]);
  }
  EXPECT_EQ(after2.bloom_filter_useful, before2.bloom_filter_useful);
}

TEST_F(DBSeekPrefixTest, NewerDeletionsHideOlderVersions) {
  // Versions in L1, their deletion (a point tombstone of one version) and
  // a range tombstone over another key's versions in newer files whose
  // filters do not hold those keys.
  for (int i = 0; i < 4; i++) {
    ASSERT_TRUE(Put(Versioned(Key(i), 10), "old").ok());
  }
  ASSERT_TRUE(db_->CompactRange(nullptr, nullptr).ok());
  ASSERT_TRUE(Delete(Versioned(Key(1), 10)).ok());
  ASSERT_TRUE(Put(Versioned(Key(100), 10), "other").ok());
  ASSERT_TRUE(db_->Flush(true).ok());
  ASSERT_TRUE(DeleteRange(Versioned(Key(2), 1000), Versioned(Key(2), 0)).ok());
  ASSERT_TRUE(Put(Versioned(Key(200), 10), "other").ok());
  ASSERT_TRUE(db_->Flush(true).ok());
  EXPECT_EQ(Entry(Key(0), 10, "old"), Seek(Versioned(Key(0), 20)));
  EXPECT_EQ("NOT_FOUND", Seek(Versioned(Key(1), 20)));
  EXPECT_EQ("NOT_FOUND", Seek(Versioned(Key(2), 20)));
  EXPECT_EQ(Entry(Key(3), 10, "old"), Seek(Versioned(Key(3), 20)));
  // An older version under a deleted newer one is still found.
  ASSERT_TRUE(Put(Versioned(Key(3), 20), "new").ok());
  ASSERT_TRUE(Delete(Versioned(Key(3), 20)).ok());
  EXPECT_EQ(Entry(Key(3), 10, "old"), Seek(Versioned(Key(3), 30)));
}

TEST_F(DBSeekPrefixTest, MemtableDeletionsHideTableVersions) {
  // The memtable holds no put of these keys, only a deletion: its filter
  // must hold them all the same, and its range tombstones count once a
  // table's entry is found.
  ASSERT_TRUE(Put(Versioned(Key(1), 10), "point").ok());
  ASSERT_TRUE(Put(Versioned(Key(2), 10), "range").ok());
  ASSERT_TRUE(Put(Versioned(Key(3), 10), "kept").ok());
  ASSERT_TRUE(db_->Flush(true).ok());
  ASSERT_TRUE(Delete(Versioned(Key(1), 10)).ok());
  ASSERT_TRUE(DeleteRange(Versioned(Key(2), 1000), Versioned(Key(2), 0)).ok());
  EXPECT_EQ("NOT_FOUND", Seek(Versioned(Key(1), 20)));
  EXPECT_EQ("NOT_FOUND", Seek(Versioned(Key(2), 20)));
  EXPECT_EQ(Entry(Key(3), 10, "kept"), Seek(Versioned(Key(3), 20)));
  EXPECT_EQ("NOT_FOUND", Seek(Versioned(Key(4), 20)));
}

TEST_F(DBSeekPrefixTest, ReadsAtASnapshot) {
  ASSERT_TRUE(Put(Versioned(Key(1), 10), "a").ok());
  ASSERT_TRUE(db_->Flush(true).ok());
  const Snapshot* snap = db_->GetSnapshot();
  ASSERT_TRUE(Put(Versioned(Key(1), 20), "b").ok());
  ASSERT_TRUE(Put(Versioned(Key(2), 20), "c").ok());
  ASSERT_TRUE(Delete(Versioned(Key(1), 10)).ok());
  EXPECT_EQ(Entry(Key(1), 10, "a"), Seek(Versioned(Key(1), 30), snap));
  EXPECT_EQ("NOT_FOUND", Seek(Versioned(Key(2), 30), snap));
  EXPECT_EQ(Entry(Key(1), 20, "b"), Seek(Versioned(Key(1), 30)));
  EXPECT_EQ("NOT_FOUND", Seek(Versioned(Key(1), 15)));
  db_->ReleaseSnapshot(snap);
}

TEST_F(DBSeekPrefixTest, PassesOverKeysWithAnotherUnversionedPart) {
  // Unversioned parts that are not prefix-free: "\x03a" and "\x03ab".
  // Versions of "a" whose inverted version starts below 'b' sort before
  // every key of "ab", the others after; a read of "a" passes over "ab".
  auto at = [](const std::string& user, uint8_t first) {
    std::string k = "\x03" + user;
    k.push_back(static_cast<char>(first));
    k.append(11, '\0');
    k.push_back(13);
    return k;
  };
  ASSERT_TRUE(Put(at("a", 0x10), "a-new").ok());
  ASSERT_TRUE(Put(at("ab", 0x10), "ab").ok());
  ASSERT_TRUE(Put(at("a", 0x80), "a-old").ok());
  for (bool flushed : {false, true}) {
    SCOPED_TRACE(flushed ? "in an SST" : "in the memtable");
    EXPECT_EQ(at("a", 0x10) + "=a-new", Seek(at("a", 0x01)));
    EXPECT_EQ(at("a", 0x80) + "=a-old", Seek(at("a", 0x11)));
    EXPECT_EQ(at("ab", 0x10) + "=ab", Seek(at("ab", 0x01)));
    EXPECT_EQ("NOT_FOUND", Seek(at("ab", 0x11)));
    ASSERT_TRUE(db_->Flush(true).ok());
  }
}

TEST_F(DBSeekPrefixTest, RejectsKeysThatAreNotVersioned) {
  std::vector<std::string> got =
      SeekMany({"\x01raft-state", std::string("\x03", 1),
                std::string("\x03k\x00", 3), Versioned(Key(1), 1)});
  EXPECT_EQ(0u, got[0].rfind("Invalid argument", 0)) << got[0];
  EXPECT_EQ(0u, got[1].rfind("Invalid argument", 0)) << got[1];
  EXPECT_EQ(0u, got[2].rfind("Invalid argument", 0)) << got[2];
  EXPECT_EQ("NOT_FOUND", got[3]);
}

TEST_F(DBSeekPrefixTest, NotSupportedWithoutSplitVersionSuffix) {
  options_.split_version_suffix = false;
  options_.versioned_key_prefix.clear();
  Reopen();
  std::vector<std::string> got = SeekMany({Versioned(Key(1), 1)});
  EXPECT_EQ(0u, got[0].rfind("Not supported", 0)) << got[0];
}

TEST_F(DBSeekPrefixTest, AgreesWithAnIteratorOnRandomHistories) {
  options_.write_buffer_size = 64 << 10;
  options_.level0_file_num_compaction_trigger = 2;
  options_.max_bytes_for_level_base = 64 << 10;
  options_.target_file_size_base = 64 << 10;
  Reopen();
  std::mt19937 rng(2026);
  constexpr int kKeys = 300;
  for (int round = 0; round < 6; round++) {
    for (int op = 0; op < 6000; op++) {
      const int k = static_cast<int>(rng() % kKeys);
      const uint64_t v = 1 + rng() % 50;
      const uint32_t what = rng() % 20;
      if (what == 0) {
        ASSERT_TRUE(Delete(Versioned(Key(k), v)).ok());
      } else if (what == 1) {
        ASSERT_TRUE(
            DeleteRange(Versioned(Key(k), 1 + rng() % 50), Versioned(Key(k), 0))
                .ok());
      } else if (what == 2 && k % 3 == 0) {
        continue;  // a third of the keys stay sparse
      } else {
        ASSERT_TRUE(Put(Versioned(Key(k), v), std::to_string(round) + "/" +
                                                  std::to_string(op) +
                                                  std::string(rng() % 40, 'p'))
                        .ok());
      }
    }
    if (round % 2 == 1) {
      ASSERT_TRUE(db_->Flush(true).ok());
    }
    ASSERT_TRUE(db_->WaitForCompaction().ok());
    std::vector<std::string> targets;
    for (int k = 0; k < kKeys + 20; k++) {
      targets.push_back(Versioned(Key(k), 1 + rng() % 55));
    }
    std::vector<std::string> got = SeekMany(targets);
    for (size_t j = 0; j < targets.size(); j++) {
      ASSERT_EQ(SeekByIterator(targets[j]), got[j])
          << "round " << round << " target " << j;
    }
  }
}

}  // namespace
}  // namespace shale
