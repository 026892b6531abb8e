// Tests of FaultInjectionEnv's delays (the slow-disk fault): which
// operations they slow, for how long at least, that they stop when
// cleared, and that a whole DB's WAL, SST, MANIFEST and directory syncs go
// through them. Power loss and failing operations are tested with a DB in
// db/db_power_loss_test.cc.

#include "util/fault_injection_env.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "db/db_impl.h"
#include "db/write_batch.h"
#include "util/testutil.h"

namespace shale {
namespace {

using Clock = std::chrono::steady_clock;

class FaultInjectionEnvDelayTest : public testing::Test {
 protected:
  FaultInjectionEnvDelayTest()
      : dir_(test::TempDir("fault_injection_env_delay")),
        env_(Env::Default()) {}
  ~FaultInjectionEnvDelayTest() override { test::RemoveDirRecursively(dir_); }

  std::unique_ptr<WritableFile> NewFile(const std::string& name) {
    std::unique_ptr<WritableFile> f;
    EXPECT_TRUE(env_.NewWritableFile(dir_ + "/" + name, &f).ok());
    return f;
  }

  // How long fn takes.
  template <typename Fn>
  static Clock::duration Time(Fn&& fn) {
    const Clock::time_point start = Clock::now();
    fn();
    return Clock::now() - start;
  }

  const std::string dir_;
  FaultInjectionEnv env_;
};

TEST_F(FaultInjectionEnvDelayTest, SyncSleepsAtLeastTheDelayUntilCleared) {
  std::unique_ptr<WritableFile> f = NewFile("000001.log");
  env_.SetDelay(FaultInjectionEnv::kSync, 20000);

  ASSERT_TRUE(f->Append("x").ok());
  EXPECT_EQ(env_.delays_injected(), 0u) << "an append is not a sync";
  const Clock::duration took = Time([&] { ASSERT_TRUE(f->Sync().ok()); });
  EXPECT_GE(took, std::chrono::milliseconds(20));
  EXPECT_EQ(env_.delays_injected(), 1u);
  ASSERT_TRUE(f->SyncData().ok());
  EXPECT_EQ(env_.delays_injected(), 2u) << "SyncData is a sync too";
  ASSERT_TRUE(env_.SyncDir(dir_).ok());
  EXPECT_EQ(env_.delays_injected(), 3u) << "so is a directory sync";

  env_.ClearDelays();
  ASSERT_TRUE(f->Sync().ok());
  ASSERT_TRUE(env_.SyncDir(dir_).ok());
  EXPECT_EQ(env_.delays_injected(), 3u);
  ASSERT_TRUE(f->Close().ok());
}

TEST_F(FaultInjectionEnvDelayTest, EachKindOfOperationHasItsOwnDelay) {
  env_.SetDelay(FaultInjectionEnv::kAppend, 1000);
  env_.SetDelay(FaultInjectionEnv::kRead, 2000, 1000);
  std::unique_ptr<WritableFile> f = NewFile("000002.sst");
  ASSERT_TRUE(f->Append("abc").ok());  // delayed
  ASSERT_TRUE(f->Sync().ok());         // not: no sync delay
  EXPECT_EQ(env_.delays_injected(), 1u);
  ASSERT_TRUE(f->Close().ok());

  std::unique_ptr<RandomAccessFile> r;
  ASSERT_TRUE(env_.NewRandomAccessFile(dir_ + "/000002.sst", &r, false).ok());
  EXPECT_EQ(env_.delays_injected(), 2u) << "opening for reading is a read";
  char scratch[3];
  Slice got;
  const Clock::duration took =
      Time([&] { ASSERT_TRUE(r->Read(0, 3, &got, scratch).ok()); });
  EXPECT_EQ(got.ToString(), "abc");
  EXPECT_GE(took, std::chrono::milliseconds(2)) << "the delay, jitter aside";
  EXPECT_EQ(env_.delays_injected(), 3u);

  // A delay of 0 removes the delay of those operations only.
  env_.SetDelay(FaultInjectionEnv::kAppend, 0);
  std::unique_ptr<WritableFile> g = NewFile("000003.sst");
  ASSERT_TRUE(g->Append("def").ok());
  EXPECT_EQ(env_.delays_injected(), 3u);
  ASSERT_TRUE(r->Read(0, 3, &got, scratch).ok());
  EXPECT_EQ(env_.delays_injected(), 4u);
  ASSERT_TRUE(g->Close().ok());
}

TEST_F(FaultInjectionEnvDelayTest, NameFilterLimitsTheDelay) {
  env_.SetDelay(FaultInjectionEnv::kSync, 1000, 0, ".sst");
  std::unique_ptr<WritableFile> log = NewFile("000004.log");
  std::unique_ptr<WritableFile> sst = NewFile("000005.sst");
  ASSERT_TRUE(log->Sync().ok());
  EXPECT_EQ(env_.delays_injected(), 0u);
  ASSERT_TRUE(sst->Sync().ok());
  EXPECT_EQ(env_.delays_injected(), 1u);
  ASSERT_TRUE(log->Close().ok());
  ASSERT_TRUE(sst->Close().ok());
}

// Delays set and cleared by one thread while another syncs: every sync
// completes, and each is either delayed or not (no torn settings).
TEST_F(FaultInjectionEnvDelayTest, SetAndClearedFromAnotherThread) {
  std::unique_ptr<WritableFile> f = NewFile("000006.log");
  std::atomic<bool> stop{false};
  std::thread flipper([&] {
    for (int i = 0; !stop.load(); i++) {
      if (i % 2 == 0) {
        env_.SetDelay(FaultInjectionEnv::kSync | FaultInjectionEnv::kAppend,
                      100, 100, i % 4 == 0 ? "" : ".log");
      } else {
        env_.ClearDelays();
      }
      std::this_thread::yield();
    }
  });
  for (int i = 0; i < 500; i++) {
    ASSERT_TRUE(f->Append("y").ok());
    ASSERT_TRUE(f->Sync().ok());
  }
  stop.store(true);
  flipper.join();
  env_.ClearDelays();
  const uint64_t before = env_.delays_injected();
  EXPECT_LE(before, 1000u);  // at most each Append and each Sync
  ASSERT_TRUE(f->Sync().ok());
  EXPECT_EQ(env_.delays_injected(), before);
  ASSERT_TRUE(f->Close().ok());
}

// A DB over the Env: the syncs a synced write, SyncWAL and a flush make
// (WAL, SST, MANIFEST, directory) are all delayed, each seen through a
// filter on its file name.
TEST_F(FaultInjectionEnvDelayTest, DBSyncsAreDelayed) {
  Options options;
  options.env = &env_;
  std::unique_ptr<DBImpl> db;
  ASSERT_TRUE(DBImpl::Open(options, dir_ + "/db", &db).ok());
  WriteBatch b;
  b.Put("k", "v");
  WriteOptions synced;
  synced.sync = true;

  env_.SetDelay(FaultInjectionEnv::kSync, 1000, 0, ".log");
  ASSERT_TRUE(db->Write(synced, b.Data()).ok());
  EXPECT_EQ(env_.delays_injected(), 1u) << "a synced write syncs its WAL";
  ASSERT_TRUE(db->Write(WriteOptions(), b.Data()).ok());
  ASSERT_TRUE(db->SyncWAL().ok());
  EXPECT_EQ(env_.delays_injected(), 2u) << "SyncWAL syncs the WAL";

  env_.SetDelay(FaultInjectionEnv::kSync, 1000, 0, ".sst");
  ASSERT_TRUE(db->Flush(true).ok());
  EXPECT_GE(env_.delays_injected(), 3u) << "a flush syncs its SST";

  uint64_t before = env_.delays_injected();
  env_.SetDelay(FaultInjectionEnv::kSync, 1000, 0, "MANIFEST");
  ASSERT_TRUE(db->Write(synced, b.Data()).ok());
  ASSERT_TRUE(db->Flush(true).ok());
  EXPECT_GT(env_.delays_injected(), before) << "a flush syncs the MANIFEST";

  before = env_.delays_injected();
  env_.SetDelay(FaultInjectionEnv::kSync, 1000, 0, dir_ + "/db");
  ASSERT_TRUE(db->Write(synced, b.Data()).ok());
  ASSERT_TRUE(db->Flush(true).ok());
  // The WAL, the SST, the MANIFEST and the directory, at least.
  EXPECT_GE(env_.delays_injected(), before + 4);

  env_.ClearDelays();
  ASSERT_TRUE(db->Close().ok());
}

}  // namespace
}  // namespace shale
