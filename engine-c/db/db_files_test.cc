// Tests of whole files in and out: the SST writer, ingestion (sequence
// numbers, tombstones, level placement, memtable overlap, bad files) and
// checkpoints.

#include <gtest/gtest.h>

#include "db/db_test_util.h"
#include "db/sst_file_writer.h"

namespace shale {
namespace {

class DBFilesTest : public test::DBTestBase {
 protected:
  DBFilesTest()
      : DBTestBase("db_files_test"), scratch_(test::TempDir("db_files_ext")) {
    Reopen();
  }
  ~DBFilesTest() override { test::RemoveDirRecursively(scratch_); }

  // Writes an external SST with puts (sorted) and range deletions.
  std::string MakeSst(
      const std::string& name,
      const std::vector<std::pair<std::string, std::string>>& puts,
      const std::vector<std::pair<std::string, std::string>>& ranges = {}) {
    const std::string path = scratch_ + "/" + name;
    std::unique_ptr<SstFileWriter> w;
    EXPECT_TRUE(SstFileWriter::Open(options_, path, &w).ok());
    for (const auto& [k, v] : puts) EXPECT_TRUE(w->Put(k, v).ok()) << k;
    for (const auto& [b, e] : ranges) EXPECT_TRUE(w->DeleteRange(b, e).ok());
    uint64_t size = 0;
    EXPECT_TRUE(w->Finish(&size).ok());
    EXPECT_GT(size, 0u);
    return path;
  }

  int LevelOfFileWith(const std::string& user_key) {
    for (int l = 0; l < options_.num_levels; l++) {
      for (const FileMetaData& f : db_->TEST_LevelFiles(l)) {
        if (f.smallest.user_key().ToString() <= user_key &&
            user_key <= f.largest.user_key().ToString()) {
          return l;
        }
      }
    }
    return -1;
  }

  const std::string scratch_;
};

TEST_F(DBFilesTest, SstWriterRejectsBadInput) {
  std::unique_ptr<SstFileWriter> w;
  const std::string path = scratch_ + "/bad.sst";
  ASSERT_TRUE(SstFileWriter::Open(options_, path, &w).ok());
  ASSERT_TRUE(w->Put("b", "1").ok());
  Status s = w->Put("a", "2");
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_TRUE(w->Put("b", "again").IsInvalidArgument());
  EXPECT_TRUE(w->DeleteRange("z", "c").IsInvalidArgument());
  EXPECT_TRUE(w->DeleteRange("m", "m").ok());  // empty: nothing
  w.reset();  // unfinished: the file is removed
  EXPECT_FALSE(env_->FileExists(path));
  ASSERT_TRUE(SstFileWriter::Open(options_, path, &w).ok());
  uint64_t size;
  EXPECT_TRUE(w->Finish(&size).IsInvalidArgument());  // no entries
}

TEST_F(DBFilesTest, IngestIsOneNewerWrite) {
  ASSERT_TRUE(Put("a", "old").ok());
  ASSERT_TRUE(Put("c", "old").ok());
  ASSERT_TRUE(Put("q", "old").ok());
  ASSERT_TRUE(db_->Flush(true).ok());
  const Snapshot* before = db_->GetSnapshot();
  const SequenceNumber seq = db_->LastSequence();
  // The file deletes [b, z) among older data and puts c and d.
  const std::string path =
      MakeSst("one.sst", {{"c", "new"}, {"d", "new"}}, {{"b", "z"}});
  ASSERT_TRUE(db_->Ingest({path}).ok());
  EXPECT_FALSE(env_->FileExists(path));  // moved in
  EXPECT_EQ(seq + 1, db_->LastSequence());
  EXPECT_EQ("a=old c=new d=new", Contents());
  EXPECT_EQ("a=old c=old q=old", Contents(before));
  // Point reads at the older snapshot skip the file's newer entries.
  EXPECT_EQ("old", Get("c", before));
  EXPECT_EQ("NOT_FOUND", Get("d", before));
  std::vector<Slice> keys = {"c", "d", "q"};
  std::vector<std::string> values(3);
  std::vector<Status> statuses(3);
  ReadOptions ro;
  ro.snapshot = before;
  db_->MultiGet(ro, 3, keys.data(), values.data(), statuses.data());
  EXPECT_EQ("old", values[0]);
  EXPECT_TRUE(statuses[1].IsNotFound());
  EXPECT_EQ("old", values[2]);
  EXPECT_EQ("NOT_FOUND", Get("q"));
  db_->ReleaseSnapshot(before);
  // Newer writes win over it.
  ASSERT_TRUE(Put("d", "newest").ok());
  EXPECT_EQ("newest", Get("d"));
  Reopen();
  EXPECT_EQ("a=old c=new d=newest", Contents());
  ASSERT_TRUE(db_->CompactRange(nullptr, nullptr).ok());
  EXPECT_EQ("a=old c=new d=newest", Contents());
}

TEST_F(DBFilesTest, IngestFlushesOverlappingMemtable) {
  ASSERT_TRUE(Put("k", "in-memtable").ok());
  ASSERT_TRUE(db_->Ingest({MakeSst("k.sst", {{"k", "ingested"}})}).ok());
  EXPECT_EQ("ingested", Get("k"));
  Reopen();
  EXPECT_EQ("ingested", Get("k"));
}

TEST_F(DBFilesTest, IngestGoesAsDeepAsItCan) {
  // Data below in [a, c]; a file over [x, z] overlaps nothing: it goes to
  // the bottom level without being rewritten.
  ASSERT_TRUE(Put("a", "1").ok());
  ASSERT_TRUE(Put("c", "1").ok());
  ASSERT_TRUE(db_->CompactRange(nullptr, nullptr).ok());
  ASSERT_TRUE(db_->Ingest({MakeSst("x.sst", {{"x", "1"}, {"z", "1"}})}).ok());
  EXPECT_EQ(options_.num_levels - 1, LevelOfFileWith("x"));
  // A file overlapping the data in L1 must sit above it: L0.
  ASSERT_TRUE(db_->Ingest({MakeSst("b.sst", {{"b", "2"}})}).ok());
  EXPECT_EQ(1, LevelOfFileWith("a"));
  EXPECT_EQ(0, LevelOfFileWith("b"));
  EXPECT_EQ("a=1 b=2 c=1 x=1 z=1", Contents());
}

TEST_F(DBFilesTest, IngestSeveralFilesAtOnce) {
  const std::string f1 = MakeSst("f1.sst", {{"a", "1"}, {"b", "1"}});
  const std::string f2 = MakeSst("f2.sst", {{"m", "2"}}, {{"n", "p"}});
  ASSERT_TRUE(Put("o", "old").ok());
  const SequenceNumber seq = db_->LastSequence();
  ASSERT_TRUE(db_->Ingest({f2, f1}).ok());
  EXPECT_EQ(seq + 1, db_->LastSequence());  // one write for all
  EXPECT_EQ("a=1 b=1 m=2", Contents());
}

TEST_F(DBFilesTest, IngestRejectsBadFiles) {
  // Overlapping files.
  const std::string f1 = MakeSst("o1.sst", {{"a", "1"}, {"m", "1"}});
  const std::string f2 = MakeSst("o2.sst", {{"k", "2"}});
  Status s = db_->Ingest({f1, f2});
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_TRUE(env_->FileExists(f1));  // nothing moved
  // Not an SST at all.
  const std::string junk = scratch_ + "/junk.sst";
  ASSERT_TRUE(WriteStringToFile(env_, std::string(100, 'x'), junk, false).ok());
  s = db_->Ingest({junk});
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  // A file of the database itself (not made by the SST writer).
  ASSERT_TRUE(Put("z", "1").ok());
  ASSERT_TRUE(db_->Flush(true).ok());
  const std::string own =
      TableFileName(dbname_, db_->TEST_LevelFiles(0)[0].number);
  const std::string copy = scratch_ + "/own.sst";
  std::string data;
  ASSERT_TRUE(ReadFileToString(env_, own, &data).ok());
  ASSERT_TRUE(WriteStringToFile(env_, data, copy, false).ok());
  s = db_->Ingest({copy});
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  // A missing file.
  EXPECT_TRUE(db_->Ingest({scratch_ + "/missing.sst"}).IsNotFound());
  EXPECT_EQ("z=1", Contents());
}

TEST_F(DBFilesTest, CheckpointIsAConsistentCopy) {
  for (int i = 0; i < 100; i++) {
    ASSERT_TRUE(Put("k" + std::to_string(i), "v").ok());
  }
  ASSERT_TRUE(db_->Flush(true).ok());
  ASSERT_TRUE(Put("in-wal", "1").ok());
  const std::string dir = scratch_ + "/checkpoint";
  ASSERT_TRUE(db_->Checkpoint(dir).ok());
  ASSERT_TRUE(Put("after", "1").ok());
  ASSERT_TRUE(Delete("k5").ok());
  const std::string want = [&] {
    std::unique_ptr<DBImpl> cp;
    EXPECT_TRUE(DBImpl::Open(options_, dir, &cp).ok());
    std::string v;
    EXPECT_TRUE(cp->Get(ReadOptions(), "in-wal", &v).ok());
    EXPECT_TRUE(cp->Get(ReadOptions(), "k5", &v).ok());
    EXPECT_TRUE(cp->Get(ReadOptions(), "after", &v).IsNotFound());
    std::unique_ptr<DBIter> it(
        cp->NewIterator(ReadOptions(), nullptr, nullptr));
    int n = 0;
    for (it->SeekToFirst(); it->Valid(); it->Next()) n++;
    return std::to_string(n);
  }();
  EXPECT_EQ("101", want);
  // The source is unaffected, and a second checkpoint into the same
  // directory is refused.
  EXPECT_EQ("1", Get("after"));
  EXPECT_TRUE(db_->Checkpoint(dir).IsInvalidArgument());
  EXPECT_FALSE(env_->FileExists(dir + ".tmp"));
}

}  // namespace
}  // namespace shale
