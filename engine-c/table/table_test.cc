// Tests of TableBuilder and Table on real files: round trips under option
// combinations, Get and MultiGet agreeing with iteration, range tombstones,
// global sequence numbers, properties, statistics, reads and concurrency.
// Corruption is in table_corruption_test.cc.

#include "table/table.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "table/table_test_util.h"

namespace shale {

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

// A real file that runs out of space after limit bytes, as a full disk does.
class FullDiskFile final : public WritableFile {
 public:
  FullDiskFile(std::unique_ptr<WritableFile> base, uint64_t limit)
      : base_(std::move(base)), limit_(limit) {}
  Status Append(const Slice& data) override {
    if (base_->Size() + data.size() > limit_) {
      return Status::NoSpace(base_->Name(), "No space left on device");
    }
    return base_->Append(data);
  }
  Status Flush() override { return base_->Flush(); }
  Status Sync() override { return base_->Sync(); }
  Status Close() override { return base_->Close(); }
  uint64_t Size() const override { return base_->Size(); }
  const std::string& Name() const override { return base_->Name(); }

 private:
  std::unique_ptr<WritableFile> base_;
  const uint64_t limit_;
};

// Running out of space anywhere in the file (data blocks, filter, index,
// footer) surfaces as NoSpace from Finish, and the builder stops writing.
TEST_F(TableTest, FullDiskIsReported) {
  SetOptions(TestOptions());
  Random rnd(21);
  const Model m = RandomModel(&rnd, 3000);
  Build(m);
  const uint64_t full_size = table_->properties().data_bytes;
  table_.reset();
  for (uint64_t limit : {uint64_t{0}, uint64_t{100}, full_size / 2, full_size,
                         full_size + 100}) {
    std::unique_ptr<WritableFile> base;
    ASSERT_TRUE(env_->NewWritableFile(FileName(), &base).ok());
    FullDiskFile file(std::move(base), limit);
    TableBuilder builder(options_, &file);
    for (const auto& [k, v] : m) builder.Add(k, v);
    const Status s = builder.Finish();
    EXPECT_TRUE(s.IsNoSpace()) << limit << ": " << s.ToString();
    EXPECT_NE(std::string::npos, s.ToString().find("000007.sst"));
    EXPECT_LE(file.Size(), limit);
    ASSERT_TRUE(file.Close().ok());
    // What was written is not a table.
    EXPECT_FALSE(Open().ok());
  }
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

}  // namespace shale
