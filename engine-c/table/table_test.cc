// Tests of TableBuilder and Table on real files: round trips under option
// combinations, Get and MultiGet agreeing with iteration, range tombstones,
// global sequence numbers, properties, statistics and corruption.

#include "table/table.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "table/filter_policy.h"
#include "table/format.h"
#include "table/table_builder.h"
#include "util/cache.h"
#include "util/coding.h"
#include "util/comparator.h"
#include "util/env.h"
#include "util/random.h"
#include "util/statistics.h"
#include "util/testutil.h"

namespace shale {

namespace {

using Model = std::map<std::string, std::string>;

// --- Internal-key helpers for the global_seqno tests. The engine's own
// comparator lives in db/; this one orders the same way (user key
// ascending, then trailer descending) so the table layer can be tested on
// its own.
std::string IKey(const std::string& user_key, uint64_t seq, uint8_t type) {
  std::string k = user_key;
  PutFixed64(&k, (seq << 8) | type);
  return k;
}

class TestInternalComparator final : public Comparator {
 public:
  const char* Name() const override { return "test.InternalKeyComparator"; }
  int Compare(const Slice& a, const Slice& b) const override {
    const Slice ua(a.data(), a.size() - 8), ub(b.data(), b.size() - 8);
    const int r = ua.compare(ub);
    if (r != 0) return r;
    const uint64_t ta = DecodeFixed64(a.data() + a.size() - 8);
    const uint64_t tb = DecodeFixed64(b.data() + b.size() - 8);
    return ta > tb ? -1 : (ta < tb ? +1 : 0);
  }
  // Never shortens: keeps every key a valid internal key.
  void FindShortestSeparator(std::string*, const Slice&) const override {}
  void FindShortSuccessor(std::string*) const override {}
};

// Filters over user keys, as the engine's policy does.
class UserKeyFilterPolicy final : public FilterPolicy {
 public:
  UserKeyFilterPolicy() : bloom_(NewBloomFilterPolicy(10)) {}
  const char* Name() const override { return bloom_->Name(); }
  void CreateFilter(const Slice* keys, int n, std::string* dst) const override {
    bloom_->CreateFilter(keys, n, dst);
  }
  bool KeyMayMatch(const Slice& key, const Slice& filter) const override {
    return bloom_->KeyMayMatch(key, filter);
  }
  void KeysMayMatch(const Slice* keys, int n, const Slice& filter,
                    bool* may_match) const override {
    bloom_->KeysMayMatch(keys, n, filter, may_match);
  }
  Slice FilterKey(const Slice& table_key) const override {
    return Slice(table_key.data(), table_key.size() - 8);
  }

 private:
  std::unique_ptr<const FilterPolicy> bloom_;
};

// --- Lookup results.
struct Found {
  bool called = false;
  std::string key;
  std::string value;
};

void SaveFound(void* arg, size_t index, const Slice& k, const Slice& v) {
  Found* f = static_cast<Found*>(arg) + index;
  EXPECT_FALSE(f->called) << "callback called twice for index " << index;
  f->called = true;
  f->key = k.ToString();
  f->value = v.ToString();
}

Model RandomModel(Random* rnd, int n) {
  Model m;
  while (static_cast<int>(m.size()) < n) {
    std::string key = "k" + std::to_string(rnd->Uniform(n * 10));
    key.append(rnd->Uniform(6), 'p');
    std::string value;
    const int len = static_cast<int>(rnd->Skewed(10));
    // Half compressible, half random bytes.
    for (int i = 0; i < len; i++) {
      value.push_back(rnd->OneIn(2) ? 'x'
                                    : static_cast<char>(rnd->Uniform(256)));
    }
    m[key] = value;
  }
  return m;
}

struct TestOptions {
  size_t block_size = 4096;
  int restart_interval = 16;
  CompressionType compression = kSnappyCompression;
  bool filter = true;
  size_t cache_size = 0;  // 0: no block cache
  bool cache_index_and_filter = false;
  bool mmap = false;

  std::string ToString() const {
    return "block_size=" + std::to_string(block_size) +
           " restart=" + std::to_string(restart_interval) +
           " compression=" + CompressionTypeName(compression) +
           " filter=" + std::to_string(filter) +
           " cache=" + std::to_string(cache_size) +
           " cache_index=" + std::to_string(cache_index_and_filter) +
           " mmap=" + std::to_string(mmap);
  }
};

class TableTest : public testing::Test {
 protected:
  TableTest()
      : env_(Env::Default()),
        dir_(test::TempDir("table_test")),
        bloom_(NewBloomFilterPolicy(10)) {}
  ~TableTest() override {
    table_.reset();
    test::RemoveDirRecursively(dir_);
  }

  void SetOptions(const TestOptions& t) {
    topt_ = t;
    options_ = TableOptions();
    options_.comparator = comparator_;
    options_.block_size = t.block_size;
    options_.block_restart_interval = t.restart_interval;
    options_.compression = t.compression;
    options_.filter_policy = t.filter ? filter_policy_ : nullptr;
    table_.reset();  // before the cache it may use
    cache_.reset(t.cache_size > 0 ? NewLRUCache(t.cache_size) : nullptr);
    options_.block_cache = cache_.get();
    options_.cache_index_and_filter_blocks = t.cache_index_and_filter;
    options_.statistics = &stats_;
  }

  std::string FileName() const { return dir_ + "/000007.sst"; }

  // Builds the file from m (and tombstones) and opens it.
  void Build(
      const Model& m,
      const std::vector<std::pair<std::string, std::string>>& tombstones = {}) {
    table_.reset();
    std::unique_ptr<WritableFile> file;
    ASSERT_TRUE(env_->NewWritableFile(FileName(), &file).ok());
    TableBuilder builder(options_, file.get());
    for (const auto& [k, v] : m) builder.Add(k, v);
    for (const auto& [s, e] : tombstones) builder.AddRangeTombstone(s, e);
    builder.SetUserProperty("shale.test.smallest",
                            m.empty() ? "" : m.begin()->first);
    ASSERT_TRUE(builder.Finish().ok()) << builder.status().ToString();
    EXPECT_EQ(m.size(), builder.NumEntries());
    EXPECT_EQ(tombstones.size(), builder.NumRangeTombstones());
    ASSERT_TRUE(file->Close().ok());
    uint64_t size = 0;
    ASSERT_TRUE(env_->GetFileSize(FileName(), &size).ok());
    EXPECT_EQ(size, builder.FileSize());
    ASSERT_TRUE(Open().ok());
  }

  Status Open(uint64_t global_seqno = 0) {
    table_.reset();
    std::unique_ptr<RandomAccessFile> file;
    Status s = env_->NewRandomAccessFile(FileName(), &file, topt_.mmap);
    if (!s.ok()) return s;
    uint64_t size = 0;
    s = env_->GetFileSize(FileName(), &size);
    if (!s.ok()) return s;
    return Table::Open(options_, std::move(file), size, 7, global_seqno,
                       FileName(), &table_);
  }

  // Checks every way of reading the table against m.
  void CheckAgainstModel(const Model& m, Random* rnd) {
    const TableReadOptions ro;
    std::unique_ptr<Iterator> it(table_->NewIterator(ro));

    // Forward and backward scans.
    auto pos = m.begin();
    for (it->SeekToFirst(); it->Valid(); it->Next(), ++pos) {
      ASSERT_NE(m.end(), pos);
      ASSERT_EQ(pos->first, it->key().ToString());
      ASSERT_EQ(pos->second, it->value().ToString());
    }
    ASSERT_EQ(m.end(), pos);
    ASSERT_TRUE(it->status().ok()) << it->status().ToString();
    auto rpos = m.rbegin();
    for (it->SeekToLast(); it->Valid(); it->Prev(), ++rpos) {
      ASSERT_NE(m.rend(), rpos);
      ASSERT_EQ(rpos->first, it->key().ToString());
      ASSERT_EQ(rpos->second, it->value().ToString());
    }
    ASSERT_EQ(m.rend(), rpos);
    ASSERT_TRUE(it->status().ok()) << it->status().ToString();

    // Seeks to present and absent keys, with a few steps either way.
    std::vector<std::string> targets;
    for (const auto& [k, v] : m) {
      if (rnd->OneIn(3)) targets.push_back(k);
      if (rnd->OneIn(3)) targets.push_back(k + "!");
    }
    targets.push_back("");
    targets.push_back("\xff\xff");
    for (const std::string& t : targets) {
      it->Seek(t);
      auto expect = m.lower_bound(t);
      for (int step = 0; step < 3; step++) {
        if (expect == m.end()) {
          ASSERT_FALSE(it->Valid()) << t;
          break;
        }
        ASSERT_TRUE(it->Valid()) << t;
        ASSERT_EQ(expect->first, it->key().ToString());
        if (rnd->OneIn(2)) {
          it->Next();
          ++expect;
        } else {
          if (expect == m.begin()) break;
          it->Prev();
          --expect;
        }
      }
    }

    // Get: present keys are found exactly; an absent key finds its lower
    // bound or (filter) nothing.
    for (const std::string& t : targets) {
      Found f;
      ASSERT_TRUE(table_->Get(ro, t, &f, &SaveFound).ok());
      CheckFound(m, t, f);
    }

    // MultiGet over sorted batches of several sizes.
    std::vector<std::string> sorted = targets;
    std::sort(sorted.begin(), sorted.end());
    for (size_t batch :
         {size_t{1}, size_t{7}, size_t{32}, size_t{33}, sorted.size()}) {
      for (size_t base = 0; base < sorted.size(); base += batch) {
        const size_t n = std::min(batch, sorted.size() - base);
        std::vector<Slice> keys(sorted.begin() + base,
                                sorted.begin() + base + n);
        std::vector<Found> found(n);
        std::vector<Status> statuses(n);
        ASSERT_TRUE(table_
                        ->MultiGet(ro, n, keys.data(), found.data(), &SaveFound,
                                   statuses.data())
                        .ok());
        for (size_t i = 0; i < n; i++) {
          ASSERT_TRUE(statuses[i].ok());
          CheckFound(m, sorted[base + i], found[i]);
        }
      }
    }
  }

  void CheckFound(const Model& m, const std::string& target, const Found& f) {
    auto expect = m.lower_bound(target);
    if (m.count(target) > 0) {
      ASSERT_TRUE(f.called) << "missing " << target;
    }
    if (f.called) {
      ASSERT_NE(m.end(), expect) << target;
      ASSERT_EQ(expect->first, f.key) << target;
      ASSERT_EQ(expect->second, f.value) << target;
    } else if (!topt_.filter) {
      ASSERT_EQ(m.end(), expect) << "no entry reported for " << target;
    }
  }

  Env* const env_;
  const std::string dir_;
  std::unique_ptr<const FilterPolicy> bloom_;
  const Comparator* comparator_ = BytewiseComparator();
  const FilterPolicy* filter_policy_ = bloom_.get();
  TestOptions topt_;
  TableOptions options_;
  Statistics stats_;
  std::unique_ptr<Cache> cache_;
  std::unique_ptr<Table> table_;
};

}  // namespace

TEST_F(TableTest, EmptyTable) {
  SetOptions(TestOptions());
  Build({});
  std::unique_ptr<Iterator> it(table_->NewIterator(TableReadOptions()));
  it->SeekToFirst();
  EXPECT_FALSE(it->Valid());
  it->SeekToLast();
  EXPECT_FALSE(it->Valid());
  EXPECT_TRUE(it->status().ok());
  Found f;
  EXPECT_TRUE(table_->Get(TableReadOptions(), "a", &f, &SaveFound).ok());
  EXPECT_FALSE(f.called);
  EXPECT_EQ(0u, table_->properties().num_entries);
  std::unique_ptr<Iterator> rd(
      table_->NewRangeTombstoneIterator(TableReadOptions()));
  rd->SeekToFirst();
  EXPECT_FALSE(rd->Valid());
}

TEST_F(TableTest, OptionCombinations) {
  Random rnd(42);
  const Model m = RandomModel(&rnd, 600);
  int combos = 0;
  for (size_t block_size : {size_t{64}, size_t{1024}, size_t{16384}}) {
    for (int restart : {1, 3, 16}) {
      for (CompressionType c : {kNoCompression, kSnappyCompression}) {
        for (bool filter : {false, true}) {
          for (size_t cache : {size_t{0}, size_t{8 << 10}, size_t{8 << 20}}) {
            for (bool cache_index : {false, true}) {
              if (cache == 0 && cache_index) continue;
              for (bool mmap : {false, true}) {
                TestOptions t;
                t.block_size = block_size;
                t.restart_interval = restart;
                t.compression = c;
                t.filter = filter;
                t.cache_size = cache;
                t.cache_index_and_filter = cache_index;
                t.mmap = mmap;
                SCOPED_TRACE(t.ToString());
                SetOptions(t);
                Build(m);
                CheckAgainstModel(m, &rnd);
                if (HasFatalFailure()) return;
                combos++;
              }
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(3 * 3 * 2 * 2 * 5 * 2, combos);
}

TEST_F(TableTest, LargeValuesAndManyBlocks) {
  Random rnd(5);
  Model m;
  for (int i = 0; i < 3000; i++) {
    char key[32];
    snprintf(key, sizeof(key), "key%08d", i);
    m[key] =
        std::string(rnd.OneIn(50) ? 100000 : rnd.Uniform(300), 'a' + i % 26);
  }
  TestOptions t;
  t.cache_size = 1 << 20;
  SetOptions(t);
  Build(m);
  CheckAgainstModel(m, &rnd);
  EXPECT_GT(table_->properties().num_data_blocks, 50u);
}

TEST_F(TableTest, Properties) {
  Random rnd(3);
  const Model m = RandomModel(&rnd, 1000);
  TestOptions t;
  t.block_size = 1024;
  SetOptions(t);
  Build(m, {{"a", "b"}, {"c", "d"}});
  const TableProperties& p = table_->properties();
  EXPECT_EQ(m.size(), p.num_entries);
  EXPECT_EQ(2u, p.num_range_tombstones);
  uint64_t key_bytes = 0, value_bytes = 0;
  for (const auto& [k, v] : m) {
    key_bytes += k.size();
    value_bytes += v.size();
  }
  EXPECT_EQ(key_bytes, p.raw_key_bytes);
  EXPECT_EQ(value_bytes, p.raw_value_bytes);
  EXPECT_GT(p.num_data_blocks, 10u);
  EXPECT_GT(p.data_bytes, 0u);
  EXPECT_GT(p.index_bytes, 0u);
  EXPECT_GE(p.filter_bytes, m.size() * 10 / 8);  // 10 bits per key
  EXPECT_EQ("shale.BytewiseComparator", p.comparator_name);
  EXPECT_EQ("shale.CacheLineBloom.v1", p.filter_policy_name);
  EXPECT_EQ("snappy", p.compression_name);
  EXPECT_EQ(m.begin()->first, p.user_properties.at("shale.test.smallest"));
  EXPECT_GT(table_->ApproximateMemoryUsage(), p.filter_bytes);
}

TEST_F(TableTest, CompressionOnlyWhenItPays) {
  TestOptions t;
  SetOptions(t);
  // Incompressible values: snappy would save nothing, blocks stay raw.
  Random rnd(11);
  Model m;
  for (int i = 0; i < 500; i++) {
    std::string v;
    for (int j = 0; j < 100; j++)
      v.push_back(static_cast<char>(rnd.Uniform(256)));
    m["key" + std::to_string(1000 + i)] = v;
  }
  Build(m);
  const uint64_t raw_size = table_->properties().data_bytes;
  EXPECT_GT(raw_size, table_->properties().raw_value_bytes);
  // Highly compressible values: data on disk is much smaller.
  Model c;
  for (int i = 0; i < 500; i++)
    c["key" + std::to_string(1000 + i)] = std::string(100, 'z');
  Build(c);
  EXPECT_LT(table_->properties().data_bytes, raw_size / 4);
  CheckAgainstModel(c, &rnd);
}

TEST_F(TableTest, RangeTombstones) {
  SetOptions(TestOptions());
  std::vector<std::pair<std::string, std::string>> tombstones = {
      {"m", "p"}, {"a", "c"}, {"x", "z"}, {"d", "e"}, {"a", "b"}};
  Build({{"b", "1"}, {"n", "2"}}, tombstones);
  std::unique_ptr<Iterator> it(
      table_->NewRangeTombstoneIterator(TableReadOptions()));
  std::vector<std::pair<std::string, std::string>> got;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    got.emplace_back(it->key().ToString(), it->value().ToString());
  }
  ASSERT_TRUE(it->status().ok());
  // Sorted by start; equal starts keep insertion order.
  std::vector<std::pair<std::string, std::string>> want = {
      {"a", "c"}, {"a", "b"}, {"d", "e"}, {"m", "p"}, {"x", "z"}};
  EXPECT_EQ(want, got);
  it->Seek("n");
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ("x", it->key().ToString());
  EXPECT_EQ(5u, table_->properties().num_range_tombstones);
  // Point data is unaffected by tombstones (the engine applies them).
  Random rnd(1);
  CheckAgainstModel({{"b", "1"}, {"n", "2"}}, &rnd);
}

TEST_F(TableTest, GlobalSeqno) {
  TestInternalComparator icmp;
  UserKeyFilterPolicy ufilter;
  comparator_ = &icmp;
  filter_policy_ = &ufilter;
  TestOptions t;
  t.block_size = 256;
  t.restart_interval = 4;
  SetOptions(t);
  // An "ingested" file: every key at sequence 0, types 1 (put) and 0.
  Model m;
  for (int i = 0; i < 300; i++) {
    m[IKey("user" + std::to_string(1000 + i), 0, i % 7 == 0 ? 0 : 1)] =
        "v" + std::to_string(i);
  }
  Build(m, {{IKey("user1010", 0, 15), "user1020"}});
  constexpr uint64_t kSeq = 777;
  ASSERT_TRUE(Open(kSeq).ok());

  auto check_trailer = [&](const Slice& k, const std::string& original) {
    ASSERT_EQ(original.size(), k.size());
    ASSERT_EQ(0, memcmp(original.data(), k.data(), k.size() - 8));
    const uint64_t packed = DecodeFixed64(k.data() + k.size() - 8);
    const uint64_t orig = DecodeFixed64(original.data() + original.size() - 8);
    EXPECT_EQ(kSeq, packed >> 8);
    EXPECT_EQ(orig & 0xff, packed & 0xff);
  };

  std::unique_ptr<Iterator> it(table_->NewIterator(TableReadOptions()));
  auto pos = m.begin();
  for (it->SeekToFirst(); it->Valid(); it->Next(), ++pos) {
    check_trailer(it->key(), pos->first);
    EXPECT_EQ(pos->second, it->value().ToString());
  }
  EXPECT_EQ(m.end(), pos);

  // A lookup at a snapshot before kSeq must not see the file's keys: higher
  // sequence numbers sort first, so seeking (user1005, 100) lands after the
  // rewritten (user1005, 777), on the next user key.
  Found before;
  ASSERT_TRUE(table_
                  ->Get(TableReadOptions(), IKey("user1005", 100, 1), &before,
                        &SaveFound)
                  .ok());
  ASSERT_TRUE(before.called);
  EXPECT_EQ("user1006", before.key.substr(0, before.key.size() - 8));
  // At a snapshot after kSeq the file's key is visible.
  Found after;
  ASSERT_TRUE(table_
                  ->Get(TableReadOptions(), IKey("user1005", 1000, 1), &after,
                        &SaveFound)
                  .ok());
  ASSERT_TRUE(after.called);
  check_trailer(after.key, IKey("user1005", 0, 1));
  EXPECT_EQ("v5", after.value);

  // MultiGet sees the same rewritten keys.
  std::vector<std::string> lookups = {IKey("user1001", 1000, 1),
                                      IKey("user1002", 5, 1),
                                      IKey("user1200", 900, 1)};
  std::vector<Slice> keys(lookups.begin(), lookups.end());
  std::vector<Found> found(3);
  std::vector<Status> statuses(3);
  ASSERT_TRUE(table_
                  ->MultiGet(TableReadOptions(), 3, keys.data(), found.data(),
                             &SaveFound, statuses.data())
                  .ok());
  ASSERT_TRUE(found[0].called);
  check_trailer(found[0].key, IKey("user1001", 0, 1));
  ASSERT_TRUE(found[1].called);
  EXPECT_EQ("user1003", found[1].key.substr(0, found[1].key.size() - 8));
  ASSERT_TRUE(found[2].called);
  check_trailer(found[2].key, IKey("user1200", 0, 1));

  // Range tombstones get the sequence number too, keeping their type.
  std::unique_ptr<Iterator> rd(
      table_->NewRangeTombstoneIterator(TableReadOptions()));
  rd->SeekToFirst();
  ASSERT_TRUE(rd->Valid());
  check_trailer(rd->key(), IKey("user1010", 0, 15));
  EXPECT_EQ("user1020", rd->value().ToString());

  // Without the override the stored sequence numbers show.
  ASSERT_TRUE(Open(0).ok());
  std::unique_ptr<Iterator> raw(table_->NewIterator(TableReadOptions()));
  raw->SeekToFirst();
  ASSERT_TRUE(raw->Valid());
  EXPECT_EQ(m.begin()->first, raw->key().ToString());
}

TEST_F(TableTest, FilterSkipsAbsentKeys) {
  TestOptions t;
  t.cache_size = 1 << 20;
  SetOptions(t);
  Model m;
  for (int i = 0; i < 2000; i++) m["present" + std::to_string(i)] = "v";
  Build(m);
  const uint64_t blocks_before = stats_.Get(kSstBlocksRead);
  int called = 0;
  for (int i = 0; i < 2000; i++) {
    Found f;
    ASSERT_TRUE(table_
                    ->Get(TableReadOptions(), "absent" + std::to_string(i), &f,
                          &SaveFound)
                    .ok());
    called += f.called;
  }
  EXPECT_EQ(2000u, stats_.Get(kBloomFilterChecked));
  // About 1% false positives; each read at most one data block.
  EXPECT_GT(stats_.Get(kBloomFilterUseful), 1940u);
  EXPECT_LT(stats_.Get(kSstBlocksRead) - blocks_before, 60u);
  EXPECT_LT(called, 60);
}

TEST_F(TableTest, BlockCacheCounters) {
  TestOptions t;
  t.cache_size = 1 << 20;
  t.filter = false;
  SetOptions(t);
  Model m;
  for (int i = 0; i < 1000; i++)
    m["key" + std::to_string(10000 + i)] = std::string(50, 'v');
  Build(m);
  const uint64_t blocks = table_->properties().num_data_blocks;
  for (int round = 0; round < 2; round++) {
    std::unique_ptr<Iterator> it(table_->NewIterator(TableReadOptions()));
    int n = 0;
    for (it->SeekToFirst(); it->Valid(); it->Next()) n++;
    EXPECT_EQ(1000, n);
  }
  EXPECT_EQ(blocks, stats_.Get(kBlockCacheDataMiss));
  EXPECT_EQ(blocks, stats_.Get(kBlockCacheDataHit));
  EXPECT_EQ(blocks, stats_.Get(kBlockCacheAdd));
  EXPECT_GT(cache_->TotalCharge(), 0u);

  // fill_cache = false reads without adding.
  TableReadOptions no_fill;
  no_fill.fill_cache = false;
  cache_->Prune();
  const uint64_t adds = stats_.Get(kBlockCacheAdd);
  std::unique_ptr<Iterator> it(table_->NewIterator(no_fill));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
  }
  EXPECT_EQ(adds, stats_.Get(kBlockCacheAdd));
}

TEST_F(TableTest, IndexAndFilterInCacheStayBounded) {
  TestOptions t;
  t.cache_size = 64 << 10;
  t.cache_index_and_filter = true;
  t.block_size = 256;
  SetOptions(t);
  Random rnd(8);
  const Model m = RandomModel(&rnd, 3000);
  Build(m);
  // The table itself holds no index or filter.
  EXPECT_LT(table_->ApproximateMemoryUsage(), 1024u);
  CheckAgainstModel(m, &rnd);
  EXPECT_GT(stats_.Get(kBlockCacheIndexHit), 0u);
  EXPECT_GT(stats_.Get(kBlockCacheFilterHit), 0u);
  EXPECT_LE(cache_->TotalCharge(), cache_->Capacity());

  // Closing the table frees its index and filter from the cache.
  Found f;
  ASSERT_TRUE(
      table_->Get(TableReadOptions(), m.begin()->first, &f, &SaveFound).ok());
  const size_t before = cache_->TotalCharge();
  const size_t index_and_filter =
      table_->properties().filter_bytes + table_->properties().index_bytes;
  table_.reset();
  EXPECT_LE(cache_->TotalCharge() + index_and_filter, before);
}

TEST_F(TableTest, ApproximateOffsetOf) {
  TestOptions t;
  t.compression = kNoCompression;
  t.block_size = 1024;
  SetOptions(t);
  Model m;
  for (int i = 0; i < 100; i++) {
    char key[16];
    snprintf(key, sizeof(key), "k%04d", i);
    m[key] = std::string(1000, 'x');
  }
  Build(m);
  uint64_t last = 0;
  for (int i = 0; i < 100; i += 10) {
    char key[16];
    snprintf(key, sizeof(key), "k%04d", i);
    const uint64_t off = table_->ApproximateOffsetOf(key);
    EXPECT_GE(off, last);
    // Each entry is its own block, all of the same size.
    const double per_block = table_->properties().data_bytes / 100.0;
    EXPECT_NEAR(i * per_block, static_cast<double>(off), 1.0) << key;
    last = off;
  }
  EXPECT_EQ(table_->properties().data_bytes, table_->ApproximateOffsetOf("z"));
  EXPECT_EQ(0u, table_->ApproximateOffsetOf(""));
}

TEST_F(TableTest, BadInputToBuilder) {
  SetOptions(TestOptions());
  std::unique_ptr<WritableFile> file;
  ASSERT_TRUE(env_->NewWritableFile(FileName(), &file).ok());
  TableBuilder builder(options_, file.get());
  builder.Add("b", "1");
  builder.Add("a", "2");  // out of order
  EXPECT_TRUE(builder.status().IsInvalidArgument());
  builder.Add("c", "3");  // ignored after the error
  EXPECT_TRUE(builder.Finish().IsInvalidArgument());
  EXPECT_EQ(1u, builder.NumEntries());

  TableBuilder dup(options_, file.get());
  dup.Add("a", "1");
  dup.Add("a", "2");
  EXPECT_TRUE(dup.status().IsInvalidArgument());
  dup.Abandon();

  // An entry too big for a block's 32-bit offsets is refused up front. The
  // value is never read: a Slice over a small buffer with a huge size is
  // enough to hit the check.
  TableBuilder big(options_, file.get());
  const char small[1] = {0};
  big.Add("k", Slice(small, (size_t{1} << 31)));
  EXPECT_TRUE(big.status().IsInvalidArgument());
  EXPECT_EQ(0u, big.NumEntries());
  big.Abandon();
}

TEST_F(TableTest, ComparatorMismatchIsAnError) {
  SetOptions(TestOptions());
  Build({{"a", "1"}});
  TestInternalComparator other;
  options_.comparator = &other;
  Status s = Open();
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(std::string::npos, s.ToString().find("000007.sst"));
}

TEST_F(TableTest, FilterOfAnotherPolicyIsIgnored) {
  SetOptions(TestOptions());
  Model m = {{"a", "1"}, {"b", "2"}};
  Build(m);
  // A reader configured with a policy of another name reads without it.
  UserKeyFilterPolicy same_name;  // same Name(): used
  class OtherPolicy final : public FilterPolicy {
   public:
    const char* Name() const override { return "test.Other"; }
    void CreateFilter(const Slice*, int, std::string*) const override {}
    bool KeyMayMatch(const Slice&, const Slice&) const override {
      ADD_FAILURE() << "filter of another policy consulted";
      return false;
    }
  } other;
  options_.filter_policy = &other;
  ASSERT_TRUE(Open().ok());
  Found f;
  ASSERT_TRUE(table_->Get(TableReadOptions(), "b", &f, &SaveFound).ok());
  EXPECT_TRUE(f.called);
}

// Counts the reads made through a real file.
class CountingFile final : public RandomAccessFile {
 public:
  explicit CountingFile(std::unique_ptr<RandomAccessFile> base)
      : base_(std::move(base)) {}
  Status Read(uint64_t offset, size_t n, Slice* result,
              char* scratch) const override {
    reads_++;
    return base_->Read(offset, n, result, scratch);
  }
  int reads() const { return reads_.load(); }

 private:
  std::unique_ptr<RandomAccessFile> base_;
  mutable std::atomic<int> reads_{0};
};

// Open reads the footer, then the index/properties/metaindex tail, then the
// filter and range-deletion blocks: three reads whatever the table holds.
// A Get then costs one read per data block not in the cache.
TEST_F(TableTest, ReadsPerOpenAndGet) {
  for (bool cache_index : {false, true}) {
    TestOptions t;
    t.cache_size = 1 << 20;
    t.cache_index_and_filter = cache_index;
    SetOptions(t);
    Random rnd(12);
    const Model m = RandomModel(&rnd, 2000);
    Build(m, {{"a", "b"}});
    table_.reset();
    std::unique_ptr<RandomAccessFile> base;
    ASSERT_TRUE(env_->NewRandomAccessFile(FileName(), &base).ok());
    auto counting = std::make_unique<CountingFile>(std::move(base));
    CountingFile* file = counting.get();
    uint64_t size = 0;
    ASSERT_TRUE(env_->GetFileSize(FileName(), &size).ok());
    ASSERT_TRUE(Table::Open(options_, std::move(counting), size, 7, 0,
                            FileName(), &table_)
                    .ok());
    EXPECT_EQ(3, file->reads());
    Found f;
    ASSERT_TRUE(
        table_->Get(TableReadOptions(), m.begin()->first, &f, &SaveFound).ok());
    EXPECT_TRUE(f.called);
    EXPECT_EQ(4, file->reads());  // index and filter came from the cache
    f = Found();
    ASSERT_TRUE(
        table_->Get(TableReadOptions(), m.begin()->first, &f, &SaveFound).ok());
    EXPECT_EQ(4, file->reads());  // the data block too
  }
}

// A forward scan of a cold table reads ahead: far fewer reads than blocks,
// and the same entries as without.
TEST_F(TableTest, ScanReadsAhead) {
  TestOptions t;
  t.block_size = 512;
  t.cache_size = 0;
  SetOptions(t);
  Random rnd(13);
  const Model m = RandomModel(&rnd, 4000);
  Build(m);
  const uint64_t blocks = table_->properties().num_data_blocks;
  ASSERT_GT(blocks, 200u);
  table_.reset();
  std::unique_ptr<RandomAccessFile> base;
  ASSERT_TRUE(env_->NewRandomAccessFile(FileName(), &base).ok());
  auto counting = std::make_unique<CountingFile>(std::move(base));
  CountingFile* file = counting.get();
  uint64_t size = 0;
  ASSERT_TRUE(env_->GetFileSize(FileName(), &size).ok());
  ASSERT_TRUE(Table::Open(options_, std::move(counting), size, 7, 0, FileName(),
                          &table_)
                  .ok());
  const int after_open = file->reads();
  std::unique_ptr<Iterator> it(table_->NewIterator(TableReadOptions()));
  auto pos = m.begin();
  for (it->SeekToFirst(); it->Valid(); it->Next(), ++pos) {
    ASSERT_EQ(pos->first, it->key().ToString());
    ASSERT_EQ(pos->second, it->value().ToString());
  }
  ASSERT_TRUE(it->status().ok());
  ASSERT_EQ(m.end(), pos);
  const int scan_reads = file->reads() - after_open;
  // Three single-block reads, then 8, 16, ... 256 KiB at a time.
  EXPECT_LT(scan_reads, static_cast<int>(blocks / 8)) << blocks << " blocks";
  // Seeking about does not read ahead.
  const int before_seeks = file->reads();
  for (int i = 0; i < 20; i++) {
    auto target = m.begin();
    std::advance(target, rnd.Uniform(m.size()));
    it->Seek(target->first);
    ASSERT_TRUE(it->Valid());
    ASSERT_EQ(target->first, it->key().ToString());
  }
  EXPECT_LE(file->reads() - before_seeks, 20);
}

// Many threads reading one table through a cache small enough to evict
// constantly (index and filter in it too): every answer stays right.
TEST_F(TableTest, ConcurrentReaders) {
  TestOptions t;
  t.block_size = 512;
  t.cache_size = 16 << 10;
  t.cache_index_and_filter = true;
  SetOptions(t);
  Random rnd(31);
  const Model m = RandomModel(&rnd, 3000);
  Build(m);
  std::vector<std::string> keys;
  for (const auto& [k, v] : m) keys.push_back(k);
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int th = 0; th < 4; th++) {
    threads.emplace_back([&, th] {
      Random r(100 + th);
      for (int i = 0; i < 2000; i++) {
        const std::string& k = keys[r.Uniform(keys.size())];
        switch (r.Uniform(3)) {
          case 0: {
            Found f;
            Status s = table_->Get(TableReadOptions(), k, &f, &SaveFound);
            if (!s.ok() || !f.called || f.key != k || f.value != m.at(k)) {
              errors++;
            }
            break;
          }
          case 1: {
            std::unique_ptr<Iterator> it(
                table_->NewIterator(TableReadOptions()));
            it->Seek(k);
            auto pos = m.find(k);
            for (int step = 0; step < 20 && pos != m.end(); step++, ++pos) {
              if (!it->Valid() || it->key() != Slice(pos->first) ||
                  it->value() != Slice(pos->second)) {
                errors++;
                break;
              }
              it->Next();
            }
            break;
          }
          case 2: {
            const size_t base = r.Uniform(keys.size() - 40);
            std::vector<Slice> batch(keys.begin() + base,
                                     keys.begin() + base + 40);
            std::vector<Found> found(batch.size());
            std::vector<Status> statuses(batch.size());
            Status s =
                table_->MultiGet(TableReadOptions(), batch.size(), batch.data(),
                                 found.data(), &SaveFound, statuses.data());
            for (size_t j = 0; j < batch.size(); j++) {
              if (!s.ok() || !found[j].called ||
                  found[j].key != batch[j].ToString()) {
                errors++;
              }
            }
            break;
          }
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(0, errors.load());
  EXPECT_LE(cache_->TotalCharge(), cache_->Capacity());
}

// --------------------------------------------------------------- corruption

class TableCorruptionTest : public TableTest {
 protected:
  void SetUp() override {
    TestOptions t;
    t.block_size = 512;
    t.cache_size = 1 << 20;
    SetOptions(t);
    Random rnd(17);
    model_ = RandomModel(&rnd, 2000);
    Build(model_);
    data_end_ = table_->properties().data_bytes;
    ASSERT_TRUE(ReadFileToString(env_, FileName(), &good_).ok());
    table_.reset();
  }

  Footer ReadFooter() const {
    Footer footer;
    EXPECT_TRUE(footer
                    .DecodeFrom(Slice(
                        good_.data() + good_.size() - Footer::kEncodedLength,
                        Footer::kEncodedLength))
                    .ok());
    return footer;
  }

  void WriteBytes(const std::string& bytes) {
    cache_->Prune();  // no stale good blocks
    ASSERT_TRUE(WriteStringToFile(env_, bytes, FileName(), false).ok());
  }

  // Reads everything every way; returns the first error seen. Fails the
  // test if any value read differs from the model.
  Status ReadAll() {
    Status s = Open();
    if (!s.ok()) return s;
    Status first;
    std::unique_ptr<Iterator> it(table_->NewIterator(TableReadOptions()));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      auto pos = model_.find(it->key().ToString());
      EXPECT_NE(model_.end(), pos) << "invented key";
      if (pos != model_.end()) {
        EXPECT_EQ(pos->second, it->value().ToString());
      }
    }
    if (!it->status().ok()) first = it->status();
    std::vector<std::string> keys;
    for (const auto& [k, v] : model_) keys.push_back(k);
    for (const std::string& k : keys) {
      Found f;
      Status gs = table_->Get(TableReadOptions(), k, &f, &SaveFound);
      if (!gs.ok()) {
        if (first.ok()) first = gs;
        continue;
      }
      if (f.called && f.key == k) {
        EXPECT_EQ(model_.at(k), f.value);
      }
    }
    std::vector<Slice> slices(keys.begin(), keys.end());
    std::vector<Found> found(keys.size());
    std::vector<Status> statuses(keys.size());
    Status ms = table_->MultiGet(TableReadOptions(), keys.size(), slices.data(),
                                 found.data(), &SaveFound, statuses.data());
    for (size_t i = 0; i < keys.size(); i++) {
      if (found[i].called && found[i].key == keys[i]) {
        EXPECT_EQ(model_.at(keys[i]), found[i].value);
      }
    }
    if (first.ok()) first = ms;
    return first;
  }

  void ExpectCorruptionNamingFile(const Status& s, const char* what) {
    EXPECT_TRUE(s.IsCorruption()) << what << ": " << s.ToString();
    EXPECT_NE(std::string::npos, s.ToString().find("000007.sst"))
        << what << ": " << s.ToString();
    EXPECT_NE(std::string::npos, s.ToString().find("offset"))
        << what << ": " << s.ToString();
  }

  Model model_;
  std::string good_;
  uint64_t data_end_ = 0;
};

TEST_F(TableCorruptionTest, FlippedDataBlockByte) {
  // The first data block starts at offset 0.
  for (size_t pos : {size_t{0}, size_t{10}, size_t{200}}) {
    std::string bad = good_;
    bad[pos] ^= 0x40;
    WriteBytes(bad);
    Status s = ReadAll();
    ExpectCorruptionNamingFile(s, "data block");
    EXPECT_NE(std::string::npos, s.ToString().find("offset 0 "))
        << s.ToString();
  }
}

TEST_F(TableCorruptionTest, FlippedIndexByte) {
  const Footer footer = ReadFooter();
  std::string bad = good_;
  bad[footer.index_handle().offset() + 3] ^= 0x01;
  WriteBytes(bad);
  ExpectCorruptionNamingFile(ReadAll(), "index block");
}

TEST_F(TableCorruptionTest, FlippedFooterBytes) {
  for (size_t back = 1; back <= Footer::kEncodedLength; back++) {
    std::string bad = good_;
    bad[bad.size() - back] ^= 0x10;
    WriteBytes(bad);
    Status s = ReadAll();
    ExpectCorruptionNamingFile(s, "footer");
  }
}

TEST_F(TableCorruptionTest, Truncated) {
  for (size_t keep : {size_t{0}, size_t{10}, Footer::kEncodedLength - 1,
                      good_.size() / 2, good_.size() - 1}) {
    WriteBytes(good_.substr(0, keep));
    Status s = ReadAll();
    EXPECT_TRUE(s.IsCorruption()) << keep << ": " << s.ToString();
    EXPECT_NE(std::string::npos, s.ToString().find("000007.sst"))
        << s.ToString();
  }
}

// Any single flipped byte anywhere: never a crash, never a wrong value,
// and (checksums being on) always an error if the flip was read.
TEST_F(TableCorruptionTest, EveryRegionFlipped) {
  Random rnd(23);
  int errors = 0;
  const int kTrials = 150;
  for (int trial = 0; trial < kTrials; trial++) {
    std::string bad = good_;
    const size_t pos = rnd.Uniform(bad.size());
    bad[pos] ^= static_cast<char>(1 + rnd.Uniform(255));
    WriteBytes(bad);
    Status s = ReadAll();
    if (!s.ok()) {
      errors++;
      EXPECT_TRUE(s.IsCorruption()) << pos << ": " << s.ToString();
      EXPECT_NE(std::string::npos, s.ToString().find("000007.sst"));
    }
  }
  // ReadAll reads every block, so every flip is caught (a flip in a filter
  // block is caught at Open, too).
  EXPECT_EQ(kTrials, errors);
}

// With checksums off a flipped byte may change what is read, but must
// never crash or hang (run under ASAN).
TEST_F(TableCorruptionTest, NoChecksumsNeverCrash) {
  Random rnd(29);
  TableReadOptions ro;
  ro.verify_checksums = false;
  for (int trial = 0; trial < 200; trial++) {
    std::string bad = good_;
    // Data blocks only: everything else is verified at Open regardless.
    const size_t pos = rnd.Uniform(data_end_);
    bad[pos] ^= static_cast<char>(1 + rnd.Uniform(255));
    WriteBytes(bad);
    if (!Open().ok()) continue;
    std::unique_ptr<Iterator> it(table_->NewIterator(ro));
    int n = 0;
    for (it->SeekToFirst(); it->Valid() && n < 10000; it->Next()) n++;
    for (it->SeekToLast(); it->Valid() && n < 20000; it->Prev()) n++;
    Found f;
    table_->Get(ro, model_.begin()->first, &f, &SaveFound);
  }
}

}  // namespace shale

namespace shale {

// Files that are not SSTs, or whose footer is well-formed (right magic,
// right checksum) but points anywhere: Open must fail cleanly, never crash
// or allocate absurd amounts.
TEST_F(TableTest, OpenRejectsGarbage) {
  SetOptions(TestOptions());
  Random rnd(77);
  for (int trial = 0; trial < 300; trial++) {
    const size_t size = rnd.Uniform(3000);
    std::string bytes;
    for (size_t i = 0; i < size; i++) {
      bytes.push_back(static_cast<char>(rnd.Uniform(256)));
    }
    if (trial % 2 == 1 && bytes.size() >= Footer::kEncodedLength) {
      // A valid footer whose handles point at random places, some far
      // outside the file.
      Footer footer;
      auto random_handle = [&]() {
        const uint64_t limit = rnd.OneIn(4) ? (uint64_t{1} << 62) : size * 2;
        return BlockHandle(rnd.Uniform(limit + 1), rnd.Uniform(limit + 1));
      };
      footer.set_metaindex_handle(random_handle());
      footer.set_index_handle(random_handle());
      std::string encoded;
      footer.EncodeTo(&encoded);
      bytes.replace(bytes.size() - encoded.size(), encoded.size(), encoded);
    }
    ASSERT_TRUE(WriteStringToFile(env_, bytes, FileName(), false).ok());
    Status s = Open();
    ASSERT_FALSE(s.ok()) << "trial " << trial;
    EXPECT_TRUE(s.IsCorruption()) << s.ToString();
    EXPECT_NE(std::string::npos, s.ToString().find("000007.sst"))
        << s.ToString();
  }
}

}  // namespace shale
