// Tests of the C API's buffer contracts from C++ (the plain-C test,
// c_api_test.c, covers the rest): next_batch limits and encoding, MultiGet
// packing, and status messages.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "db/write_batch.h"
#include "shale/engine.h"
#include "util/coding.h"
#include "util/testutil.h"

namespace shale {
namespace {

class CApiTest : public testing::Test {
 protected:
  CApiTest() : dir_(test::TempDir("c_api_gtest")) {
    shale_options_t opts;
    shale_options_init(&opts);
    shale_status_t s = shale_open(&opts, (dir_ + "/db").c_str(), &db_);
    EXPECT_EQ(SHALE_OK, s.code) << (s.message ? s.message : "");
    shale_free(s.message);
  }
  ~CApiTest() override {
    if (db_ != nullptr) {
      shale_status_t s = shale_close(db_);
      EXPECT_EQ(SHALE_OK, s.code);
      shale_free(s.message);
    }
    test::RemoveDirRecursively(dir_);
  }

  void Write(const WriteBatch& b) {
    shale_write_options_t wo = {0, 0, 0};
    shale_status_t s =
        shale_write(db_, &wo, reinterpret_cast<const uint8_t*>(b.Data().data()),
                    b.Data().size());
    ASSERT_EQ(SHALE_OK, s.code) << (s.message ? s.message : "");
  }

  std::string dir_;
  shale_db_t* db_ = nullptr;
};

TEST_F(CApiTest, NextBatchHonoursMaxEntriesAndEncoding) {
  WriteBatch b;
  for (int i = 0; i < 10; i++) {
    b.Put("key" + std::to_string(i), std::string(i, 'v'));
  }
  Write(b);
  shale_read_options_t ro;
  shale_read_options_init(&ro);
  shale_iterator_t* it = nullptr;
  ASSERT_EQ(SHALE_OK,
            shale_iter_new(db_, &ro, nullptr, 0, nullptr, 0, &it).code);
  shale_iter_seek_to_first(it);
  std::vector<uint8_t> buf(4096);
  size_t n = 0, used = 0;
  uint8_t valid = 0;
  shale_status_t s = shale_iter_next_batch(it, 0, 3, buf.data(), buf.size(), &n,
                                           &used, &valid);
  ASSERT_EQ(SHALE_OK, s.code);
  EXPECT_EQ(3u, n);
  EXPECT_EQ(1, valid);
  size_t off = 0;
  for (int i = 0; i < 3; i++) {
    const uint32_t kl = DecodeFixed32(reinterpret_cast<char*>(&buf[off]));
    const uint32_t vl = DecodeFixed32(reinterpret_cast<char*>(&buf[off + 4]));
    EXPECT_EQ("key" + std::to_string(i),
              std::string(reinterpret_cast<char*>(&buf[off + 8]), kl));
    EXPECT_EQ(static_cast<uint32_t>(i), vl);
    off += 8 + kl + vl;
  }
  EXPECT_EQ(off, used);
  // The iterator is left on the first entry not emitted.
  s = shale_iter_next_batch(it, 0, 100, buf.data(), buf.size(), &n, &used,
                            &valid);
  ASSERT_EQ(SHALE_OK, s.code);
  EXPECT_EQ(7u, n);
  EXPECT_EQ(0, valid);
  EXPECT_EQ("key3", std::string(reinterpret_cast<char*>(&buf[8]), 4));
  // An exhausted iterator yields nothing.
  s = shale_iter_next_batch(it, 0, 100, buf.data(), buf.size(), &n, &used,
                            &valid);
  EXPECT_EQ(SHALE_OK, s.code);
  EXPECT_EQ(0u, n);
  // max_entries 0 moves nothing.
  shale_iter_seek_to_last(it);
  s = shale_iter_next_batch(it, SHALE_ITER_REVERSE, 0, buf.data(), buf.size(),
                            &n, &used, &valid);
  EXPECT_EQ(0u, n);
  EXPECT_EQ(1, valid);
  shale_iter_free(it);
}

TEST_F(CApiTest, ErrorsCarryMessages) {
  std::string bad = "0123456789ab\x01";  // header, then a truncated Put
  EncodeFixed32(&bad[8], 1);
  shale_write_options_t wo = {0, 0, 0};
  shale_status_t s = shale_write(
      db_, &wo, reinterpret_cast<const uint8_t*>(bad.data()), bad.size());
  EXPECT_EQ(SHALE_CORRUPTION, s.code);
  ASSERT_NE(nullptr, s.message);
  EXPECT_NE(nullptr, strstr(s.message, "truncated Put record at offset 12"))
      << s.message;
  shale_free(s.message);
  // A plain miss carries no message (and allocates none).
  shale_read_options_t ro;
  shale_read_options_init(&ro);
  size_t len;
  s = shale_get(db_, &ro, reinterpret_cast<const uint8_t*>("nope"), 4, nullptr,
                0, &len);
  EXPECT_EQ(SHALE_NOT_FOUND, s.code);
  EXPECT_EQ(nullptr, s.message);
}

TEST_F(CApiTest, MultiGetRejectsBadOffsets) {
  const char keys[] = "abc";
  size_t offsets[] = {0, 2, 1};
  uint8_t values[16];
  size_t value_offsets[2], value_lens[2];
  int32_t statuses[2];
  shale_read_options_t ro;
  shale_read_options_init(&ro);
  shale_status_t s = shale_multi_get(
      db_, &ro, 2, reinterpret_cast<const uint8_t*>(keys), offsets, values,
      sizeof(values), value_offsets, value_lens, statuses);
  EXPECT_EQ(SHALE_INVALID_ARGUMENT, s.code);
  shale_free(s.message);
}

TEST_F(CApiTest, VersionSuffixOptions) {
  shale_options_t opts;
  shale_options_init(&opts);
  EXPECT_EQ(0, opts.split_version_suffix);
  EXPECT_EQ(0, opts.versioned_key_prefix_len);
  // A prefix longer than the array, and a prefix without the setting.
  opts.split_version_suffix = 1;
  opts.versioned_key_prefix_len = SHALE_MAX_VERSIONED_KEY_PREFIX + 1;
  shale_db_t* db = nullptr;
  shale_status_t s = shale_open(&opts, (dir_ + "/vs").c_str(), &db);
  EXPECT_EQ(SHALE_INVALID_ARGUMENT, s.code);
  EXPECT_EQ(nullptr, db);
  shale_free(s.message);
  opts.split_version_suffix = 0;
  opts.versioned_key_prefix_len = 1;
  opts.versioned_key_prefix[0] = 0x03;
  s = shale_open(&opts, (dir_ + "/vs").c_str(), &db);
  EXPECT_EQ(SHALE_INVALID_ARGUMENT, s.code);
  shale_free(s.message);
  // Both set: the database opens, and a table's filter answers a read of
  // an absent key at any version.
  opts.split_version_suffix = 1;
  s = shale_open(&opts, (dir_ + "/vs").c_str(), &db);
  ASSERT_EQ(SHALE_OK, s.code) << (s.message ? s.message : "");
  const std::string present = "\x03k1\x09\x02";  // version "\x09"
  const std::string absent = "\x03k2\x09\x02";
  const std::string other_version = "\x03k1\x0a\x02";
  WriteBatch b;
  b.Put(present, "v");
  b.Put("\x03k3\x09\x02", "v");
  shale_write_options_t wo = {0, 0, 0};
  s = shale_write(db, &wo, reinterpret_cast<const uint8_t*>(b.Data().data()),
                  b.Data().size());
  ASSERT_EQ(SHALE_OK, s.code);
  ASSERT_EQ(SHALE_OK, shale_flush(db, 1).code);
  shale_read_options_t ro;
  shale_read_options_init(&ro);
  size_t len;
  shale_stats_t before, after;
  ASSERT_EQ(SHALE_OK, shale_get_stats(db, &before).code);
  for (const std::string& k : {absent, other_version}) {
    s = shale_get(db, &ro, reinterpret_cast<const uint8_t*>(k.data()), k.size(),
                  nullptr, 0, &len);
    EXPECT_EQ(SHALE_NOT_FOUND, s.code);
  }
  ASSERT_EQ(SHALE_OK, shale_get_stats(db, &after).code);
  EXPECT_EQ(2u, after.bloom_filter_checked - before.bloom_filter_checked);
  // The absent key only: the other version of k1 shares its filter key.
  EXPECT_EQ(1u, after.bloom_filter_useful - before.bloom_filter_useful);
  ASSERT_EQ(SHALE_OK, shale_close(db).code);
}

// A versioned key for the floor tests: key, ~ts big-endian, length byte 9.
std::string VKey(const std::string& key, uint64_t ts) {
  std::string k = key;
  for (int i = 7; i >= 0; i--) k.push_back(static_cast<char>(~ts >> (8 * i)));
  k.push_back(9);
  return k;
}

TEST_F(CApiTest, VersionFloorYieldsEachKeysVisibleVersion) {
  shale_options_t opts;
  shale_options_init(&opts);
  opts.split_version_suffix = 1;
  opts.versioned_key_prefix_len = 1;
  opts.versioned_key_prefix[0] = 0x03;
  shale_db_t* db = nullptr;
  shale_status_t s = shale_open(&opts, (dir_ + "/floor").c_str(), &db);
  ASSERT_EQ(SHALE_OK, s.code) << (s.message ? s.message : "");
  // Key i has versions at ts 1..3*i (0 for none); plus keys outside the
  // prefix, which pass as they are.
  WriteBatch b;
  std::vector<std::string> want;
  const uint64_t floor_ts = 20;
  for (int i = 0; i < 12; i++) {
    const std::string key = "\x03k" + std::to_string(100 + i);
    for (uint64_t ts = 1; ts <= 3 * static_cast<uint64_t>(i); ts++) {
      b.Put(VKey(key, ts), "v" + std::to_string(ts));
    }
    if (i > 0) want.push_back(VKey(key, std::min<uint64_t>(3 * i, floor_ts)));
  }
  b.Put("\x04raw1", "x");
  b.Put("\x04raw2", "x");
  want.push_back("\x04raw1");
  want.push_back("\x04raw2");
  shale_write_options_t wo = {0, 0, 0};
  ASSERT_EQ(
      SHALE_OK,
      shale_write(db, &wo, reinterpret_cast<const uint8_t*>(b.Data().data()),
                  b.Data().size())
          .code);
  shale_read_options_t ro;
  shale_read_options_init(&ro);
  const std::string floor = VKey("", floor_ts);
  for (size_t per_batch : {1, 2, 7, 1000}) {
    shale_iterator_t* it = nullptr;
    ASSERT_EQ(SHALE_OK,
              shale_iter_new(db, &ro, nullptr, 0, nullptr, 0, &it).code);
    ASSERT_EQ(SHALE_OK, shale_iter_set_version_floor(
                            it, reinterpret_cast<const uint8_t*>(floor.data()),
                            floor.size())
                            .code);
    shale_iter_seek_to_first(it);
    std::vector<std::string> got;
    uint8_t buf[4096];
    uint8_t valid = 1;
    while (valid) {
      size_t n = 0, used = 0;
      s = shale_iter_next_batch(it, 0, per_batch, buf, sizeof(buf), &n, &used,
                                &valid);
      ASSERT_EQ(SHALE_OK, s.code);
      for (size_t off = 0, i = 0; i < n; i++) {
        const uint32_t kl = DecodeFixed32(reinterpret_cast<char*>(buf) + off);
        const uint32_t vl =
            DecodeFixed32(reinterpret_cast<char*>(buf) + off + 4);
        got.emplace_back(reinterpret_cast<char*>(buf) + off + 8, kl);
        off += 8 + kl + vl;
      }
    }
    EXPECT_EQ(want, got) << "batches of " << per_batch;
    // Reverse batches are refused while a floor is set.
    shale_iter_seek_to_last(it);
    size_t n = 0, used = 0;
    s = shale_iter_next_batch(it, SHALE_ITER_REVERSE, 10, buf, sizeof(buf), &n,
                              &used, &valid);
    EXPECT_EQ(SHALE_INVALID_ARGUMENT, s.code);
    shale_free(s.message);
    shale_iter_free(it);
  }
  ASSERT_EQ(SHALE_OK, shale_close(db).code);

  // A floor on a database without split_version_suffix is refused.
  shale_iterator_t* it = nullptr;
  ASSERT_EQ(SHALE_OK,
            shale_iter_new(db_, &ro, nullptr, 0, nullptr, 0, &it).code);
  s = shale_iter_set_version_floor(
      it, reinterpret_cast<const uint8_t*>(floor.data()), floor.size());
  EXPECT_EQ(SHALE_NOT_SUPPORTED, s.code);
  shale_free(s.message);
  shale_iter_free(it);
}

}  // namespace
}  // namespace shale
