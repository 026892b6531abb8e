// Tests of WAL recovery under each wal_recovery_mode of engine.h: a torn
// tail, damage in the middle of a WAL, damage in an older WAL, and a WAL
// record whose checksum is right but whose batch is not.

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "db/db_test_util.h"
#include "log/log_format.h"
#include "log/log_writer.h"
#include "util/coding.h"

namespace shale {
namespace {

class DBWalTest : public test::DBTestBase {
 protected:
  DBWalTest() : DBTestBase("db_wal_test") { Reopen(); }

  std::string WalName(uint64_t number) { return LogFileName(dbname_, number); }

  // The newest WAL that holds data (the last open made an empty one).
  std::string LastWal() {
    std::vector<uint64_t> logs = Files(FileType::kLogFile);
    for (auto it = logs.rbegin(); it != logs.rend(); ++it) {
      uint64_t size = 0;
      EXPECT_TRUE(env_->GetFileSize(WalName(*it), &size).ok());
      if (size > 0) return WalName(*it);
    }
    ADD_FAILURE() << "no WAL with data";
    return "";
  }

  std::string ReadAll(const std::string& fname) {
    std::string data;
    EXPECT_TRUE(ReadFileToString(env_, fname, &data).ok());
    return data;
  }

  void WriteAll(const std::string& fname, const std::string& data) {
    ASSERT_TRUE(WriteStringToFile(env_, data, fname, true).ok());
  }

  void Shrink(const std::string& fname, size_t bytes) {
    std::string data = ReadAll(fname);
    data.resize(data.size() - bytes);
    WriteAll(fname, data);
  }

  void FlipByte(const std::string& fname, size_t offset) {
    std::string data = ReadAll(fname);
    data[offset] ^= 0x55;
    WriteAll(fname, data);
  }

  // Writes a new WAL, numbered after every file in the directory, with
  // one record per put, sequence numbers from first_seq. Returns its
  // number.
  uint64_t AppendWal(
      const std::vector<std::pair<std::string, std::string>>& puts,
      SequenceNumber first_seq) {
    uint64_t number = 0;
    std::vector<std::string> children;
    EXPECT_TRUE(env_->GetChildren(dbname_, &children).ok());
    for (const std::string& c : children) {
      uint64_t n;
      FileType type;
      if (ParseFileName(c, &n, &type)) number = std::max(number, n);
    }
    number++;
    std::unique_ptr<WritableFile> f;
    EXPECT_TRUE(env_->NewWritableFile(WalName(number), &f).ok());
    log::Writer w(f.get());
    SequenceNumber seq = first_seq;
    for (const auto& [k, v] : puts) {
      WriteBatch b;
      b.Put(k, v);
      std::string rep = b.Data().ToString();
      EncodeFixed64(&rep[0], seq++);
      EXPECT_TRUE(w.AddRecord(rep).ok());
    }
    EXPECT_TRUE(f->Close().ok());
    return number;
  }

  Status OpenWith(WalRecoveryMode mode) {
    Close();
    options_.wal_recovery_mode = mode;
    return TryOpen();
  }

  // Writes n records of about value_size bytes: "k00".."k<n-1>".
  void WriteRecords(int n, size_t value_size) {
    for (int i = 0; i < n; i++) {
      char key[16];
      snprintf(key, sizeof(key), "k%02d", i);
      ASSERT_TRUE(Put(key, std::string(value_size, 'a' + i % 26)).ok());
    }
  }

  std::string Keys() {
    std::string r;
    std::unique_ptr<DBIter> it(
        db_->NewIterator(ReadOptions(), nullptr, nullptr));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      r += (r.empty() ? "" : " ") + it->key().ToString();
    }
    return r;
  }
};

TEST_F(DBWalTest, TornTailDroppedByDefault) {
  WriteRecords(3, 10);
  Close();
  const std::string wal = LastWal();
  Shrink(wal, 3);
  ASSERT_TRUE(OpenWith(WalRecoveryMode::kTolerateCorruptedTail).ok());
  EXPECT_EQ("k00 k01", Keys());
  EXPECT_EQ(2u, db_->LastSequence());
  // The tail was cut, so the WAL is no longer damaged: later opens in any
  // mode succeed, and new writes continue the sequence.
  ASSERT_TRUE(Put("new", "v").ok());
  ASSERT_TRUE(OpenWith(WalRecoveryMode::kAbsoluteConsistency).ok());
  EXPECT_EQ("k00 k01 new", Keys());
  EXPECT_EQ(3u, db_->LastSequence());
}

TEST_F(DBWalTest, TornTailRejectedInAbsoluteConsistency) {
  WriteRecords(3, 10);
  Close();
  const std::string wal = LastWal();
  Shrink(wal, 3);
  Status s = OpenWith(WalRecoveryMode::kAbsoluteConsistency);
  ASSERT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(std::string::npos, s.ToString().find(wal)) << s.ToString();
  EXPECT_NE(std::string::npos, s.ToString().find("at offset")) << s.ToString();
  // Nothing was lost: a tolerant open still finds the good records.
  ASSERT_TRUE(OpenWith(WalRecoveryMode::kTolerateCorruptedTail).ok());
  EXPECT_EQ("k00 k01", Keys());
}

TEST_F(DBWalTest, ZeroFilledTailIsATornTail) {
  WriteRecords(2, 10);
  Close();
  const std::string wal = LastWal();
  WriteAll(wal, ReadAll(wal) + std::string(5000, '\0'));
  EXPECT_TRUE(OpenWith(WalRecoveryMode::kAbsoluteConsistency).IsCorruption());
  ASSERT_TRUE(OpenWith(WalRecoveryMode::kTolerateCorruptedTail).ok());
  EXPECT_EQ("k00 k01", Keys());
}

TEST_F(DBWalTest, DamageInTheMiddleIsCorruption) {
  // 10 KiB records: three per 32 KiB block, so damage in the first block
  // is followed by good records in later blocks.
  WriteRecords(10, 10000);
  Close();
  const std::string wal = LastWal();
  // The WAL's opening record (an empty batch) comes first; the first
  // record of data right after it.
  const size_t first = log::kHeaderSize + kBatchHeaderSize;
  FlipByte(wal, first + log::kHeaderSize + kBatchHeaderSize + 20);
  for (WalRecoveryMode mode : {WalRecoveryMode::kTolerateCorruptedTail,
                               WalRecoveryMode::kAbsoluteConsistency}) {
    Status s = OpenWith(mode);
    ASSERT_TRUE(s.IsCorruption()) << s.ToString();
    EXPECT_NE(std::string::npos, s.ToString().find("checksum mismatch"))
        << s.ToString();
    EXPECT_NE(std::string::npos,
              s.ToString().find("offset " + std::to_string(first)))
        << s.ToString();
    EXPECT_NE(std::string::npos, s.ToString().find("not a torn tail"))
        << s.ToString();
  }
}

TEST_F(DBWalTest, PointInTimeStopsAtFirstDamage) {
  WriteRecords(10, 10000);
  Close();
  const std::string wal = LastWal();
  // Damage record 4 (in the second block).
  const std::string data = ReadAll(wal);
  const size_t at = data.find(std::string(100, 'a' + 4));
  ASSERT_NE(std::string::npos, at);
  FlipByte(wal, at + 50);
  ASSERT_TRUE(OpenWith(WalRecoveryMode::kPointInTime).ok());
  EXPECT_EQ("k00 k01 k02 k03", Keys());
  EXPECT_EQ(4u, db_->LastSequence());
  // What was dropped stays dropped: a strict open now succeeds.
  ASSERT_TRUE(Put("k99", "after").ok());
  ASSERT_TRUE(OpenWith(WalRecoveryMode::kAbsoluteConsistency).ok());
  EXPECT_EQ("k00 k01 k02 k03 k99", Keys());
}

TEST_F(DBWalTest, PointInTimeIgnoresLaterWals) {
  // Recovery retires every WAL it replays, so the WALs that follow are
  // written here as a crashed process would have left them.
  ASSERT_TRUE(Put("a", "1").ok());
  Close();
  const uint64_t wal2 = AppendWal({{"b", "2"}}, 2);
  const uint64_t wal3 = AppendWal({{"c", "3"}}, 3);
  FlipByte(WalName(wal2), log::kHeaderSize + kBatchHeaderSize + 1);
  EXPECT_TRUE(OpenWith(WalRecoveryMode::kTolerateCorruptedTail).IsCorruption());
  ASSERT_TRUE(OpenWith(WalRecoveryMode::kPointInTime).ok());
  EXPECT_EQ("a", Keys());
  EXPECT_EQ(1u, db_->LastSequence());
  // The dropped WALs are gone with the recovered ones.
  EXPECT_FALSE(env_->FileExists(WalName(wal3)));
  ASSERT_TRUE(OpenWith(WalRecoveryMode::kAbsoluteConsistency).ok());
  EXPECT_EQ("a", Keys());
}

TEST_F(DBWalTest, TornTailInOlderWalIsCorruption) {
  ASSERT_TRUE(Put("a", "1").ok());
  ASSERT_TRUE(Put("x", "2").ok());
  Close();
  const std::string older = LastWal();
  AppendWal({{"b", "3"}}, 3);
  Shrink(older, 2);
  Status s = OpenWith(WalRecoveryMode::kTolerateCorruptedTail);
  ASSERT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(std::string::npos, s.ToString().find("not the newest"))
      << s.ToString();
  ASSERT_TRUE(OpenWith(WalRecoveryMode::kPointInTime).ok());
  EXPECT_EQ("a", Keys());
}

TEST_F(DBWalTest, RecoveryRetiresReplayedWals) {
  ASSERT_TRUE(Put("a", "1").ok());
  Close();
  const std::vector<uint64_t> before = Files(FileType::kLogFile);
  Reopen();
  // The replayed data is in an L0 file now; the old WAL is gone and a new,
  // empty one takes writes.
  const std::vector<uint64_t> after = Files(FileType::kLogFile);
  ASSERT_EQ(1u, after.size());
  EXPECT_GT(after[0], before.back());
  EXPECT_EQ(1u, Files(FileType::kTableFile).size());
  EXPECT_EQ("a", Keys());
}

TEST_F(DBWalTest, BadBatchInsideAValidRecord) {
  ASSERT_TRUE(Put("a", "1").ok());
  Close();
  // Append, with a correct checksum, a record that is not a batch.
  const std::string wal = LastWal();
  std::unique_ptr<WritableFile> f;
  uint64_t size = 0;
  ASSERT_TRUE(env_->GetFileSize(wal, &size).ok());
  ASSERT_TRUE(env_->NewAppendableFile(wal, &f).ok());
  {
    log::Writer w(f.get(), size);
    std::string bogus(kBatchHeaderSize, '\0');
    bogus[8] = 1;
    bogus += "\x09garbage";
    ASSERT_TRUE(w.AddRecord(bogus).ok());
  }
  ASSERT_TRUE(f->Close().ok());
  Status s = OpenWith(WalRecoveryMode::kTolerateCorruptedTail);
  ASSERT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(std::string::npos, s.ToString().find("bad write batch"))
      << s.ToString();
  EXPECT_NE(std::string::npos, s.ToString().find("unknown record tag 9"))
      << s.ToString();
  ASSERT_TRUE(OpenWith(WalRecoveryMode::kPointInTime).ok());
  EXPECT_EQ("a", Keys());
}

TEST_F(DBWalTest, EmptyWalFilesAreFine) {
  Reopen();
  Reopen();
  ASSERT_TRUE(Put("a", "1").ok());
  ASSERT_TRUE(OpenWith(WalRecoveryMode::kAbsoluteConsistency).ok());
  EXPECT_EQ("a", Keys());
}

TEST_F(DBWalTest, GroupRecordsReplay) {
  // Batches written by different writers share WAL records; each keeps its
  // sequence numbers after replay.
  WriteBatch b1, b2;
  b1.Put("x", "1");
  b1.Put("y", "1");
  b2.Delete("x");
  ASSERT_TRUE(Write(b1).ok());
  ASSERT_TRUE(Write(b2, /*sync=*/true).ok());
  Reopen();
  EXPECT_EQ("y", Keys());
  EXPECT_EQ(3u, db_->LastSequence());
}

TEST_F(DBWalTest, SyncWALBesideWritesAndWalSwitches) {
  // SyncWAL syncs outside the write queue while writers append and
  // memtable switches retire WALs: it must never touch a closed WAL, and
  // every write survives a reopen.
  Close();
  options_.write_buffer_size = 64 << 10;
  Reopen();
  constexpr int kWriters = 2;
  constexpr int kPerWriter = 2000;
  std::atomic<bool> done{false};
  std::atomic<uint64_t> syncs{0};
  std::thread syncer([&] {
    while (!done.load()) {
      Status s = db_->SyncWAL();
      EXPECT_TRUE(s.ok()) << s.ToString();
      if (!s.ok()) return;
      syncs++;
    }
  });
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; w++) {
    writers.emplace_back([&, w] {
      for (int i = 0; i < kPerWriter; i++) {
        char key[32];
        snprintf(key, sizeof(key), "w%d-%05d", w, i);
        EXPECT_TRUE(Put(key, std::string(100, 'v')).ok());
      }
    });
  }
  for (std::thread& t : writers) t.join();
  done = true;
  syncer.join();
  EXPECT_GT(syncs.load(), 0u);
  DBStats st;
  db_->GetStats(&st);
  EXPECT_GE(st.wal_syncs, syncs.load());
  EXPECT_GT(Files(FileType::kTableFile).size(), 0u) << "no WAL was retired";
  Reopen();
  int n = 0;
  std::unique_ptr<DBIter> it(db_->NewIterator(ReadOptions(), nullptr, nullptr));
  for (it->SeekToFirst(); it->Valid(); it->Next()) n++;
  EXPECT_EQ(kWriters * kPerWriter, n);
}

}  // namespace
}  // namespace shale
