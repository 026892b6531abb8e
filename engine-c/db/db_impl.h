// DBImpl: one open database - the write path with group commit, the WAL,
// memtables, recovery, point reads, iterators and snapshots.
//
// Thread safety: a DBImpl is safe for concurrent use by many threads
// without external synchronization. Iterators it returns are for one thread
// at a time; snapshots may be shared.

#ifndef SHALE_DB_DB_IMPL_H_
#define SHALE_DB_DB_IMPL_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "db/dbformat.h"
#include "db/options.h"
#include "db/snapshot.h"
#include "log/log_writer.h"
#include "util/env.h"
#include "util/mutex.h"
#include "util/statistics.h"
#include "util/thread_annotations.h"

namespace shale {

class DBIter;
class GetContext;
class MemTable;
class WritableFile;

// Counters and state, as shale_stats_t reports them (engine.h).
struct DBStats {
  uint64_t user_bytes_written = 0;
  uint64_t user_keys_written = 0;
  uint64_t wal_bytes_written = 0;
  uint64_t wal_syncs = 0;
  uint64_t flush_bytes_written = 0;
  uint64_t compaction_bytes_written = 0;
  uint64_t compaction_bytes_read = 0;
  uint64_t bytes_read = 0;
  uint64_t keys_read = 0;
  uint64_t stall_micros = 0;
  uint64_t block_cache_hits = 0;
  uint64_t block_cache_misses = 0;
  uint64_t block_cache_usage = 0;
  uint64_t block_cache_capacity = 0;
  uint64_t bloom_filter_checked = 0;
  uint64_t bloom_filter_useful = 0;
  uint64_t memtable_bytes = 0;
  uint64_t num_immutable_memtables = 0;
  uint64_t flush_count = 0;
  uint64_t compaction_count = 0;
  uint64_t running_flushes = 0;
  uint64_t running_compactions = 0;
  uint64_t pending_compaction_bytes = 0;
  uint64_t last_sequence = 0;
  uint64_t num_snapshots = 0;
  uint64_t live_sst_bytes = 0;
  uint64_t wal_file_bytes = 0;
  int background_error = 0;  // a Status::Code
  int num_levels = 0;
  uint64_t level_files[kMaxLevels] = {};
  uint64_t level_bytes[kMaxLevels] = {};
};

class DBImpl {
 public:
  // Opens (creating it if options allow) the database in directory dbname
  // and replays its WALs.
  static Status Open(const Options& options, const std::string& dbname,
                     std::unique_ptr<DBImpl>* db);

  // Deletes the database's files in dbname (and the directory, once
  // empty). Fails if the database is open.
  static Status Destroy(const std::string& dbname, Env* env = nullptr);

  DBImpl(const DBImpl&) = delete;
  DBImpl& operator=(const DBImpl&) = delete;
  // Closes the database if Close() was not called.
  ~DBImpl();

  // Stops background work and releases the files. Fails with
  // InvalidArgument (leaving the DB open) while iterators or snapshots are
  // outstanding. After success the only call allowed is the destructor.
  Status Close();

  // Applies a WriteBatch buffer (db/write_batch.h) atomically.
  Status Write(const WriteOptions& options, const Slice& batch);

  // Point lookup into a string. NotFound if the key has no live value.
  Status Get(const ReadOptions& options, const Slice& key, std::string* value);

  // Point lookup into a caller buffer: on OK, *value_len is the value's
  // length and the value is in buf. If it does not fit in cap bytes,
  // returns BufferTooSmall with *value_len set and copies nothing.
  Status Get(const ReadOptions& options, const Slice& key, char* buf,
             size_t cap, size_t* value_len);

  // n lookups at one consistent sequence number: values[i] and
  // statuses[i] (OK, NotFound or an error) for keys[i].
  void MultiGet(const ReadOptions& options, size_t n, const Slice* keys,
                std::string* values, Status* statuses);

  // An iterator over the live keys in [lower, upper) (nullptr: unbounded),
  // as of options.snapshot or now. The caller deletes it before Close().
  DBIter* NewIterator(const ReadOptions& options, const Slice* lower,
                      const Slice* upper);

  const Snapshot* GetSnapshot();
  void ReleaseSnapshot(const Snapshot* snapshot);

  // Clears a stored background error once its cause is gone.
  Status Resume();

  // Not yet implemented in this milestone: NotSupported.
  Status Flush(bool wait);
  Status CompactRange(const Slice* begin, const Slice* end);
  Status WaitForCompaction();

  void GetStats(DBStats* stats);
  // "shale.stats", "shale.levelstats", "shale.sstables".
  bool GetProperty(const Slice& name, std::string* value);
  Status ApproximateSize(const Slice& begin, const Slice& end, uint64_t* bytes,
                         uint64_t* keys);

  SequenceNumber LastSequence() const {
    return last_sequence_.load(std::memory_order_acquire);
  }
  Statistics* statistics() { return &stats_; }
  const Options& options() const { return options_; }
  const std::string& name() const { return dbname_; }

 private:
  struct Writer;
  struct SuperVersion;
  class LogReporter;

  DBImpl(const Options& options, const std::string& dbname);

  Status Recover() EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  Status RecoverLogFile(uint64_t number, bool last_log, bool* stop_replay,
                        uint64_t* good_end, bool* damaged)
      EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  Status NewWal() EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  // Write path.
  Status MakeRoomForWrite(bool no_slowdown) EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Picks the writers (from the front of writers_) that join the front
  // writer's group; returns the last one. Fills group_.
  Writer* BuildBatchGroup() EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void RecordBackgroundError(const Status& s, const std::string& what)
      EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  // Reads.
  SuperVersion* AcquireSuperVersion() LOCKS_EXCLUDED(mutex_);
  void ReleaseSuperVersion(SuperVersion* sv) LOCKS_EXCLUDED(mutex_);
  void InstallSuperVersion() EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  SequenceNumber ReadSequence(const ReadOptions& options) const;
  // Runs a point lookup through every source of sv.
  void GetFromSources(SuperVersion* sv, const Slice& key, GetContext* ctx);
  static void CleanupIterator(void* db, void* sv);

  Status ShutDown() EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const Options options_;
  Env* const env_;
  const std::string dbname_;
  const InternalKeyComparator icmp_;
  Statistics stats_;

  std::unique_ptr<FileLock> db_lock_;

  // Written under mutex_ by the write leader after its group's entries are
  // in the memtable; read lock-free by readers (acquire).
  std::atomic<SequenceNumber> last_sequence_{0};
  std::atomic<int> live_iterators_{0};

  Mutex mutex_;
  bool shutting_down_ GUARDED_BY(mutex_) = false;
  bool closed_ GUARDED_BY(mutex_) = false;

  // The active memtable. Switched only by the write leader, under mutex_;
  // the write leader may use it without mutex_ while it inserts.
  MemTable* mem_ = nullptr;
  // What readers see; replaced under mutex_.
  SuperVersion* super_version_ GUARDED_BY(mutex_) = nullptr;

  // The WAL being written. Used by the write leader without mutex_ while it
  // appends; replaced under mutex_ only when no leader is writing.
  std::unique_ptr<WritableFile> log_file_;
  std::unique_ptr<log::Writer> log_;
  uint64_t log_number_ GUARDED_BY(mutex_) = 0;
  // Every WAL still needed for recovery, oldest first, including the
  // current one.
  std::vector<uint64_t> live_logs_ GUARDED_BY(mutex_);
  uint64_t next_file_number_ GUARDED_BY(mutex_) = 1;

  // Writers waiting their turn; the front one is the leader.
  std::deque<Writer*> writers_ GUARDED_BY(mutex_);
  // The leader's group and the WAL record pieces (reused, leader only).
  std::vector<Writer*> group_;
  std::vector<Slice> wal_parts_;

  SnapshotList snapshots_ GUARDED_BY(mutex_);

  // The first error that stopped writes, or OK. Cleared by Resume().
  Status bg_error_ GUARDED_BY(mutex_);
  // An append to the current WAL failed; Resume() cuts it back to
  // wal_good_length_ (its last complete record) and starts a new WAL.
  bool wal_failed_ GUARDED_BY(mutex_) = false;
  uint64_t wal_good_length_ GUARDED_BY(mutex_) = 0;
};

}  // namespace shale

#endif  // SHALE_DB_DB_IMPL_H_
