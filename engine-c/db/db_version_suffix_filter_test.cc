// Tests of filters over versioned keys in a whole database
// (Options::split_version_suffix): a point read of any version of a key
// consults the filter of the unversioned key, so reads of absent keys are
// answered by the filter (the filter-negative counter moves) and present
// keys are never filtered out; keys outside the versioned prefix keep
// whole-key filters; a table built under one setting is read correctly
// under another.

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "db/db_test_util.h"
#include "db/sst_file_writer.h"
#include "util/coding.h"

namespace shale {
namespace {

// A versioned key as the Go mvcc package writes one: the user-key prefix
// 0x03, the key, a 12-byte version and the suffix length byte (13).
std::string Versioned(const std::string& key, uint64_t version) {
  std::string k = "\x03" + key;
  PutFixed64(&k, ~version);
  PutFixed32(&k, 0);
  k.push_back(13);
  return k;
}

// Key i, zero-padded so that byte order is numeric order. Tests write the
// even keys and probe the odd ones, so that every probe falls inside the
// table's key range and reaches its filter.
std::string Key(int i) {
  char buf[16];
  snprintf(buf, sizeof(buf), "key%04d", i);
  return buf;
}

class DBVersionSuffixFilterTest : public test::DBTestBase {
 protected:
  DBVersionSuffixFilterTest() : DBTestBase("db_version_suffix_filter_test") {
    options_.split_version_suffix = true;
    options_.versioned_key_prefix = "\x03";
    Reopen();
  }

  DBStats Stats() {
    DBStats s;
    db_->GetStats(&s);
    return s;
  }

  // The even keys below 2n at versions 10, 20 and 30, flushed into one
  // table.
  void WriteVersions(int n) {
    for (int i = 0; i < 2 * n; i += 2) {
      for (uint64_t v = 10; v <= 30; v += 10) {
        ASSERT_TRUE(Put(Versioned(Key(i), v), "v" + std::to_string(v)).ok());
      }
    }
    ASSERT_TRUE(db_->Flush(true).ok());
  }
};

TEST_F(DBVersionSuffixFilterTest, AbsentKeysAreFilteredAtAnyVersion) {
  WriteVersions(200);
  const DBStats before = Stats();
  int probes = 0;
  for (int i = 1; i < 399; i += 2) {
    for (uint64_t v : {10ull, 15ull, 1000ull}) {
      EXPECT_EQ("NOT_FOUND", Get(Versioned(Key(i), v)));
      probes++;
    }
  }
  const DBStats after = Stats();
  EXPECT_EQ(probes, after.bloom_filter_checked - before.bloom_filter_checked);
  // About 1% false positives at 10 bits per key.
  EXPECT_GE(after.bloom_filter_useful - before.bloom_filter_useful,
            probes * 9 / 10);
}

TEST_F(DBVersionSuffixFilterTest, PresentKeysAreNeverFilteredOut) {
  WriteVersions(200);
  const DBStats before = Stats();
  for (int i = 0; i < 400; i += 2) {
    for (uint64_t v = 10; v <= 30; v += 10) {
      EXPECT_EQ("v" + std::to_string(v), Get(Versioned(Key(i), v)));
    }
    // A version the key does not have: the filter, over the key without
    // its version, must say "maybe"; the table then finds nothing.
    EXPECT_EQ("NOT_FOUND", Get(Versioned(Key(i), 25)));
  }
  const DBStats after = Stats();
  EXPECT_EQ(800u, after.bloom_filter_checked - before.bloom_filter_checked);
  EXPECT_EQ(0u, after.bloom_filter_useful - before.bloom_filter_useful);
}

TEST_F(DBVersionSuffixFilterTest, MultiGetUsesTheSameFilterKeys) {
  WriteVersions(100);
  std::vector<std::string> keys;
  for (int i = 0; i < 198; i += 2) {
    keys.push_back(Versioned(Key(i), 15));      // maybe
    keys.push_back(Versioned(Key(i + 1), 20));  // no
  }
  std::vector<Slice> slices(keys.begin(), keys.end());
  std::vector<std::string> values(keys.size());
  std::vector<Status> statuses(keys.size());
  const DBStats before = Stats();
  db_->MultiGet(ReadOptions(), keys.size(), slices.data(), values.data(),
                statuses.data());
  const DBStats after = Stats();
  for (const Status& s : statuses) EXPECT_TRUE(s.IsNotFound());
  EXPECT_EQ(keys.size(),
            after.bloom_filter_checked - before.bloom_filter_checked);
  const uint64_t useful =
      after.bloom_filter_useful - before.bloom_filter_useful;
  EXPECT_GE(useful, 89u);
  EXPECT_LE(useful, 99u);
}

TEST_F(DBVersionSuffixFilterTest, KeysOutsideThePrefixAreFilteredWhole) {
  const std::string kState = std::string("\x01") + "state";
  // Keys of another kind (e.g. Raft state) whose last byte happens to be a
  // plausible suffix length: the filter must keep all of the key.
  for (int i = 0; i < 100; i++) {
    ASSERT_TRUE(Put(kState + Key(i) + "\x01", "x").ok());
  }
  ASSERT_TRUE(db_->Flush(true).ok());
  const DBStats before = Stats();
  for (int i = 0; i < 100; i++) {
    // Were these keys versioned, the present key's one-byte suffix and
    // this key's two-byte one would both leave "state<key>": one filter
    // key, never filtered out.
    EXPECT_EQ("NOT_FOUND", Get(kState + Key(i) + "\x07\x02"));
  }
  const DBStats after = Stats();
  EXPECT_EQ(99u, after.bloom_filter_checked - before.bloom_filter_checked);
  EXPECT_GE(after.bloom_filter_useful - before.bloom_filter_useful, 89u);
}

TEST_F(DBVersionSuffixFilterTest, OtherSettingsReadTheTableWithoutItsFilter) {
  WriteVersions(50);
  for (int setting = 0; setting < 2; setting++) {
    // Off, then on with another prefix: the table's filter was built on
    // other keys, so it must not be consulted at all.
    options_.split_version_suffix = setting == 1;
    options_.versioned_key_prefix =
        setting == 1 ? std::string("\x03\x00", 2) : "";
    Reopen();
    const DBStats before = Stats();
    for (int i = 0; i < 100; i += 2) {
      EXPECT_EQ("v20", Get(Versioned(Key(i), 20)));
    }
    EXPECT_EQ(0u, Stats().bloom_filter_checked - before.bloom_filter_checked);
  }
  // And back: the filter is used again.
  options_.split_version_suffix = true;
  options_.versioned_key_prefix = "\x03";
  Reopen();
  const DBStats before = Stats();
  EXPECT_EQ("v30", Get(Versioned(Key(8), 30)));
  EXPECT_EQ(1u, Stats().bloom_filter_checked - before.bloom_filter_checked);
}

TEST_F(DBVersionSuffixFilterTest, IngestedTablesFilterOnTheUnversionedKey) {
  const std::string path = dbname_ + "/ingest.sst";
  std::unique_ptr<SstFileWriter> w;
  ASSERT_TRUE(SstFileWriter::Open(options_, path, &w).ok());
  for (int i = 0; i < 200; i += 2) {
    for (uint64_t v = 3; v >= 1; v--) {
      ASSERT_TRUE(w->Put(Versioned(Key(i), v), "x").ok());
    }
  }
  uint64_t size = 0;
  ASSERT_TRUE(w->Finish(&size).ok());
  ASSERT_TRUE(db_->Ingest({path}).ok());
  const DBStats before = Stats();
  EXPECT_EQ("x", Get(Versioned(Key(42), 2)));
  EXPECT_EQ("NOT_FOUND", Get(Versioned(Key(42), 5)));
  EXPECT_EQ(2u, Stats().bloom_filter_checked - before.bloom_filter_checked);
  EXPECT_EQ(0u, Stats().bloom_filter_useful - before.bloom_filter_useful);
  for (int i = 1; i < 199; i += 2) {
    EXPECT_EQ("NOT_FOUND", Get(Versioned(Key(i), 2)));
  }
  EXPECT_GE(Stats().bloom_filter_useful - before.bloom_filter_useful, 89u);
}

TEST(VersionSuffixOptionsTest, RejectsABadPrefix) {
  Options o;
  o.split_version_suffix = true;
  o.versioned_key_prefix = std::string(17, 'p');
  EXPECT_TRUE(o.Validate().IsInvalidArgument());
  o.versioned_key_prefix = std::string(16, 'p');
  EXPECT_TRUE(o.Validate().ok());
  o.split_version_suffix = false;
  EXPECT_TRUE(o.Validate().IsInvalidArgument());
}

}  // namespace
}  // namespace shale
