// Tests of the database as a whole: open/close rules, writes and reads,
// batches, snapshots, range deletions, iterators and bounds, group commit,
// recovery from the WAL.

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "db/db_test_util.h"
#include "util/coding.h"

namespace shale {
namespace {

class DBTest : public test::DBTestBase {
 protected:
  DBTest() : DBTestBase("db_test") { Reopen(); }
};

TEST_F(DBTest, Empty) {
  EXPECT_EQ("NOT_FOUND", Get("foo"));
  EXPECT_EQ("", Contents());
  EXPECT_EQ(0u, db_->LastSequence());
}

TEST_F(DBTest, PutGetDelete) {
  ASSERT_TRUE(Put("foo", "v1").ok());
  EXPECT_EQ("v1", Get("foo"));
  ASSERT_TRUE(Put("bar", "v2").ok());
  ASSERT_TRUE(Put("foo", "v3").ok());
  EXPECT_EQ("v3", Get("foo"));
  EXPECT_EQ("v2", Get("bar"));
  ASSERT_TRUE(Delete("foo").ok());
  EXPECT_EQ("NOT_FOUND", Get("foo"));
  EXPECT_EQ("bar=v2", Contents());
  EXPECT_EQ(4u, db_->LastSequence());
}

TEST_F(DBTest, EmptyKeyAndValue) {
  ASSERT_TRUE(Put("", "empty-key").ok());
  ASSERT_TRUE(Put("k", "").ok());
  EXPECT_EQ("empty-key", Get(""));
  EXPECT_EQ("", Get("k"));
  EXPECT_EQ("=empty-key k=", Contents());
}

TEST_F(DBTest, LargeValue) {
  std::string big(3 << 20, 'x');
  big[12345] = 'y';
  ASSERT_TRUE(Put("big", big).ok());
  EXPECT_EQ(big, Get("big"));
  Reopen();
  EXPECT_EQ(big, Get("big"));
}

TEST_F(DBTest, GetIntoCallerBuffer) {
  ASSERT_TRUE(Put("k", "hello world").ok());
  char buf[32];
  size_t len = 99;
  ASSERT_TRUE(db_->Get(ReadOptions(), "k", buf, sizeof(buf), &len).ok());
  EXPECT_EQ("hello world", std::string(buf, len));
  // Too small: the needed size, nothing copied.
  memset(buf, '#', sizeof(buf));
  Status s = db_->Get(ReadOptions(), "k", buf, 5, &len);
  EXPECT_EQ(Status::kBufferTooSmall, s.code()) << s.ToString();
  EXPECT_EQ(11u, len);
  EXPECT_EQ('#', buf[0]);
  // Missing keys.
  EXPECT_TRUE(db_->Get(ReadOptions(), "nope", buf, 5, &len).IsNotFound());
  EXPECT_EQ(0u, len);
}

TEST_F(DBTest, BatchIsAtomicAndOrdered) {
  WriteBatch b;
  b.Put("a", "1");
  b.Put("b", "2");
  b.Delete("a");
  b.Put("c", "3");
  b.Put("c", "4");
  ASSERT_TRUE(Write(b).ok());
  EXPECT_EQ("b=2 c=4", Contents());
  EXPECT_EQ(5u, db_->LastSequence());
}

TEST_F(DBTest, MalformedBatchRejectedWhole) {
  ASSERT_TRUE(Put("keep", "me").ok());
  WriteBatch b;
  b.Put("x", "1");
  b.Put("y", "2");
  std::string rep = b.Data().ToString();
  rep.resize(rep.size() - 1);  // cut the last record
  Status s = db_->Write(WriteOptions(), rep);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_EQ("keep=me", Contents());  // "x" was not applied either
  EXPECT_EQ(1u, db_->LastSequence());

  WriteBatch reversed;
  reversed.Put("z", "1");
  reversed.DeleteRange("q", "b");
  s = Write(reversed);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_EQ("keep=me", Contents());

  EXPECT_TRUE(db_->Write(WriteOptions(), Slice("short")).IsCorruption());
}

TEST_F(DBTest, EmptyBatch) {
  WriteBatch b;
  EXPECT_TRUE(Write(b).ok());
  EXPECT_TRUE(Write(b, /*sync=*/true).ok());
  EXPECT_EQ(0u, db_->LastSequence());
}

TEST_F(DBTest, Snapshots) {
  ASSERT_TRUE(Put("k", "v1").ok());
  const Snapshot* s1 = db_->GetSnapshot();
  ASSERT_TRUE(Put("k", "v2").ok());
  ASSERT_TRUE(Put("other", "o").ok());
  const Snapshot* s2 = db_->GetSnapshot();
  ASSERT_TRUE(Delete("k").ok());
  EXPECT_EQ("v1", Get("k", s1));
  EXPECT_EQ("v2", Get("k", s2));
  EXPECT_EQ("NOT_FOUND", Get("k"));
  EXPECT_EQ("k=v1", Contents(s1));
  EXPECT_EQ("k=v2 other=o", Contents(s2));
  EXPECT_EQ("other=o", Contents());
  EXPECT_EQ(1u, s1->sequence());
  EXPECT_EQ(3u, s2->sequence());
  db_->ReleaseSnapshot(s1);
  db_->ReleaseSnapshot(s2);
}

TEST_F(DBTest, MultiGet) {
  ASSERT_TRUE(Put("a", "1").ok());
  ASSERT_TRUE(Put("c", "3").ok());
  ASSERT_TRUE(Delete("c").ok());
  ASSERT_TRUE(Put("d", "4").ok());
  std::vector<Slice> keys = {"d", "a", "b", "c", "a"};
  std::vector<std::string> values(keys.size(), "stale");
  std::vector<Status> statuses(keys.size());
  db_->MultiGet(ReadOptions(), keys.size(), keys.data(), values.data(),
                statuses.data());
  EXPECT_TRUE(statuses[0].ok());
  EXPECT_EQ("4", values[0]);
  EXPECT_EQ("1", values[1]);
  EXPECT_TRUE(statuses[2].IsNotFound());
  EXPECT_EQ("", values[2]);
  EXPECT_TRUE(statuses[3].IsNotFound());
  EXPECT_EQ("1", values[4]);
}

TEST_F(DBTest, DeleteRange) {
  for (char c = 'a'; c <= 'h'; c++)
    ASSERT_TRUE(Put(std::string(1, c), "v").ok());
  const Snapshot* before = db_->GetSnapshot();
  ASSERT_TRUE(DeleteRange("b", "e").ok());
  ASSERT_TRUE(Put("c", "new").ok());  // newer than the tombstone
  EXPECT_EQ("NOT_FOUND", Get("b"));
  EXPECT_EQ("new", Get("c"));
  EXPECT_EQ("NOT_FOUND", Get("d"));
  EXPECT_EQ("v", Get("e"));
  EXPECT_EQ("a=v c=new e=v f=v g=v h=v", Contents());
  EXPECT_EQ("a=v b=v c=v d=v e=v f=v g=v h=v", Contents(before));
  // Overlapping ranges, and a range inside the same batch as puts.
  WriteBatch b;
  b.Put("zz", "1");
  b.DeleteRange("f", "zz");  // deletes f, g, h but not zz (end exclusive)
  b.Put("g", "again");
  ASSERT_TRUE(Write(b).ok());
  EXPECT_EQ("a=v c=new e=v g=again zz=1", Contents());
  db_->ReleaseSnapshot(before);
  // Tombstones survive a reopen (they are in the WAL).
  Reopen();
  EXPECT_EQ("a=v c=new e=v g=again zz=1", Contents());
}

TEST_F(DBTest, IteratorSeeks) {
  for (const char* k : {"b", "d", "f", "h"}) ASSERT_TRUE(Put(k, k).ok());
  ASSERT_TRUE(Delete("f").ok());
  std::unique_ptr<DBIter> it(db_->NewIterator(ReadOptions(), nullptr, nullptr));
  it->Seek("c");
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ("d", it->key().ToString());
  it->Seek("e");
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ("h", it->key().ToString());  // f is deleted
  it->Seek("i");
  EXPECT_FALSE(it->Valid());
  it->SeekForPrev("g");
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ("d", it->key().ToString());
  it->SeekForPrev("d");
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ("d", it->key().ToString());
  it->SeekForPrev("a");
  EXPECT_FALSE(it->Valid());
  // Direction changes.
  it->Seek("d");
  it->Prev();
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ("b", it->key().ToString());
  it->Next();
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ("d", it->key().ToString());
  it->Next();
  EXPECT_EQ("h", it->key().ToString());
  it->Prev();
  EXPECT_EQ("d", it->key().ToString());
  EXPECT_EQ("d", it->value().ToString());
}

TEST_F(DBTest, IteratorBounds) {
  for (const char* k : {"a", "b", "c", "d", "e"}) ASSERT_TRUE(Put(k, k).ok());
  Slice lower("b"), upper("d");
  EXPECT_EQ("b=b c=c", Contents(nullptr, &lower, &upper));
  EXPECT_EQ("a=a b=b c=c", Contents(nullptr, nullptr, &upper));
  EXPECT_EQ("b=b c=c d=d e=e", Contents(nullptr, &lower, nullptr));
  std::unique_ptr<DBIter> it(db_->NewIterator(ReadOptions(), &lower, &upper));
  it->Seek("a");  // clamped to lower
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ("b", it->key().ToString());
  it->Seek("d");
  EXPECT_FALSE(it->Valid());
  it->SeekForPrev("z");  // clamped to below upper
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ("c", it->key().ToString());
  it->SeekForPrev("a");
  EXPECT_FALSE(it->Valid());
  it->SeekToFirst();
  it->Prev();
  EXPECT_FALSE(it->Valid());
}

TEST_F(DBTest, IteratorIsASnapshot) {
  ASSERT_TRUE(Put("a", "1").ok());
  std::unique_ptr<DBIter> it(db_->NewIterator(ReadOptions(), nullptr, nullptr));
  ASSERT_TRUE(Put("b", "2").ok());
  ASSERT_TRUE(Delete("a").ok());
  it->SeekToFirst();
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ("a", it->key().ToString());
  it->Next();
  EXPECT_FALSE(it->Valid());
}

TEST_F(DBTest, ManyVersionsHiddenInBothDirections) {
  for (int v = 0; v < 50; v++) {
    for (const char* k : {"a", "b", "c"}) {
      ASSERT_TRUE(Put(k, std::string(k) + std::to_string(v)).ok());
    }
  }
  ASSERT_TRUE(Delete("b").ok());
  EXPECT_EQ("a=a49 c=c49", Contents());
}

TEST_F(DBTest, ReopenKeepsDataAndSequence) {
  ASSERT_TRUE(Put("a", "1").ok());
  ASSERT_TRUE(Put("b", "2").ok());
  ASSERT_TRUE(Delete("a").ok());
  Reopen();
  EXPECT_EQ("b=2", Contents());
  EXPECT_EQ(3u, db_->LastSequence());
  ASSERT_TRUE(Put("c", "3").ok());
  EXPECT_EQ(4u, db_->LastSequence());
  Reopen();
  EXPECT_EQ("b=2 c=3", Contents());
  EXPECT_EQ(4u, db_->LastSequence());
}

TEST_F(DBTest, RecoverFromCopyOfOpenDatabase) {
  // A copy taken while the DB is open is what a crash leaves behind: each
  // write was handed to the OS before Write returned.
  for (int i = 0; i < 1000; i++) {
    ASSERT_TRUE(Put("key" + std::to_string(i), std::to_string(i)).ok());
  }
  const std::string copy = test::TempDir("db_test_crashcopy");
  std::vector<std::string> children;
  ASSERT_TRUE(env_->GetChildren(dbname_, &children).ok());
  for (const std::string& c : children) {
    if (c == "LOCK") continue;
    std::string data;
    ASSERT_TRUE(ReadFileToString(env_, dbname_ + "/" + c, &data).ok());
    ASSERT_TRUE(WriteStringToFile(env_, data, copy + "/" + c, false).ok());
  }
  std::unique_ptr<DBImpl> db2;
  ASSERT_TRUE(DBImpl::Open(options_, copy, &db2).ok());
  std::string v;
  for (int i = 0; i < 1000; i++) {
    ASSERT_TRUE(db2->Get(ReadOptions(), "key" + std::to_string(i), &v).ok());
    ASSERT_EQ(std::to_string(i), v);
  }
  db2.reset();
  test::RemoveDirRecursively(copy);
}

TEST_F(DBTest, OpenRules) {
  Close();
  // The lock keeps a second open out.
  Reopen();
  std::unique_ptr<DBImpl> second;
  Status s = DBImpl::Open(options_, dbname_, &second);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  Close();
  // error_if_exists.
  options_.error_if_exists = true;
  s = TryOpen();
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  options_.error_if_exists = false;
  // create_if_missing = false on a missing database.
  options_.create_if_missing = false;
  std::unique_ptr<DBImpl> missing;
  s = DBImpl::Open(options_, dbname_ + "-missing", &missing);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  Reopen();  // the existing one opens
}

TEST_F(DBTest, BadOptions) {
  Close();
  options_.num_levels = 9;
  Status s = TryOpen();
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(std::string::npos, s.ToString().find("num_levels")) << s.ToString();
  options_.num_levels = 7;
  options_.write_buffer_size = 10;
  EXPECT_TRUE(TryOpen().IsInvalidArgument());
}

TEST_F(DBTest, CloseWithOpenIteratorFails) {
  DBIter* it = db_->NewIterator(ReadOptions(), nullptr, nullptr);
  const Snapshot* snap = db_->GetSnapshot();
  Status s = db_->Close();
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(std::string::npos,
            s.ToString().find("1 iterator(s) and 1 snapshot"));
  // Still open and usable.
  ASSERT_TRUE(Put("a", "1").ok());
  delete it;
  db_->ReleaseSnapshot(snap);
  EXPECT_TRUE(db_->Close().ok());
}

TEST_F(DBTest, WriteAfterCloseIsClosed) {
  ASSERT_TRUE(db_->Close().ok());
  WriteBatch b;
  b.Put("a", "b");
  EXPECT_EQ(Status::kClosed, db_->Write(WriteOptions(), b.Data()).code());
}

TEST_F(DBTest, Destroy) {
  ASSERT_TRUE(Put("a", "1").ok());
  // Not while open.
  EXPECT_FALSE(DBImpl::Destroy(dbname_).ok());
  Close();
  EXPECT_TRUE(DBImpl::Destroy(dbname_).ok());
  EXPECT_FALSE(env_->FileExists(dbname_));
  Reopen();
  EXPECT_EQ("", Contents());
}

TEST_F(DBTest, ConcurrentSyncedWritersShareFsyncs) {
  // Group commit: many synced writers, fewer fsyncs than writes, and every
  // write applied exactly once with its own sequence number.
  const int kThreads = 8, kPerThread = 200;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; i++) {
        WriteBatch b;
        b.Put("t" + std::to_string(t) + "-" + std::to_string(i),
              std::to_string(i));
        WriteOptions wo;
        wo.sync = true;
        if (!db_->Write(wo, b.Data()).ok()) failures++;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(0, failures.load());
  EXPECT_EQ(static_cast<uint64_t>(kThreads * kPerThread), db_->LastSequence());
  DBStats st;
  db_->GetStats(&st);
  EXPECT_LT(st.wal_syncs, static_cast<uint64_t>(kThreads * kPerThread));
  EXPECT_GT(st.wal_syncs, 0u);
  Reopen();
  for (int t = 0; t < kThreads; t++) {
    for (int i = 0; i < kPerThread; i += 37) {
      ASSERT_EQ(std::to_string(i),
                Get("t" + std::to_string(t) + "-" + std::to_string(i)));
    }
  }
}

TEST_F(DBTest, ConcurrentReadersAndWriter) {
  // Readers never see a batch half applied: each batch writes the same
  // value under two keys.
  std::atomic<bool> stop{false};
  std::atomic<int> torn{0};
  std::thread reader([&] {
    while (!stop) {
      const Snapshot* snap = db_->GetSnapshot();
      const std::string a = Get("a", snap), b = Get("b", snap);
      if (a != b) torn++;
      db_->ReleaseSnapshot(snap);
    }
  });
  for (int i = 0; i < 3000; i++) {
    WriteBatch b;
    b.Put("a", std::to_string(i));
    b.Put("b", std::to_string(i));
    ASSERT_TRUE(Write(b).ok());
  }
  stop = true;
  reader.join();
  EXPECT_EQ(0, torn.load());
}

TEST_F(DBTest, PointReadsSeeWritesAcrossSuperVersionChanges) {
  // Point reads keep each thread's SuperVersion in a slot between reads.
  // Every flush and memtable switch replaces the SuperVersion; a thread
  // must then never read with the one its slot held: a write it just made
  // may be in the new memtable only.
  options_.write_buffer_size = 64 << 10;
  Reopen();
  std::atomic<bool> stop{false};
  std::thread filler([&] {
    const std::string pad(200, 'p');
    for (int i = 0; !stop && i < 20000; i++) {
      ASSERT_TRUE(Put("fill" + std::to_string(i % 2000), pad).ok());
      if (i % 500 == 0) ASSERT_TRUE(db_->Flush(false).ok());
    }
  });
  std::atomic<int> stale{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; t++) {
    readers.emplace_back([&, t] {
      const std::string key = "reader" + std::to_string(t);
      for (int i = 0; i < 1500; i++) {
        const std::string v = std::to_string(i);
        ASSERT_TRUE(Put(key, v).ok());
        if (Get(key) != v) stale++;
        std::string got;
        Status st;
        const Slice k(key);
        db_->MultiGet(ReadOptions(), 1, &k, &got, &st);
        if (!st.ok() || got != v) stale++;
      }
    });
  }
  for (std::thread& r : readers) r.join();
  stop = true;
  filler.join();
  EXPECT_EQ(0, stale.load());
  // Closing drops the references the readers' slots still hold.
  Reopen();
  EXPECT_EQ("1499", Get("reader0"));
}

TEST_F(DBTest, DisableWalWritesAreVisible) {
  WriteOptions wo;
  wo.disable_wal = true;
  WriteBatch b;
  b.Put("nowal", "1");
  DBStats before;
  db_->GetStats(&before);  // the WAL's opening record so far
  ASSERT_TRUE(db_->Write(wo, b.Data()).ok());
  EXPECT_EQ("1", Get("nowal"));
  DBStats st;
  db_->GetStats(&st);
  EXPECT_EQ(before.wal_bytes_written, st.wal_bytes_written);
}

TEST_F(DBTest, Stats) {
  WriteBatch b;
  b.Put("k1", "value1");
  b.Put("k2", "value2");
  ASSERT_TRUE(Write(b, /*sync=*/true).ok());
  EXPECT_EQ("value1", Get("k1"));
  DBStats st;
  db_->GetStats(&st);
  EXPECT_EQ(b.Data().size(), st.user_bytes_written);
  EXPECT_EQ(2u, st.user_keys_written);
  EXPECT_GT(st.wal_bytes_written, b.Data().size());
  EXPECT_EQ(1u, st.wal_syncs);
  EXPECT_EQ(1u, st.keys_read);
  EXPECT_EQ(2u + 6u, st.bytes_read);
  EXPECT_EQ(2u, st.last_sequence);
  EXPECT_GT(st.memtable_bytes, 0u);
  EXPECT_EQ(st.wal_bytes_written, st.wal_file_bytes);
  std::string prop;
  EXPECT_TRUE(db_->GetProperty("shale.stats", &prop));
  EXPECT_NE(std::string::npos, prop.find("shale.wal.syncs: 1")) << prop;
  EXPECT_TRUE(db_->GetProperty("shale.levelstats", &prop));
  EXPECT_FALSE(db_->GetProperty("shale.nonsense", &prop));
}

}  // namespace
}  // namespace shale
