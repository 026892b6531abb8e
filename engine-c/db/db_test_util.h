// A fixture for tests of a whole database: a fresh directory, open/reopen,
// and one-line helpers for writes and reads.

#ifndef SHALE_DB_DB_TEST_UTIL_H_
#define SHALE_DB_DB_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "db/db_impl.h"
#include "db/db_iter.h"
#include "db/filename.h"
#include "db/write_batch.h"
#include "util/env.h"
#include "util/testutil.h"

namespace shale::test {

class DBTestBase : public testing::Test {
 protected:
  explicit DBTestBase(const std::string& name)
      : env_(Env::Default()), dbname_(TempDir(name)) {
    options_.env = env_;
  }
  ~DBTestBase() override {
    db_.reset();
    RemoveDirRecursively(dbname_);
  }

  Status TryOpen() {
    db_.reset();
    return DBImpl::Open(options_, dbname_, &db_);
  }
  void Reopen() { ASSERT_TRUE(TryOpen().ok()); }
  void Close() {
    if (db_ != nullptr) {
      EXPECT_TRUE(db_->Close().ok());
      db_.reset();
    }
  }

  Status Write(const WriteBatch& b, bool sync = false) {
    WriteOptions wo;
    wo.sync = sync;
    return db_->Write(wo, b.Data());
  }
  Status Put(const std::string& k, const std::string& v) {
    WriteBatch b;
    b.Put(k, v);
    return Write(b);
  }
  Status Delete(const std::string& k) {
    WriteBatch b;
    b.Delete(k);
    return Write(b);
  }
  Status DeleteRange(const std::string& begin, const std::string& end) {
    WriteBatch b;
    b.DeleteRange(begin, end);
    return Write(b);
  }

  // The value, "NOT_FOUND", or the error.
  std::string Get(const std::string& k, const Snapshot* snap = nullptr) {
    ReadOptions ro;
    ro.snapshot = snap;
    std::string value;
    Status s = db_->Get(ro, k, &value);
    if (s.IsNotFound()) return "NOT_FOUND";
    if (!s.ok()) return s.ToString();
    return value;
  }

  // "k1=v1 k2=v2 ..." through a forward scan, checked against a backward
  // scan of the same view.
  std::string Contents(const Snapshot* snap = nullptr,
                       const Slice* lower = nullptr,
                       const Slice* upper = nullptr) {
    ReadOptions ro;
    ro.snapshot = snap;
    std::unique_ptr<DBIter> it(db_->NewIterator(ro, lower, upper));
    std::vector<std::string> forward, backward;
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      forward.push_back(it->key().ToString() + "=" + it->value().ToString());
    }
    EXPECT_TRUE(it->status().ok()) << it->status().ToString();
    for (it->SeekToLast(); it->Valid(); it->Prev()) {
      backward.push_back(it->key().ToString() + "=" + it->value().ToString());
    }
    std::reverse(backward.begin(), backward.end());
    EXPECT_EQ(forward, backward);
    std::string r;
    for (const std::string& e : forward) r += (r.empty() ? "" : " ") + e;
    return r;
  }

  // Files of the given type in the DB directory, by number.
  std::vector<uint64_t> Files(FileType want) {
    std::vector<std::string> children;
    EXPECT_TRUE(env_->GetChildren(dbname_, &children).ok());
    std::vector<uint64_t> r;
    for (const std::string& c : children) {
      uint64_t number;
      FileType type;
      if (ParseFileName(c, &number, &type) && type == want) r.push_back(number);
    }
    std::sort(r.begin(), r.end());
    return r;
  }

  Env* const env_;
  const std::string dbname_;
  Options options_;
  std::unique_ptr<DBImpl> db_;
};

// The real Env, except that the creation of SST files can be held: after
// HoldAfter(n), n more SSTs are created and the next ones wait in
// NewWritableFile until Release(). A test uses it to keep a background
// compaction (or flush) waiting at its first output file while the
// foreground goes on.
class SstGateEnv final : public Env {
 public:
  explicit SstGateEnv(Env* base) : base_(base) {}

  void HoldAfter(int n) {
    std::lock_guard<std::mutex> l(mu_);
    held_ = true;
    allowed_ = n;
  }
  void Release() {
    std::lock_guard<std::mutex> l(mu_);
    held_ = false;
    cv_.notify_all();
  }
  // SST creations waiting now.
  int waiting() {
    std::lock_guard<std::mutex> l(mu_);
    return waiting_;
  }

  Status NewWritableFile(const std::string& fname,
                         std::unique_ptr<WritableFile>* result) override {
    if (fname.size() > 4 && fname.compare(fname.size() - 4, 4, ".sst") == 0) {
      std::unique_lock<std::mutex> l(mu_);
      if (held_ && allowed_ > 0) {
        allowed_--;
      } else {
        waiting_++;
        cv_.wait(l, [this] { return !held_; });
        waiting_--;
      }
    }
    return base_->NewWritableFile(fname, result);
  }

  Status NewSequentialFile(const std::string& fname,
                           std::unique_ptr<SequentialFile>* result) override {
    return base_->NewSequentialFile(fname, result);
  }
  Status NewRandomAccessFile(const std::string& fname,
                             std::unique_ptr<RandomAccessFile>* result,
                             bool use_mmap) override {
    return base_->NewRandomAccessFile(fname, result, use_mmap);
  }
  Status NewAppendableFile(const std::string& fname,
                           std::unique_ptr<WritableFile>* result) override {
    return base_->NewAppendableFile(fname, result);
  }
  bool FileExists(const std::string& fname) override {
    return base_->FileExists(fname);
  }
  Status GetChildren(const std::string& dir,
                     std::vector<std::string>* result) override {
    return base_->GetChildren(dir, result);
  }
  Status RemoveFile(const std::string& fname) override {
    return base_->RemoveFile(fname);
  }
  Status CreateDir(const std::string& dirname) override {
    return base_->CreateDir(dirname);
  }
  Status RemoveDir(const std::string& dirname) override {
    return base_->RemoveDir(dirname);
  }
  Status GetFileSize(const std::string& fname, uint64_t* size) override {
    return base_->GetFileSize(fname, size);
  }
  Status RenameFile(const std::string& src,
                    const std::string& target) override {
    return base_->RenameFile(src, target);
  }
  Status TruncateFile(const std::string& fname, uint64_t size) override {
    return base_->TruncateFile(fname, size);
  }
  Status LinkFile(const std::string& src, const std::string& target) override {
    return base_->LinkFile(src, target);
  }
  Status SyncDir(const std::string& dirname) override {
    return base_->SyncDir(dirname);
  }
  Status LockFile(const std::string& fname,
                  std::unique_ptr<FileLock>* lock) override {
    return base_->LockFile(fname, lock);
  }
  uint64_t NowMicros() override { return base_->NowMicros(); }
  void SleepForMicroseconds(int micros) override {
    base_->SleepForMicroseconds(micros);
  }

 private:
  Env* const base_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool held_ = false;
  int allowed_ = 0;
  int waiting_ = 0;
};

}  // namespace shale::test

#endif  // SHALE_DB_DB_TEST_UTIL_H_
