// A fixture for tests of a whole database: a fresh directory, open/reopen,
// and one-line helpers for writes and reads.

#ifndef SHALE_DB_DB_TEST_UTIL_H_
#define SHALE_DB_DB_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
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

}  // namespace shale::test

#endif  // SHALE_DB_DB_TEST_UTIL_H_
