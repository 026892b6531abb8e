// Durability under disk and power faults, through FaultInjectionEnv
// (util/fault_injection_env.h): power loss at random points (everything not
// fsynced is dropped), fsync failure, disk full during flush and during
// compaction, read errors and rename errors. In every case the engine must
// report a clear error, keep serving reads where it can, resume once the
// fault is gone, and lose nothing it acknowledged as durable.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "db/db_test_util.h"
#include "util/fault_injection_env.h"
#include "util/random.h"

namespace shale {
namespace {

using Model = std::map<std::string, std::string>;

class DBPowerLossTest : public test::DBTestBase {
 protected:
  DBPowerLossTest()
      : DBTestBase("db_power_loss_test"), fault_env_(Env::Default()) {
    options_.env = &fault_env_;
    // Tiny buffers and files: flushes and compactions every few dozen
    // writes, so power fails in the middle of them too.
    options_.write_buffer_size = 64 << 10;
    options_.target_file_size_base = 64 << 10;
    options_.max_bytes_for_level_base = 256 << 10;
    options_.level0_file_num_compaction_trigger = 2;
    options_.block_size = 512;
  }
  ~DBPowerLossTest() override { db_.reset(); }  // before fault_env_ goes

  // The machine loses power: nothing more reaches the disk, the process
  // state is gone, and the disk keeps only what was synced.
  void PowerLoss() {
    fault_env_.SetFilesystemActive(false);
    db_.reset();
    ASSERT_TRUE(fault_env_.DropUnsyncedData().ok());
    fault_env_.SetFilesystemActive(true);
  }

  Model Read() {
    Model m;
    std::unique_ptr<DBIter> it(
        db_->NewIterator(ReadOptions(), nullptr, nullptr));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      m[it->key().ToString()] = it->value().ToString();
    }
    EXPECT_TRUE(it->status().ok()) << it->status().ToString();
    return m;
  }

  DBStats Stats() {
    DBStats st;
    db_->GetStats(&st);
    return st;
  }

  static std::string Key(uint64_t i) {
    char buf[16];
    snprintf(buf, sizeof(buf), "key%04d", static_cast<int>(i));
    return buf;
  }

  FaultInjectionEnv fault_env_;
};

// One logged write of the random workload.
struct Op {
  enum Type { kPut, kDelete, kDeleteRange } type;
  std::string key, arg;  // value, or the range's end
};

void Apply(const Op& op, Model* m) {
  switch (op.type) {
    case Op::kPut:
      (*m)[op.key] = op.arg;
      break;
    case Op::kDelete:
      m->erase(op.key);
      break;
    case Op::kDeleteRange:
      m->erase(m->lower_bound(op.key), m->lower_bound(op.arg));
      break;
  }
}

// Random writes (one in ten synced), flushes and compactions, then power
// loss at a random point, many times over. After each reopen the database
// must be the state before the round plus a prefix of the round's writes,
// and the prefix must reach the last synced write: a synced write makes
// itself and everything before it durable; later unsynced writes may be
// lost, but only from the end, and nothing may come back or appear.
TEST_F(DBPowerLossTest, RandomPowerLossKeepsSyncedPrefix) {
  Reopen();
  Random rnd(testing::UnitTest::GetInstance()->random_seed() + 301);
  Model base;
  int lost_total = 0, kept_total = 0;
  for (int round = 0; round < 30; round++) {
    std::vector<Op> ops;
    size_t durable = 0;  // ops[0, durable) must survive
    const int n = 20 + rnd.Uniform(400);
    for (int i = 0; i < n; i++) {
      Op op;
      const uint64_t r = rnd.Uniform(100);
      const std::string k = Key(rnd.Uniform(300));
      WriteBatch b;
      if (r < 70) {
        op = {Op::kPut, k,
              k + "/" + std::to_string(round) + "/" + std::to_string(i) +
                  std::string(rnd.Uniform(200), 'v')};
        b.Put(op.key, op.arg);
      } else if (r < 92) {
        op = {Op::kDelete, k, ""};
        b.Delete(op.key);
      } else {
        op = {Op::kDeleteRange, k, Key(rnd.Uniform(300))};
        if (op.arg < op.key) std::swap(op.key, op.arg);
        b.DeleteRange(op.key, op.arg);
      }
      const bool sync = rnd.OneIn(10);
      ASSERT_TRUE(Write(b, sync).ok()) << "round " << round << " op " << i;
      ops.push_back(op);
      if (sync) durable = ops.size();
      if (rnd.OneIn(150)) {
        ASSERT_TRUE(db_->Flush(false).ok());
      }
    }
    PowerLoss();
    ASSERT_TRUE(TryOpen().ok()) << "round " << round;
    const Model got = Read();
    Model m = base;
    int64_t matched = durable == 0 && m == got ? 0 : -1;
    for (size_t i = 0; i < ops.size(); i++) {
      Apply(ops[i], &m);
      if (i + 1 >= durable && m == got) matched = i + 1;
    }
    ASSERT_GE(matched, 0) << "round " << round << ": after power loss the "
                          << "database is no prefix of the " << ops.size()
                          << " writes reaching the synced one at " << durable;
    kept_total += matched;
    lost_total += ops.size() - matched;
    base = got;
  }
  // Unsynced writes do get lost (else the test proves nothing).
  EXPECT_GT(lost_total, 0);
  EXPECT_GT(kept_total, 0);
}

// Writes acknowledged with sync all survive power loss, across flushes
// and compactions in progress.
TEST_F(DBPowerLossTest, SyncedWritesSurvive) {
  Reopen();
  Model model;
  for (int round = 0; round < 5; round++) {
    for (int i = 0; i < 300; i++) {
      const std::string k = Key((round * 97 + i * 13) % 500);
      const std::string v =
          k + "@" + std::to_string(round) + std::string(50 + i % 100, 'x');
      WriteBatch b;
      b.Put(k, v);
      ASSERT_TRUE(Write(b, /*sync=*/true).ok());
      model[k] = v;
    }
    PowerLoss();
    Reopen();
    ASSERT_EQ(model, Read()) << "round " << round;
  }
}

// SyncWAL (used by the Raft log writer) makes the writes before it as
// durable as a synced write, across WAL switches; a write after the last
// SyncWAL is not durable and power loss drops it.
TEST_F(DBPowerLossTest, SyncWALMakesEarlierWritesSurvive) {
  Reopen();
  Model model;
  for (int round = 0; round < 3; round++) {
    for (int i = 0; i < 300; i++) {
      const std::string k = Key((round * 89 + i * 7) % 500);
      const std::string v =
          k + "#" + std::to_string(round) + std::string(50 + i % 100, 'y');
      WriteBatch b;
      b.Put(k, v);
      ASSERT_TRUE(Write(b, /*sync=*/false).ok());
      model[k] = v;
      if (i % 50 == 49) {
        ASSERT_TRUE(db_->SyncWAL().ok());
      }
    }
    WriteBatch tail;
    tail.Put("zz-unsynced", "lost");
    ASSERT_TRUE(Write(tail, /*sync=*/false).ok());
    PowerLoss();
    Reopen();
    ASSERT_EQ(model, Read()) << "round " << round;
  }
}

// A failed WAL fsync: the write reports the error and is not applied;
// writes stop with an error naming the WAL; reads go on; after the fault is
// gone, Resume() lets writes continue; power loss then keeps everything
// acknowledged.
TEST_F(DBPowerLossTest, FsyncFailureStopsWritesUntilResume) {
  Reopen();
  WriteBatch a;
  a.Put("a", "1");
  ASSERT_TRUE(Write(a, true).ok());
  fault_env_.SetFault(FaultInjectionEnv::kSync,
                      Status::IOError("injected", "fsync: EIO"), ".log");
  WriteBatch b;
  b.Put("b", "2");
  Status s = Write(b, true);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_EQ("NOT_FOUND", Get("b"));  // never acknowledged, never visible
  WriteBatch c;
  c.Put("c", "3");
  s = Write(c, false);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(std::string::npos, s.ToString().find(".log")) << s.ToString();
  EXPECT_EQ("1", Get("a"));
  EXPECT_NE(Status::kOk, Stats().background_error);
  fault_env_.ClearFault();
  ASSERT_TRUE(db_->Resume().ok());
  WriteBatch d;
  d.Put("d", "4");
  ASSERT_TRUE(Write(d, true).ok());
  PowerLoss();
  Reopen();
  EXPECT_EQ("1", Get("a"));
  EXPECT_EQ("NOT_FOUND", Get("b"));
  EXPECT_EQ("NOT_FOUND", Get("c"));
  EXPECT_EQ("4", Get("d"));
}

// The background flush (forced by tiny memtables) hits a full disk while
// writes go on; the first failed write must say so, and everything
// acknowledged before it must stay readable and survive.
TEST_F(DBPowerLossTest, DiskFullDuringFlush) {
  Reopen();
  Model model;
  for (int i = 0; i < 50; i++) {
    WriteBatch b;
    b.Put(Key(i), std::string(100, 'a'));
    ASSERT_TRUE(Write(b, true).ok());
    model[Key(i)] = std::string(100, 'a');
  }
  fault_env_.SetWriteFault(Status::NoSpace("injected", "ENOSPC"), ".sst");
  Status failure;
  int i = 50;
  for (; i < 5000 && failure.ok(); i++) {
    WriteBatch b;
    const std::string v = std::to_string(i) + std::string(200, 'b');
    b.Put(Key(i % 600), v);
    failure = Write(b, true);
    if (failure.ok()) model[Key(i % 600)] = v;
  }
  ASSERT_FALSE(failure.ok()) << "the full disk never stopped writes";
  EXPECT_TRUE(failure.IsNoSpace()) << failure.ToString();
  EXPECT_NE(std::string::npos, failure.ToString().find("flush"))
      << failure.ToString();
  // Reads keep working and see every acknowledged write.
  EXPECT_EQ(model, Read());
  EXPECT_EQ(Status::kNoSpace, Stats().background_error);
  // Space returns: resume, the flush completes, writes go on.
  fault_env_.ClearFault();
  ASSERT_TRUE(db_->Resume().ok());
  ASSERT_TRUE(db_->WaitForCompaction().ok());
  WriteBatch b;
  b.Put("after", "resume");
  ASSERT_TRUE(Write(b, true).ok());
  model["after"] = "resume";
  PowerLoss();
  Reopen();
  EXPECT_EQ(model, Read());
}

TEST_F(DBPowerLossTest, DiskFullDuringCompaction) {
  options_.disable_auto_compactions = true;
  Reopen();
  Model model;
  for (int f = 0; f < 3; f++) {
    for (int i = 0; i < 200; i++) {
      WriteBatch b;
      const std::string v = std::to_string(f) + std::string(60, 'c');
      b.Put(Key(i * 3 + f), v);
      ASSERT_TRUE(Write(b, true).ok());
      model[Key(i * 3 + f)] = v;
    }
    ASSERT_TRUE(db_->Flush(true).ok());
  }
  fault_env_.SetWriteFault(Status::NoSpace("injected", "ENOSPC"), ".sst");
  Status s = db_->CompactRange(nullptr, nullptr);
  EXPECT_TRUE(s.IsNoSpace()) << s.ToString();
  EXPECT_NE(std::string::npos, s.ToString().find("compaction")) << s.ToString();
  // Writes stop with the disk-full error; reads see everything.
  WriteBatch w;
  w.Put("x", "y");
  s = Write(w, true);
  EXPECT_TRUE(s.IsNoSpace()) << s.ToString();
  EXPECT_NE(std::string::npos, s.ToString().find("call resume"))
      << s.ToString();
  EXPECT_EQ(model, Read());
  fault_env_.ClearFault();
  ASSERT_TRUE(db_->Resume().ok());
  ASSERT_TRUE(db_->CompactRange(nullptr, nullptr).ok());
  ASSERT_TRUE(Write(w, true).ok());
  model["x"] = "y";
  EXPECT_EQ(model, Read());
  PowerLoss();
  Reopen();
  EXPECT_EQ(model, Read());
}

// ENOSPC on the WAL itself: the write fails, nothing is applied, and the
// engine resumes once space returns.
TEST_F(DBPowerLossTest, DiskFullOnWal) {
  Reopen();
  WriteBatch a;
  a.Put("a", "1");
  ASSERT_TRUE(Write(a, true).ok());
  fault_env_.SetFault(FaultInjectionEnv::kAppend | FaultInjectionEnv::kSync,
                      Status::NoSpace("injected", "ENOSPC"), ".log");
  WriteBatch b;
  b.Put("b", std::string(100000, 'b'));
  Status s = Write(b, true);
  EXPECT_TRUE(s.IsNoSpace()) << s.ToString();
  EXPECT_EQ("1", Get("a"));
  EXPECT_EQ("NOT_FOUND", Get("b"));
  fault_env_.ClearFault();
  ASSERT_TRUE(db_->Resume().ok());
  ASSERT_TRUE(Write(b, true).ok());
  PowerLoss();
  Reopen();
  EXPECT_EQ("1", Get("a"));
  EXPECT_EQ(100000u, Get("b").size());
}

// A read error is returned as such, is not cached, and leaves no damage.
TEST_F(DBPowerLossTest, ReadErrorIsReportedAndTransient) {
  options_.block_cache_size = 0;
  Reopen();
  for (int i = 0; i < 100; i++) ASSERT_TRUE(Put(Key(i), "v" + Key(i)).ok());
  ASSERT_TRUE(db_->Flush(true).ok());
  Reopen();  // nothing cached
  fault_env_.SetFault(FaultInjectionEnv::kRead,
                      Status::IOError("injected", "EIO"), ".sst");
  std::string v;
  Status s = db_->Get(ReadOptions(), Key(7), &v);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  fault_env_.ClearFault();
  ASSERT_TRUE(db_->Get(ReadOptions(), Key(7), &v).ok());
  EXPECT_EQ("v" + Key(7), v);
}

// A failed rename while installing a new MANIFEST (at open) fails the open
// cleanly; the database opens intact once renames work again.
TEST_F(DBPowerLossTest, RenameFailureFailsOpenCleanly) {
  Reopen();
  ASSERT_TRUE(Put("a", "1").ok());
  Close();
  fault_env_.SetFault(FaultInjectionEnv::kRename,
                      Status::IOError("injected", "rename: EIO"));
  Status s = TryOpen();
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  fault_env_.ClearFault();
  Reopen();
  EXPECT_EQ("1", Get("a"));
}

}  // namespace
}  // namespace shale
