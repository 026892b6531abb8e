// WALs retired by a memtable switch are not synced (db_impl.h,
// retired_wals_): if their memtable is flushed before the kernel writes
// them back, their bytes never reach the device. These tests hold the flush
// of the first memtable, so the retired WAL stays live, and then lose power
// in different ways. What docs/durability.md promises must still hold: a
// synced write (or SyncWAL) makes every earlier write durable, and after a
// power loss the database is a prefix of the acknowledged writes.

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "db/db_test_util.h"
#include "db/filename.h"
#include "util/fault_injection_env.h"

namespace shale {
namespace {

class DBRetiredWalTest : public test::DBTestBase {
 protected:
  DBRetiredWalTest()
      : DBTestBase("db_wal_retire_test"),
        fault_env_(Env::Default()),
        gate_(&fault_env_) {
    options_.env = &gate_;
    options_.write_buffer_size = 64 << 10;
    // Room for the held memtable and the next ones: writes never stop.
    options_.max_write_buffer_number = 4;
  }
  ~DBRetiredWalTest() override {
    gate_.Release();
    db_.reset();  // before the Envs go
  }

  static std::string Key(int i) {
    char buf[16];
    snprintf(buf, sizeof(buf), "key%06d", i);
    return buf;
  }
  static std::string Value(int i) { return Key(i) + std::string(100, 'v'); }

  // Opens the database with every SST creation held (so the first
  // memtable's flush waits), then writes keys 0, 1, ... unsynced until the
  // memtable has switched once, and extra more. Returns how many keys were
  // written in all; *first_in_new is the first key in the new WAL.
  int FillAcrossSwitch(int extra, int* first_in_new) {
    Reopen();
    gate_.HoldAfter(0);
    int n = 0;
    while (true) {
      DBStats st;
      db_->GetStats(&st);
      if (st.num_immutable_memtables > 0) break;
      EXPECT_TRUE(Put(Key(n), Value(n)).ok());
      n++;
      if (n > 100000) {
        ADD_FAILURE() << "the memtable never switched";
        return n;
      }
    }
    // The write that found the memtable full switched it first.
    *first_in_new = n - 1;
    for (int i = 0; i < extra; i++, n++) {
      EXPECT_TRUE(Put(Key(n), Value(n)).ok());
    }
    return n;
  }

  // The power goes off: the held flush is let go into a dead disk and the
  // process state is gone. drop: the disk then keeps only what was synced
  // (otherwise everything written stays, as if the kernel had written it
  // all back, and the test damages files itself).
  void PowerOff(bool drop) {
    fault_env_.SetFilesystemActive(false);
    gate_.Release();
    db_.reset();
    if (drop) {
      ASSERT_TRUE(fault_env_.DropUnsyncedData().ok());
    }
    fault_env_.SetFilesystemActive(true);
  }

  // The WAL files in the database directory, oldest first.
  std::vector<std::string> Wals() {
    std::vector<std::string> children;
    EXPECT_TRUE(env_->GetChildren(dbname_, &children).ok());
    std::vector<std::pair<uint64_t, std::string>> logs;
    for (const std::string& c : children) {
      uint64_t number;
      FileType type;
      if (ParseFileName(c, &number, &type) && type == FileType::kLogFile) {
        logs.emplace_back(number, LogFileName(dbname_, number));
      }
    }
    std::sort(logs.begin(), logs.end());
    std::vector<std::string> r;
    for (auto& l : logs) r.push_back(l.second);
    return r;
  }

  // How many of keys 0 .. n-1 the database holds; fails the test unless
  // they are a prefix (keys 0 .. k-1 for some k).
  int PrefixHeld(int n) {
    int held = 0;
    bool gap = false;
    for (int i = 0; i < n; i++) {
      std::string v;
      const Status s = db_->Get(ReadOptions(), Key(i), &v);
      if (s.ok()) {
        EXPECT_FALSE(gap) << Key(i) << " survived, but an earlier key did not";
        EXPECT_EQ(Value(i), v);
        held++;
      } else {
        EXPECT_TRUE(s.IsNotFound()) << s.ToString();
        gap = true;
      }
    }
    return held;
  }

  FaultInjectionEnv fault_env_;
  test::SstGateEnv gate_;
};

// The switch leaves the old WAL to the page cache: a power loss before its
// memtable is flushed drops it (as RocksDB's does), and what is left is
// still a prefix.
TEST_F(DBRetiredWalTest, SwitchDoesNotSyncTheOldWal) {
  int first_in_new = 0;
  const int n = FillAcrossSwitch(20, &first_in_new);
  ASSERT_GT(first_in_new, 100);
  PowerOff(/*drop=*/true);
  Reopen();
  ASSERT_NE(nullptr, db_);
  EXPECT_EQ(0, PrefixHeld(n));
}

// A synced write after the switch syncs the retired WAL first: every
// write acknowledged before it survives.
TEST_F(DBRetiredWalTest, SyncedWriteSyncsRetiredWals) {
  int first_in_new = 0;
  int n = FillAcrossSwitch(20, &first_in_new);
  WriteBatch b;
  b.Put(Key(n), Value(n));
  ASSERT_TRUE(Write(b, /*sync=*/true).ok());
  n++;
  PowerOff(/*drop=*/true);
  Reopen();
  ASSERT_NE(nullptr, db_);
  EXPECT_EQ(n, PrefixHeld(n));
}

// SyncWAL (the Raft log's sync) does the same.
TEST_F(DBRetiredWalTest, SyncWALSyncsRetiredWals) {
  int first_in_new = 0;
  const int n = FillAcrossSwitch(20, &first_in_new);
  ASSERT_TRUE(db_->SyncWAL().ok());
  PowerOff(/*drop=*/true);
  Reopen();
  ASSERT_NE(nullptr, db_);
  EXPECT_EQ(n, PrefixHeld(n));
}

// The kernel wrote the new WAL back but not all of the old one: the old WAL
// ends in a torn record. Recovery must not take the damage for corruption
// (the new WAL's opening record says the old one was cut short), and must
// not replay the new WAL either: the database is the prefix in the old one.
TEST_F(DBRetiredWalTest, OldWalTornWhileNewWalSurvivedKeepsAPrefix) {
  int first_in_new = 0;
  const int n = FillAcrossSwitch(50, &first_in_new);
  PowerOff(/*drop=*/false);
  const std::vector<std::string> wals = Wals();
  ASSERT_EQ(2u, wals.size());
  uint64_t size = 0;
  ASSERT_TRUE(env_->GetFileSize(wals[0], &size).ok());
  ASSERT_TRUE(env_->TruncateFile(wals[0], size / 2 + 7).ok());
  Reopen();
  ASSERT_NE(nullptr, db_);
  const int held = PrefixHeld(n);
  EXPECT_GT(held, 0);
  EXPECT_LT(held, first_in_new);
}

// The same with the old WAL lost whole (never written back at all): a cut
// on a record boundary, which only the opening record reveals.
TEST_F(DBRetiredWalTest, OldWalLostWhileNewWalSurvivedKeepsAPrefix) {
  int first_in_new = 0;
  const int n = FillAcrossSwitch(50, &first_in_new);
  PowerOff(/*drop=*/false);
  const std::vector<std::string> wals = Wals();
  ASSERT_EQ(2u, wals.size());
  ASSERT_TRUE(env_->TruncateFile(wals[0], 0).ok());
  Reopen();
  ASSERT_NE(nullptr, db_);
  EXPECT_EQ(0, PrefixHeld(n));
}

// Damage at the end of an older WAL that the next WAL does not explain (it
// opens where the older one now ends, and holds records after it) is
// corruption, not a power loss: the open fails, naming the file.
TEST_F(DBRetiredWalTest, TornOldWalWithoutALaterCutIsCorruption) {
  int first_in_new = 0;
  FillAcrossSwitch(50, &first_in_new);
  PowerOff(/*drop=*/false);
  const std::vector<std::string> wals = Wals();
  ASSERT_EQ(2u, wals.size());
  // Garbage after the old WAL's last record: its records all survive, so
  // the new WAL's opening record matches, yet the old one ends in damage.
  std::unique_ptr<WritableFile> f;
  ASSERT_TRUE(env_->NewAppendableFile(wals[0], &f).ok());
  ASSERT_TRUE(f->Append(std::string(100, '\x5a')).ok());
  ASSERT_TRUE(f->Close().ok());
  const Status s = TryOpen();
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(std::string::npos,
            s.ToString().find(wals[0].substr(dbname_.size())))
      << s.ToString();
}

}  // namespace
}  // namespace shale
