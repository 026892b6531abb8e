// Definitions of DBImpl's private helper types, shared by the db_impl*.cc
// files. Include only from them.

#ifndef SHALE_DB_DB_IMPL_INTERNAL_H_
#define SHALE_DB_DB_IMPL_INTERNAL_H_

#include <atomic>
#include <vector>

#include "db/db_impl.h"
#include "log/log_reader.h"
#include "util/mutex.h"

namespace shale {

// One caller of Write() (or an exclusive section), queued until it leads
// a group or a leader has written its batch for it.
struct DBImpl::Writer {
  explicit Writer(Mutex* mu) : cv(mu) {}

  Slice batch;  // the caller's whole batch, header included
  uint32_t count = 0;
  bool sync = false;
  bool disable_wal = false;
  bool no_slowdown = false;
  // Holds the queue without writing (memtable switch, ingestion).
  bool exclusive = false;

  bool done = false;  // guarded by mutex_
  Status status;      // set by the leader before done
  CondVar cv;
};

// What a reader needs to see the database: the memtables and the file
// set. Immutable once installed; readers hold a reference instead of the
// DB mutex while they read.
struct DBImpl::SuperVersion {
  MemTable* mem = nullptr;
  std::vector<MemTable*> imm;  // immutable memtables, newest first
  Version* current = nullptr;
  std::atomic<int> refs{1};
  uint64_t number = 0;  // DBImpl::super_version_number_ when installed
};

// Collects what a log::Reader reports while a WAL is replayed.
class DBImpl::LogReporter : public log::Reader::Reporter {
 public:
  void Corruption(uint64_t offset, size_t bytes,
                  const Status& reason) override {
    if (!reason.IsCorruption()) {
      if (io_error.ok()) io_error = reason;
      return;
    }
    if (!damaged) {
      damaged = true;
      first_damage = reason;
    }
  }

  bool damaged = false;
  Status first_damage;  // the first damage met
  Status io_error;      // a read failure (not damage)
};

}  // namespace shale

#endif  // SHALE_DB_DB_IMPL_INTERNAL_H_
