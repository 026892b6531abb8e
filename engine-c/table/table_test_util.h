// Shared fixture and helpers of the table tests (table_test.cc,
// table_corruption_test.cc): builds SSTs from a std::map model on real
// files and checks every way of reading them against it.

#ifndef SHALE_TABLE_TABLE_TEST_UTIL_H_
#define SHALE_TABLE_TABLE_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "table/filter_policy.h"
#include "table/format.h"
#include "table/table.h"
#include "table/table_builder.h"
#include "util/cache.h"
#include "util/coding.h"
#include "util/comparator.h"
#include "util/env.h"
#include "util/random.h"
#include "util/statistics.h"
#include "util/testutil.h"

namespace shale {

using Model = std::map<std::string, std::string>;

// --- Internal-key helpers for the global_seqno tests. The engine's own
// comparator lives in db/; this one orders the same way (user key
// ascending, then trailer descending) so the table layer can be tested on
// its own.
inline std::string IKey(const std::string& user_key, uint64_t seq,
                        uint8_t type) {
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

inline void SaveFound(void* arg, size_t index, const Slice& k, const Slice& v) {
  Found* f = static_cast<Found*>(arg) + index;
  EXPECT_FALSE(f->called) << "callback called twice for index " << index;
  f->called = true;
  f->key = k.ToString();
  f->value = v.ToString();
}

inline Model RandomModel(Random* rnd, int n) {
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
}  // namespace shale

#endif  // SHALE_TABLE_TABLE_TEST_UTIL_H_
