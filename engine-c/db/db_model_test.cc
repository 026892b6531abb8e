// A randomized test of the whole engine against a model: std::map.
//
// Each seed runs thousands of random operations - puts, deletes, range
// deletes, multi-record batches, snapshots taken and released, reopens -
// and checks point reads and iterators (both directions, seeks, bounds,
// direction changes) against the model, at the latest state and at every
// live snapshot. SHALE_MODEL_OPS and SHALE_MODEL_SEEDS raise the counts for
// long runs.

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <optional>

#include "db/db_test_util.h"
#include "db/sst_file_writer.h"
#include "util/random.h"

namespace shale {
namespace {

using Model = std::map<std::string, std::string>;

int EnvInt(const char* name, int def) {
  const char* v = getenv(name);
  return (v != nullptr && *v != '\0') ? atoi(v) : def;
}

class DBModelTest : public test::DBTestBase,
                    public testing::WithParamInterface<uint64_t> {
 protected:
  DBModelTest() : DBTestBase("db_model_test"), rnd_(GetParam()) {
    ConfigureOptions();
    Reopen();
  }
  ~DBModelTest() override { ReleaseAllSnapshots(); }

  // Small buffers and levels so that flushes and compactions (down to L2
  // and beyond) run all the time; each seed also varies the table layout
  // and the table cache (pinned readers or a bounded cache).
  void ConfigureOptions() {
    options_.write_buffer_size = 64 << 10;
    options_.target_file_size_base = 64 << 10;
    options_.max_bytes_for_level_base = 128 << 10;
    options_.max_bytes_for_level_multiplier = 4;
    options_.level0_file_num_compaction_trigger = 2;
    options_.level0_slowdown_writes_trigger = 4;
    options_.level0_stop_writes_trigger = 8;
    options_.block_size = 1024;
    const uint64_t variant = GetParam() % 4;
    options_.max_open_files = variant & 1 ? 20 : -1;
    options_.bloom_bits_per_key = variant & 2 ? 0 : 10;
    options_.compression = variant & 2 ? kNoCompression : kSnappyCompression;
    options_.block_cache_size = variant == 3 ? 0 : (1 << 20);
  }

  struct Snap {
    const Snapshot* snap;
    Model model;
  };

  std::string KeyOf(uint64_t n) {
    char buf[16];
    snprintf(buf, sizeof(buf), "k%05llu", static_cast<unsigned long long>(n));
    std::string k = buf;
    if (n % 37 == 0) k += std::string(100, 'x');  // a few long keys
    return k;
  }

  uint64_t RandomKeyNumber() {
    // Mostly a small key space (lots of overwrites), with a wider tail so
    // that live data fills several levels.
    return rnd_.OneIn(3) ? rnd_.Uniform(6000) : rnd_.Uniform(300);
  }

  std::string RandomKey() { return KeyOf(RandomKeyNumber()); }

  std::string RandomValue() {
    std::string v(rnd_.Skewed(11), 'a' + rnd_.Uniform(26));
    // Mixed content so snappy has something to do and something it can't.
    for (size_t i = 0; i < v.size(); i += 7) v[i] = 'a' + rnd_.Uniform(26);
    for (int i = 0; i < extra_value_bytes_; i++) {
      v.push_back('a' + rnd_.Uniform(26));
    }
    return v + std::to_string(rnd_.Next() % 1000);
  }

  void ApplyToModel(Model* m, ValueType t, const std::string& k,
                    const std::string& v) {
    switch (t) {
      case kTypeValue:
        (*m)[k] = v;
        break;
      case kTypeDeletion:
        m->erase(k);
        break;
      case kTypeRangeDeletion:
        m->erase(m->lower_bound(k), m->lower_bound(v));
        break;
    }
  }

  void RandomWrite() {
    WriteBatch b;
    const int n = rnd_.OneIn(4) ? 1 + rnd_.Uniform(8) : 1;
    for (int i = 0; i < n; i++) {
      const uint64_t r = rnd_.Uniform(100);
      if (r < 70) {
        const std::string k = RandomKey(), v = RandomValue();
        b.Put(k, v);
        ApplyToModel(&model_, kTypeValue, k, v);
      } else if (r < 100 - range_delete_percent_) {
        const std::string k = RandomKey();
        b.Delete(k);
        ApplyToModel(&model_, kTypeDeletion, k, "");
      } else {
        // Mostly narrow ranges (like Raft log truncation), a few wide.
        const uint64_t n = RandomKeyNumber();
        const std::string a = KeyOf(n);
        const std::string z =
            rnd_.OneIn(10) ? RandomKey() : KeyOf(n + rnd_.Uniform(30));
        if (a > z) continue;
        b.DeleteRange(a, z);
        ApplyToModel(&model_, kTypeRangeDeletion, a, z);
      }
    }
    ASSERT_TRUE(Write(b, rnd_.OneIn(50)).ok());
  }

  // Ingests an SST of sorted puts over a narrow key span, sometimes with a
  // range deletion: the tombstone hides older data, not the file's puts.
  void RandomIngest() {
    const std::string path = dbname_ + "-ingest.sst";
    std::unique_ptr<SstFileWriter> w;
    ASSERT_TRUE(SstFileWriter::Open(options_, path, &w).ok());
    const uint64_t base = RandomKeyNumber();
    std::map<std::string, std::string> puts;
    for (int i = 0; i < 20; i++) {
      puts[KeyOf(base + rnd_.Uniform(30))] = RandomValue();
    }
    for (const auto& [k, v] : puts) ASSERT_TRUE(w->Put(k, v).ok());
    if (rnd_.OneIn(2)) {
      const std::string a = KeyOf(base), z = KeyOf(base + 25);
      ASSERT_TRUE(w->DeleteRange(a, z).ok());
      ApplyToModel(&model_, kTypeRangeDeletion, a, z);
    }
    for (const auto& [k, v] : puts) ApplyToModel(&model_, kTypeValue, k, v);
    uint64_t size;
    ASSERT_TRUE(w->Finish(&size).ok());
    ASSERT_TRUE(db_->Ingest({path}).ok());
  }

  void CheckGet(const Snapshot* snap, const Model& m) {
    for (int i = 0; i < 5; i++) {
      const std::string k = RandomKey();
      auto it = m.find(k);
      ASSERT_EQ(it == m.end() ? "NOT_FOUND" : it->second, Get(k, snap))
          << "key " << k;
    }
  }

  void CheckMultiGet(const Snapshot* snap, const Model& m) {
    std::vector<std::string> keys;
    for (int i = 0; i < 8; i++) keys.push_back(RandomKey());
    std::vector<Slice> slices(keys.begin(), keys.end());
    std::vector<std::string> values(keys.size());
    std::vector<Status> statuses(keys.size());
    ReadOptions ro;
    ro.snapshot = snap;
    db_->MultiGet(ro, keys.size(), slices.data(), values.data(),
                  statuses.data());
    for (size_t i = 0; i < keys.size(); i++) {
      auto it = m.find(keys[i]);
      if (it == m.end()) {
        ASSERT_TRUE(statuses[i].IsNotFound()) << keys[i];
      } else {
        ASSERT_TRUE(statuses[i].ok()) << statuses[i].ToString();
        ASSERT_EQ(it->second, values[i]);
      }
    }
  }

  // A random walk of an iterator with random bounds, step by step against
  // the model.
  void CheckIterator(const Snapshot* snap, const Model& m) {
    std::optional<std::string> lower, upper;
    if (rnd_.OneIn(3)) lower = RandomKey();
    if (rnd_.OneIn(3)) upper = RandomKey();
    Slice lo, hi;
    if (lower) lo = *lower;
    if (upper) hi = *upper;
    ReadOptions ro;
    ro.snapshot = snap;
    std::unique_ptr<DBIter> it(
        db_->NewIterator(ro, lower ? &lo : nullptr, upper ? &hi : nullptr));
    // The model's view within bounds.
    Model view;
    for (const auto& [k, v] : m) {
      if (lower && k < *lower) continue;
      if (upper && k >= *upper) continue;
      view[k] = v;
    }
    Model::const_iterator pos = view.end();  // end() = invalid
    for (int step = 0; step < 40; step++) {
      const uint64_t op = rnd_.Uniform(6);
      if (op == 0) {
        it->SeekToFirst();
        pos = view.begin();
      } else if (op == 1) {
        it->SeekToLast();
        pos = view.empty() ? view.end() : std::prev(view.end());
      } else if (op == 2) {
        const std::string t = RandomKey();
        it->Seek(t);
        pos = view.lower_bound(t);
      } else if (op == 3) {
        const std::string t = RandomKey();
        it->SeekForPrev(t);
        auto ub = view.upper_bound(t);
        pos = ub == view.begin() ? view.end() : std::prev(ub);
      } else if (pos != view.end() && op == 4 && rnd_.OneIn(2)) {
        // Past every key with a prefix of the current one (as an MVCC
        // scan passes over a key's versions).
        const std::string prefix = pos->first.substr(
            0, pos->first.size() -
                   rnd_.Uniform(std::min<size_t>(pos->first.size() + 1, 4)));
        it->NextPrefix(prefix);
        while (pos != view.end() && Slice(pos->first).starts_with(prefix)) {
          ++pos;
        }
      } else if (pos != view.end() && op == 4) {
        it->Next();
        ++pos;
      } else if (pos != view.end()) {
        it->Prev();
        pos = pos == view.begin() ? view.end() : std::prev(pos);
      }
      ASSERT_TRUE(it->status().ok()) << it->status().ToString();
      ASSERT_EQ(pos != view.end(), it->Valid()) << "step " << step;
      if (pos != view.end()) {
        ASSERT_EQ(pos->first, it->key().ToString());
        ASSERT_EQ(pos->second, it->value().ToString());
      }
    }
  }

  void CheckAll() {
    CheckGet(nullptr, model_);
    CheckMultiGet(nullptr, model_);
    CheckIterator(nullptr, model_);
    if (!snaps_.empty()) {
      const Snap& s = snaps_[rnd_.Uniform(snaps_.size())];
      CheckGet(s.snap, s.model);
      CheckMultiGet(s.snap, s.model);
      CheckIterator(s.snap, s.model);
    }
  }

  // Adds this session's flush and compaction counts to the test's totals.
  void AccumulateStats() {
    DBStats st;
    db_->GetStats(&st);
    flushes_ += st.flush_count;
    compactions_ += st.compaction_count;
    deep_compactions_ += db_->TEST_DeepCompactions();
  }

  void ReleaseAllSnapshots() {
    for (const Snap& s : snaps_) db_->ReleaseSnapshot(s.snap);
    snaps_.clear();
  }

  // The whole randomized run (see the file comment).
  void RunRandomized();

  Random rnd_;
  // Share of written records that are range deletions (the rest: 70%
  // puts, then point deletions).
  int range_delete_percent_ = 5;
  // Random letters added to every value (they barely compress).
  int extra_value_bytes_ = 0;
  uint64_t flushes_ = 0;
  uint64_t compactions_ = 0;
  uint64_t deep_compactions_ = 0;
  Model model_;
  std::vector<Snap> snaps_;
};

void DBModelTest::RunRandomized() {
  const int ops = EnvInt("SHALE_MODEL_OPS", 8000);
  for (int i = 0; i < ops; i++) {
    const uint64_t r = rnd_.Uniform(1000);
    if (r < 700) {
      RandomWrite();
    } else if (r < 950) {
      CheckAll();
    } else if (r < 975) {
      if (snaps_.size() < 5) {
        snaps_.push_back(Snap{db_->GetSnapshot(), model_});
      }
    } else if (r < 990) {
      if (!snaps_.empty()) {
        const size_t j = rnd_.Uniform(snaps_.size());
        db_->ReleaseSnapshot(snaps_[j].snap);
        snaps_.erase(snaps_.begin() + j);
      }
    } else if (r < 993) {
      ASSERT_TRUE(db_->Flush(rnd_.OneIn(2)).ok());
    } else if (r < 995) {
      std::string a = RandomKey(), z = RandomKey();
      if (a > z) std::swap(a, z);
      Slice lo(a), hi(z);
      ASSERT_TRUE(db_->CompactRange(rnd_.OneIn(4) ? nullptr : &lo,
                                    rnd_.OneIn(4) ? nullptr : &hi)
                      .ok());
    } else if (r < 997) {
      RandomIngest();
    } else {
      ReleaseAllSnapshots();
      AccumulateStats();
      Reopen();
    }
    if (HasFatalFailure()) return;
  }
  CheckAll();
  // The run must have gone through the LSM, not just the memtable.
  ASSERT_TRUE(db_->WaitForCompaction().ok());
  AccumulateStats();
  if (getenv("SHALE_MODEL_VERBOSE") != nullptr) {
    std::string levels;
    db_->GetProperty("shale.levelstats", &levels);
    fprintf(stderr, "flushes %llu compactions %llu deep %llu\n%s",
            static_cast<unsigned long long>(flushes_),
            static_cast<unsigned long long>(compactions_),
            static_cast<unsigned long long>(deep_compactions_), levels.c_str());
  }
  EXPECT_GT(flushes_, 5u);
  EXPECT_GT(compactions_, 5u);
  // Everything, both directions.
  std::string want;
  for (const auto& [k, v] : model_)
    want += (want.empty() ? "" : " ") + k + "=" + v;
  ASSERT_EQ(want, Contents());
  ReleaseAllSnapshots();
  Reopen();
  ASSERT_EQ(want, Contents());
}

TEST_P(DBModelTest, Randomized) { RunRandomized(); }

// L1's target is the smallest allowed (one output file) and values are
// ~300 bytes longer, so that flushes write enough for L0 compactions to
// overfill L1 and write deep ranges straight to L2 (compaction.h; 13 to 24
// per seed when written): the same random runs, through that path.
class DBModelSmallL1Test : public DBModelTest {
 protected:
  DBModelSmallL1Test() {
    options_.max_bytes_for_level_base = 64 << 10;
    extra_value_bytes_ = 300;
    Reopen();
  }
};

TEST_P(DBModelSmallL1Test, Randomized) {
  RunRandomized();
  if (HasFatalFailure()) return;
  EXPECT_GT(deep_compactions_, 0u);
}

// As DBModelSmallL1Test, with four times the range deletions: tombstones
// that span the edges of deep ranges, split between L1 and L2 outputs.
class DBModelSmallL1RangeDelTest : public DBModelSmallL1Test {
 protected:
  DBModelSmallL1RangeDelTest() { range_delete_percent_ = 20; }
};

TEST_P(DBModelSmallL1RangeDelTest, Randomized) {
  RunRandomized();
  if (HasFatalFailure()) return;
  EXPECT_GT(deep_compactions_, 0u);
}

std::vector<uint64_t> Seeds() {
  const int n = EnvInt("SHALE_MODEL_SEEDS", 3);
  std::vector<uint64_t> seeds;
  for (int i = 0; i < n; i++) seeds.push_back(301 + 7919 * i);
  return seeds;
}

INSTANTIATE_TEST_SUITE_P(Seeds, DBModelTest, testing::ValuesIn(Seeds()));
INSTANTIATE_TEST_SUITE_P(SmallL1Seeds, DBModelSmallL1Test,
                         testing::ValuesIn(Seeds()));
INSTANTIATE_TEST_SUITE_P(SmallL1RangeDelSeeds, DBModelSmallL1RangeDelTest,
                         testing::ValuesIn(Seeds()));

}  // namespace
}  // namespace shale
