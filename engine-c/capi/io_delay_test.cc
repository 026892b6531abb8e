// Tests of the C API's test-only slow disk: shale_open with fault_injection
// and shale_set_io_delay.

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>

#include "db/write_batch.h"
#include "shale/engine.h"
#include "util/testutil.h"

namespace shale {
namespace {

using Clock = std::chrono::steady_clock;

class CApiIoDelayTest : public testing::Test {
 protected:
  CApiIoDelayTest() : dir_(test::TempDir("c_api_io_delay")) {}
  ~CApiIoDelayTest() override {
    if (db_ != nullptr) {
      shale_status_t s = shale_close(db_);
      EXPECT_EQ(SHALE_OK, s.code);
      shale_free(s.message);
    }
    test::RemoveDirRecursively(dir_);
  }

  void Open(bool fault_injection) {
    shale_options_t opts;
    shale_options_init(&opts);
    EXPECT_EQ(0, opts.fault_injection) << "off unless asked for";
    opts.fault_injection = fault_injection ? 1 : 0;
    shale_status_t s = shale_open(&opts, (dir_ + "/db").c_str(), &db_);
    ASSERT_EQ(SHALE_OK, s.code) << (s.message ? s.message : "");
  }

  // Writes one record, synced; returns how long it took.
  Clock::duration SyncedPut() {
    WriteBatch b;
    b.Put("k", "v");
    shale_write_options_t wo = {1, 0, 0};
    const Clock::time_point start = Clock::now();
    shale_status_t s =
        shale_write(db_, &wo, reinterpret_cast<const uint8_t*>(b.Data().data()),
                    b.Data().size());
    const Clock::duration took = Clock::now() - start;
    EXPECT_EQ(SHALE_OK, s.code) << (s.message ? s.message : "");
    shale_free(s.message);
    return took;
  }

  // shale_set_io_delay's status code; its message must be there on error.
  int32_t SetDelay(uint32_t ops, uint64_t delay, uint64_t jitter) {
    shale_status_t s = shale_set_io_delay(db_, ops, delay, jitter);
    if (s.code != SHALE_OK) {
      EXPECT_NE(nullptr, s.message);
      if (s.message != nullptr) last_error_ = s.message;
    }
    shale_free(s.message);
    return s.code;
  }

  std::string dir_;
  shale_db_t* db_ = nullptr;
  std::string last_error_;
};

TEST_F(CApiIoDelayTest, RefusedWithoutFaultInjection) {
  Open(false);
  EXPECT_EQ(SHALE_NOT_SUPPORTED, SetDelay(SHALE_IO_SYNC, 1000, 0));
  EXPECT_NE(std::string::npos, last_error_.find("fault_injection"))
      << last_error_;
}

TEST_F(CApiIoDelayTest, SyncDelaySlowsSyncedWritesAndSyncWal) {
  Open(true);
  ASSERT_EQ(SHALE_OK, SetDelay(SHALE_IO_SYNC, 30000, 10000));
  EXPECT_GE(SyncedPut(), std::chrono::milliseconds(30));
  const Clock::time_point start = Clock::now();
  shale_status_t s = shale_sync_wal(db_);
  ASSERT_EQ(SHALE_OK, s.code) << (s.message ? s.message : "");
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(30));

  // Clearing it, and bad input, which changes nothing.
  ASSERT_EQ(SHALE_OK, SetDelay(SHALE_IO_SYNC, 0, 0));
  EXPECT_EQ(SHALE_INVALID_ARGUMENT, SetDelay(1u << 7, 1000, 0));
  EXPECT_NE(std::string::npos, last_error_.find("unknown operation bits"))
      << last_error_;
  EXPECT_EQ(SHALE_INVALID_ARGUMENT,
            SetDelay(SHALE_IO_SYNC, SHALE_MAX_IO_DELAY_MICROS, 1));
  EXPECT_NE(std::string::npos, last_error_.find("60 s")) << last_error_;
  EXPECT_EQ(SHALE_INVALID_ARGUMENT, SetDelay(SHALE_IO_SYNC, UINT64_MAX, 0));

  // The data is intact and readable.
  shale_read_options_t ro;
  shale_read_options_init(&ro);
  char value[4];
  size_t len = 0;
  s = shale_get(db_, &ro, reinterpret_cast<const uint8_t*>("k"), 1,
                reinterpret_cast<uint8_t*>(value), sizeof(value), &len);
  ASSERT_EQ(SHALE_OK, s.code);
  EXPECT_EQ("v", std::string(value, len));
}

}  // namespace
}  // namespace shale
