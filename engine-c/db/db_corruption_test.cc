// Corruption of every kind of file the engine keeps: bytes flipped in WAL
// records, SST blocks (data, index, filter, properties) and footers, the
// MANIFEST and CURRENT. Each case must be detected (checksum or format
// check) and reported naming the file and, where there is one, the offset;
// open fails cleanly or, where the options allow, recovers to the last
// consistent point. Never a crash, never a wrong value.
//
// The sweeps flip one byte at many offsets of a file of a known database
// and check every outcome against what was written.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "db/db_test_util.h"
#include "log/log_reader.h"

namespace shale {
namespace {

using Model = std::map<std::string, std::string>;

class DBCorruptionTest : public test::DBTestBase {
 protected:
  DBCorruptionTest() : DBTestBase("db_corruption_test") {
    pristine_ = dbname_ + "-pristine";
    // Checksums on every read (the default), and no block cache, so that
    // every read goes to the damaged file.
    options_.paranoid_checks = true;
    options_.block_cache_size = 0;
    options_.block_size = 256;
    options_.compression = kNoCompression;
  }
  ~DBCorruptionTest() override {
    db_.reset();
    test::RemoveDirRecursively(pristine_);
  }

  static std::string Key(int i) {
    char buf[16];
    snprintf(buf, sizeof(buf), "key%05d", i);
    return buf;
  }
  static std::string Value(int i) {
    return "value-" + std::to_string(i) + std::string(i % 37, 'v');
  }

  // Writes n keys and, with flush, moves them into SSTs; closes the
  // database and keeps a pristine copy of its files.
  void Build(int n, bool flush) {
    Reopen();
    for (int i = 0; i < n; i++) {
      ASSERT_TRUE(Put(Key(i), Value(i)).ok());
      model_[Key(i)] = Value(i);
      if (flush && i == n / 2) ASSERT_TRUE(db_->Flush(true).ok());
    }
    if (flush) ASSERT_TRUE(db_->Flush(true).ok());
    Close();
    CopyDir(dbname_, pristine_);
  }

  void CopyDir(const std::string& from, const std::string& to) {
    test::RemoveDirRecursively(to);
    ASSERT_TRUE(env_->CreateDir(to).ok());
    std::vector<std::string> children;
    ASSERT_TRUE(env_->GetChildren(from, &children).ok());
    for (const std::string& c : children) {
      if (c == "LOCK") continue;
      std::string data;
      ASSERT_TRUE(ReadFileToString(env_, from + "/" + c, &data).ok());
      ASSERT_TRUE(WriteStringToFile(env_, data, to + "/" + c, false).ok());
    }
  }

  // Back to the pristine files.
  void Restore() {
    db_.reset();
    CopyDir(pristine_, dbname_);
  }

  std::string FileOf(FileType type) {
    std::vector<uint64_t> numbers = Files(type);
    EXPECT_FALSE(numbers.empty());
    switch (type) {
      case FileType::kLogFile:
        for (auto it = numbers.rbegin(); it != numbers.rend(); ++it) {
          uint64_t size = 0;
          env_->GetFileSize(LogFileName(dbname_, *it), &size);
          if (size > 0) return LogFileName(dbname_, *it);
        }
        return "";
      case FileType::kTableFile:
        return TableFileName(dbname_, numbers.back());
      case FileType::kDescriptorFile:
        return DescriptorFileName(dbname_, numbers.back());
      default:
        return "";
    }
  }

  uint64_t Size(const std::string& fname) {
    uint64_t size = 0;
    EXPECT_TRUE(env_->GetFileSize(fname, &size).ok());
    return size;
  }

  void Flip(const std::string& fname, uint64_t offset, char mask = 0x40) {
    std::string data;
    ASSERT_TRUE(ReadFileToString(env_, fname, &data).ok());
    ASSERT_LT(offset, data.size());
    data[offset] ^= mask;
    ASSERT_TRUE(WriteStringToFile(env_, data, fname, false).ok());
  }

  // Reads the whole database both ways: a scan, and a Get of every key
  // written. Every value returned must be the one written; every error
  // must be Corruption naming a file of the database. Returns the number
  // of errors; *scanned gets what the scan returned before any error.
  int CheckReads(Model* scanned) {
    int errors = 0;
    scanned->clear();
    {
      std::unique_ptr<DBIter> it(
          db_->NewIterator(ReadOptions(), nullptr, nullptr));
      for (it->SeekToFirst(); it->Valid(); it->Next()) {
        const std::string k = it->key().ToString();
        auto m = model_.find(k);
        EXPECT_TRUE(m != model_.end()) << "scan returned unknown key " << k;
        if (m != model_.end()) {
          EXPECT_EQ(m->second, it->value().ToString()) << "key " << k;
        }
        (*scanned)[k] = it->value().ToString();
      }
      if (!it->status().ok()) {
        errors++;
        ExpectClearCorruption(it->status());
      }
    }
    for (const auto& [k, v] : model_) {
      std::string got;
      Status s = db_->Get(ReadOptions(), k, &got);
      if (s.ok()) {
        EXPECT_EQ(v, got) << "key " << k;
      } else if (!s.IsNotFound()) {
        errors++;
        ExpectClearCorruption(s);
      }
    }
    return errors;
  }

  // Corruption (or, for a file cut short, an I/O error) whose message names
  // a file of this database.
  void ExpectClearCorruption(const Status& s) {
    EXPECT_TRUE(s.IsCorruption() || s.IsIOError()) << s.ToString();
    EXPECT_NE(std::string::npos, s.ToString().find(dbname_ + "/"))
        << "no file name in: " << s.ToString();
  }

  // Where each physical record of a log-format file starts.
  std::vector<uint64_t> RecordOffsets(const std::string& fname) {
    std::vector<uint64_t> r;
    std::unique_ptr<SequentialFile> f;
    EXPECT_TRUE(env_->NewSequentialFile(fname, &f).ok());
    log::Reader reader(f.get(), fname, nullptr, true);
    Slice record;
    std::string scratch;
    while (reader.ReadRecord(&record, &scratch)) {
      r.push_back(reader.LastRecordOffset());
    }
    return r;
  }

  // offset is one of the two length bytes of a record header (after the
  // 4-byte checksum).
  static bool IsLengthField(const std::vector<uint64_t>& records,
                            uint64_t offset) {
    for (uint64_t r : records) {
      if (offset == r + 4 || offset == r + 5) return true;
    }
    return false;
  }

  std::string pristine_;
  Model model_;
};

// Damage anywhere in an SST is caught on the read that meets it; reads
// return the right value or a Corruption naming the file, never a wrong
// value. Every flip is found by the scan plus the point reads.
TEST_F(DBCorruptionTest, SstEveryRegionFlipped) {
  Build(400, /*flush=*/true);
  const std::string sst = FileOf(FileType::kTableFile);
  const uint64_t size = Size(sst);
  ASSERT_GT(size, 1000u);
  int detected = 0, sweeps = 0;
  for (uint64_t off = 0; off < size; off += std::max<uint64_t>(1, size / 150)) {
    Restore();
    Flip(sst, off);
    sweeps++;
    Status s = TryOpen();
    if (!s.ok()) {
      // Opening reads no SST, but it may verify them: a clean error only.
      ExpectClearCorruption(s);
      detected++;
      continue;
    }
    Model scanned;
    const int errors = CheckReads(&scanned);
    if (errors > 0) detected++;
    if (errors == 0) {
      ADD_FAILURE() << "flip at offset " << off << " of " << size
                    << " went unnoticed";
    }
  }
  // The last bytes: the footer.
  for (uint64_t back = 1; back <= 48 && back <= size; back += 7) {
    Restore();
    Flip(sst, size - back);
    Status s = TryOpen();
    if (s.ok()) {
      Model scanned;
      EXPECT_GT(CheckReads(&scanned), 0)
          << "footer byte " << back << " from the end";
    } else {
      ExpectClearCorruption(s);
    }
  }
  EXPECT_EQ(detected, sweeps);
}

// A damaged byte in an SST is reported with the file's name and the
// offset of the block that failed its checksum.
TEST_F(DBCorruptionTest, SstErrorNamesFileAndOffset) {
  Build(400, true);
  const std::string sst = FileOf(FileType::kTableFile);
  Flip(sst, 10);  // inside the first data block
  Reopen();
  Model scanned;
  ASSERT_GT(CheckReads(&scanned), 0);
  std::unique_ptr<DBIter> it(db_->NewIterator(ReadOptions(), nullptr, nullptr));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
  }
  ASSERT_TRUE(it->status().IsCorruption()) << it->status().ToString();
  const std::string msg = it->status().ToString();
  EXPECT_NE(std::string::npos, msg.find(sst)) << msg;
  EXPECT_NE(std::string::npos, msg.find("offset")) << msg;
}

// Damage in any WAL record but the last fails the open (default recovery
// mode) with the WAL's name and the offset; the open reads nothing wrong.
// With point-in-time recovery the same damage opens the database at the
// last consistent point: a prefix of the writes, nothing altered.
TEST_F(DBCorruptionTest, WalEveryRegionFlipped) {
  Build(300, /*flush=*/false);
  const std::string wal = FileOf(FileType::kLogFile);
  const uint64_t size = Size(wal);
  ASSERT_GT(size, 1000u);
  int failed_open = 0, recovered = 0;
  for (uint64_t off = 0; off < size; off += std::max<uint64_t>(1, size / 120)) {
    for (WalRecoveryMode mode : {WalRecoveryMode::kTolerateCorruptedTail,
                                 WalRecoveryMode::kPointInTime}) {
      Restore();
      Flip(wal, off);
      options_.wal_recovery_mode = mode;
      Status s = TryOpen();
      if (!s.ok()) {
        EXPECT_EQ(WalRecoveryMode::kTolerateCorruptedTail, mode)
            << "point-in-time recovery refused to open: " << s.ToString();
        EXPECT_TRUE(s.IsCorruption()) << s.ToString();
        EXPECT_NE(std::string::npos, s.ToString().find(wal)) << s.ToString();
        EXPECT_NE(std::string::npos, s.ToString().find("offset"))
            << s.ToString();
        failed_open++;
        continue;
      }
      Model scanned;
      EXPECT_EQ(0, CheckReads(&scanned)) << "offset " << off;
      // Keys were written in order, one per record: what survives must be
      // a prefix of them.
      int i = 0;
      for (const auto& [k, v] : scanned) {
        EXPECT_EQ(Key(i), k) << "not a prefix: flip at " << off;
        i++;
      }
      EXPECT_LT(i, 300) << "flip at " << off << " lost nothing";
      recovered++;
    }
  }
  EXPECT_GT(failed_open, 0);
  EXPECT_GT(recovered, 0);
}

// A damaged MANIFEST fails the open with its name; nothing is read from a
// database whose file list cannot be trusted. The one kind of damage an
// open may pass over is a last record cut short (a crash mid-append: that
// edit was never acknowledged); then the database must still be whole.
TEST_F(DBCorruptionTest, ManifestEveryRegionFlipped) {
  Build(400, /*flush=*/true);
  const std::string manifest = FileOf(FileType::kDescriptorFile);
  const uint64_t size = Size(manifest);
  ASSERT_GT(size, 20u);
  const std::vector<uint64_t> record_offsets = RecordOffsets(manifest);
  int failed = 0, length_flips_passed = 0;
  for (uint64_t off = 0; off < size; off++) {
    Restore();
    Flip(manifest, off);
    Status s = TryOpen();
    if (s.ok()) {
      Model scanned;
      EXPECT_EQ(0, CheckReads(&scanned)) << "offset " << off;
      if (scanned.size() != model_.size()) {
        // The one kind of damage no reader can tell from a torn append: a
        // record's length raised past the end of the file. Anything else
        // losing data silently is a failure.
        EXPECT_TRUE(IsLengthField(record_offsets, off))
            << "MANIFEST flip at " << off << " of " << size
            << " silently lost data";
        length_flips_passed++;
      }
      continue;
    }
    EXPECT_TRUE(s.IsCorruption()) << "offset " << off << ": " << s.ToString();
    EXPECT_NE(std::string::npos, s.ToString().find(manifest)) << s.ToString();
    failed++;
  }
  EXPECT_GT(failed, static_cast<int>(size) * 9 / 10);
  // Documented in docs/durability.md: at most the two length bytes of each
  // record.
  EXPECT_LE(length_flips_passed, 2 * static_cast<int>(record_offsets.size()));
}

// The MANIFEST's last record cut short, as by a crash mid-append: the edit
// was never acknowledged, so the open drops it and goes on.
TEST_F(DBCorruptionTest, ManifestTornTailIsDropped) {
  Build(400, /*flush=*/true);
  Reopen();
  ASSERT_TRUE(Put("late", "edit").ok());
  ASSERT_TRUE(db_->Flush(true).ok());  // appends one more edit
  Close();
  const std::string manifest = FileOf(FileType::kDescriptorFile);
  ASSERT_TRUE(env_->TruncateFile(manifest, Size(manifest) - 3).ok());
  Status s = TryOpen();
  ASSERT_TRUE(s.ok()) << s.ToString();
  Model scanned;
  EXPECT_EQ(0, CheckReads(&scanned));
}

// CURRENT names the MANIFEST; any damage to it fails the open with a
// message naming CURRENT, and the database opens again once it is right.
TEST_F(DBCorruptionTest, CurrentDamaged) {
  Build(50, true);
  const std::string current = CurrentFileName(dbname_);
  std::string good;
  ASSERT_TRUE(ReadFileToString(env_, current, &good).ok());
  const std::vector<std::string> bad = {
      "",                                   // empty
      good.substr(0, good.size() - 1),      // no newline
      "MANIFEST-999999\n",                  // a MANIFEST that is not there
      "garbage\n",                          // not a MANIFEST name
      std::string("MANIFEST-\0\0\0\n", 13)  // binary junk
  };
  for (const std::string& contents : bad) {
    Restore();
    ASSERT_TRUE(WriteStringToFile(env_, contents, current, false).ok());
    Status s = TryOpen();
    EXPECT_FALSE(s.ok()) << "CURRENT = '" << contents << "' opened";
    EXPECT_NE(std::string::npos, s.ToString().find("CURRENT")) << s.ToString();
  }
  Restore();
  Reopen();
  Model scanned;
  EXPECT_EQ(0, CheckReads(&scanned));
  EXPECT_EQ(model_, scanned);
}

// An SST listed in the MANIFEST but missing or cut short fails clearly.
TEST_F(DBCorruptionTest, SstMissingOrTruncated) {
  Build(400, true);
  const std::string sst = FileOf(FileType::kTableFile);
  ASSERT_TRUE(env_->TruncateFile(sst, Size(sst) / 2).ok());
  Status s = TryOpen();
  Model scanned;
  if (s.ok()) {
    EXPECT_GT(CheckReads(&scanned), 0);
  } else {
    ExpectClearCorruption(s);
  }
  Restore();
  ASSERT_TRUE(env_->RemoveFile(sst).ok());
  s = TryOpen();
  if (s.ok()) {
    EXPECT_GT(CheckReads(&scanned), 0);
  } else {
    EXPECT_NE(std::string::npos, s.ToString().find(sst)) << s.ToString();
  }
}

}  // namespace
}  // namespace shale
