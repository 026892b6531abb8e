// Tests of the table reader on damaged files: flipped bytes in data blocks,
// the index and the footer, truncation, garbage, and footers pointing
// anywhere. Errors must be Corruption naming the file and offset - never a
// crash, a hang or a wrong value.

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "table/format.h"
#include "table/table.h"
#include "table/table_test_util.h"

namespace shale {

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
