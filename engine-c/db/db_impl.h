// DBImpl: one open database.
//
// Its work is split over files by concern:
//   db_impl.cc             open, recovery, close, destroy, stats
//   db_impl_write.cc       the write path: group commit, WAL, memtable
//                          switches, write stalls
//   db_impl_read.cc        Get, MultiGet, iterators, snapshots
//   db_impl_background.cc  flush and compaction threads, manual flush and
//                          compaction, obsolete-file deletion, Resume
//   db_impl_files.cc       SST ingestion and checkpoints
//
// Threads and locks. mutex_ guards the state marked GUARDED_BY below; it is
// never held during file I/O of the write path (WAL appends and fsyncs) or
// of flushes and compactions. Writers queue in writers_; the one at the
// front (the leader) writes its group to the WAL and the memtable without
// mutex_, and only the leader may switch the memtable or the WAL. Readers
// take a reference to the current SuperVersion (memtables + Version) and
// read without mutex_. max_background_jobs threads run flushes (at most one
// at a time, oldest memtable first, always with priority) and compactions
// (at most max_background_jobs - 1 when there are two or more threads, so a
// flush never waits behind compactions).
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
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "db/compaction.h"
#include "db/dbformat.h"
#include "db/options.h"
#include "db/snapshot.h"
#include "db/version_edit.h"
#include "log/log_writer.h"
#include "table/options.h"
#include "util/env.h"
#include "util/mutex.h"
#include "util/statistics.h"
#include "util/thread_annotations.h"

namespace shale {

class Cache;
class DBIter;
class FilterPolicy;
class GetContext;
class MemTable;
class TableCache;
class Version;
class VersionEdit;
class VersionSet;
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
  // Opens (creating it if options allow) the database in directory dbname,
  // recovers its MANIFEST and WALs, and starts the background threads.
  static Status Open(const Options& options, const std::string& dbname,
                     std::unique_ptr<DBImpl>* db);

  // Deletes the database's files in dbname (and the directory, once
  // empty). Fails if the database is open.
  static Status Destroy(const std::string& dbname, Env* env = nullptr);

  DBImpl(const DBImpl&) = delete;
  DBImpl& operator=(const DBImpl&) = delete;
  // Closes the database if Close() was not called.
  ~DBImpl();

  // Stops background work (flushing first what was written without the
  // WAL) and releases the files. Fails with InvalidArgument, leaving the DB
  // open, while iterators or snapshots are outstanding. After success the
  // only call allowed is the destructor.
  Status Close();

  // Applies a WriteBatch buffer (db/write_batch.h) atomically.
  Status Write(const WriteOptions& options, const Slice& batch);

  // Makes every write that returned before the call durable by syncing the
  // WAL, without holding the write queue while the sync runs: writes go on
  // meanwhile (a synced Write holds the queue through its fsync). Older
  // WALs retired unsynced are synced first (retired_wals_). A failed sync
  // stops writes like a failed WAL append.
  Status SyncWAL();

  // Point lookup into a string. NotFound if the key has no live value.
  Status Get(const ReadOptions& options, const Slice& key, std::string* value);

  // Point lookup into a caller buffer: on OK, *value_len is the value's
  // length and the value is in buf. If it does not fit in cap bytes,
  // returns BufferTooSmall with *value_len set and copies nothing.
  Status Get(const ReadOptions& options, const Slice& key, char* buf,
             size_t cap, size_t* value_len);

  // n lookups at one consistent sequence number: values[i] and
  // statuses[i] (OK, NotFound or an error) for keys[i]. Keys are sorted
  // internally and each SST is probed once for all the keys it may hold.
  void MultiGet(const ReadOptions& options, size_t n, const Slice* keys,
                std::string* values, Status* statuses);

  // Called by SeekPrefix with read i's entry; key and value live until the
  // call returns.
  using SeekPrefixCallback = void (*)(void* arg, size_t i, const Slice& key,
                                      const Slice& value);

  // Versioned point reads, n of them at one consistent sequence number
  // (options.snapshot's or the latest). Read i finds the first live key at
  // or after targets[i] among the versions of targets[i]'s key: the keys
  // whose unversioned part (the key without its version suffix, which is
  // what the Bloom filters hold under split_version_suffix) equals
  // targets[i]'s. It reads only the tables whose key range meets
  // [target, the end of the keys starting with that part) and whose
  // filter may hold the part, so a read of an absent key costs filter
  // probes and no data block. Keys with another unversioned part are
  // passed over. statuses[i]: OK after callback(arg, i, key, value);
  // NotFound; InvalidArgument when targets[i] is not a versioned key;
  // NotSupported for every read without split_version_suffix; or a read
  // error.
  void SeekPrefix(const ReadOptions& options, size_t n, const Slice* targets,
                  Status* statuses, void* arg, SeekPrefixCallback callback);

  // An iterator over the live keys in [lower, upper) (nullptr: unbounded),
  // as of options.snapshot or now. The caller deletes it before Close().
  DBIter* NewIterator(const ReadOptions& options, const Slice* lower,
                      const Slice* upper);

  const Snapshot* GetSnapshot();
  void ReleaseSnapshot(const Snapshot* snapshot);

  // Clears a stored background error once its cause is gone, and retries
  // the work that failed.
  Status Resume();

  // Writes the memtable to an L0 file; with wait, returns once it is
  // durable.
  Status Flush(bool wait);
  // Compacts the files holding keys in [begin, end] (nullptr: unbounded)
  // down to the lowest level that holds data.
  Status CompactRange(const Slice* begin, const Slice* end);
  // Blocks until no flush or compaction is pending or running.
  Status WaitForCompaction();

  // Ingests SST files made by SstFileWriter as one new write.
  Status Ingest(const std::vector<std::string>& paths);
  // A consistent copy of the database in dir (which must not exist).
  Status Checkpoint(const std::string& dir);

  void GetStats(DBStats* stats);
  // "shale.stats", "shale.levelstats", "shale.sstables".
  bool GetProperty(const Slice& name, std::string* value);
  // Estimated bytes and entries on disk for keys in [begin, end); end ==
  // nullptr means no upper bound.
  Status ApproximateSize(const Slice& begin, const Slice* end, uint64_t* bytes,
                         uint64_t* keys);

  // Tests only: copies of the metadata of level's files (in the current
  // version).
  std::vector<FileMetaData> TEST_LevelFiles(int level);
  // Tests only: compactions finished since open that wrote a deep range
  // (an L0 compaction writing part of its output to L2; compaction.h).
  uint64_t TEST_DeepCompactions();

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

  // ---- db_impl.cc
  Status Recover(VersionEdit* edit) EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  Status NewDB() EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Where WAL replay stands, from one WAL to the next.
  struct WalReplay {
    bool stop = false;           // replay no further WAL
    int wals_read = 0;           // WALs replayed before this one
    bool have_end = false;       // end_seq is known
    SequenceNumber end_seq = 0;  // the last sequence of the last record read
    // Non-empty: the WAL read last ended in a damaged (torn) record; what
    // the damage is. Acceptable only if the next WAL's opening record shows
    // that WAL lost its tail in a power loss.
    std::string torn;
  };
  // Replays WAL number into mem_, flushing to L0 (in edit) as it fills.
  // last_log: no newer WAL exists.
  Status RecoverLogFile(uint64_t number, bool last_log, VersionEdit* edit,
                        WalReplay* replay) EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Writes mem to an L0 file during recovery, recording it in edit.
  Status WriteLevel0Table(MemTable* mem, VersionEdit* edit)
      EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  Status ShutDown() EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  // ---- db_impl_write.cc
  // Becomes the write leader without writing (for memtable switches and
  // ingestion outside the write path); ExitExclusiveWrite hands over.
  void EnterExclusiveWrite(Writer* w) EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void ExitExclusiveWrite(Writer* w) EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Like EnterExclusiveWrite, but gives up (returning false, not queued)
  // if the leader is stopped on a write stall, which may only clear after
  // the caller's work.
  bool EnterExclusiveWriteUnlessStalled(Writer* w)
      EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Waits (or delays) until the memtable has room. REQUIRES: the caller is
  // the write leader.
  Status MakeRoomForWrite(bool no_slowdown, uint64_t bytes)
      EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Starts a new WAL (its opening record first) and a new memtable,
  // queues the old memtable for flushing and retires the old WAL unsynced
  // (retired_wals_). REQUIRES: the caller is the write leader.
  Status SwitchMemtable() EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  Writer* BuildBatchGroup() EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Completes queued no_slowdown writers with Busy (a stall is starting).
  void FailNoSlowdownWriters(const Status& busy)
      EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  uint64_t WriteDelayMicros(uint64_t bytes) EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Starts WAL number in place of log_file_ (at open, and after Resume cut
  // a failed WAL back). The old file, if any, must be closed by the caller.
  Status NewWal(uint64_t number) EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Appends the opening record of a new WAL to w: an empty batch whose
  // sequence is wal_end_seq_, the last sequence the WAL before it holds.
  // Recovery compares it with what it found in that WAL (RecoverLogFile).
  // REQUIRES: the caller is the write leader (or writes are stopped).
  Status AppendWalOpening(log::Writer* w);
  // Syncs every WAL in retired_wals_ and forgets it, so that a sync of the
  // current WAL covers every write acknowledged before it.
  // REQUIRES: mutex_ not held.
  Status SyncRetiredWals() LOCKS_EXCLUDED(mutex_);
  // Waits until no SyncWAL is syncing log_file_, so that it may be closed.
  void WaitForWalSyncs() EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void RecordBackgroundError(const Status& s, const std::string& what)
      EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  // ---- db_impl_read.cc
  SuperVersion* AcquireSuperVersion() LOCKS_EXCLUDED(mutex_);
  void ReleaseSuperVersion(SuperVersion* sv) LOCKS_EXCLUDED(mutex_);
  // A point read's SuperVersion: the one this thread's slot holds when it
  // is still current (no lock, no reference count touched), else the
  // current one, taken under mutex_ into the slot. *slot is what
  // ReturnLocalSuperVersion needs (null: sv was referenced as by
  // AcquireSuperVersion, e.g. for a read nested in another).
  SuperVersion* GetLocalSuperVersion(std::atomic<void*>** slot)
      LOCKS_EXCLUDED(mutex_);
  void ReturnLocalSuperVersion(SuperVersion* sv, std::atomic<void*>* slot)
      LOCKS_EXCLUDED(mutex_);
  // This thread's slot (registered in local_svs_ on first use).
  std::atomic<void*>* LocalSuperVersionSlot() LOCKS_EXCLUDED(mutex_);
  // Empties every thread's slot, dropping the references they hold, so a
  // replaced SuperVersion is not kept alive by idle threads.
  void ScrapeLocalSuperVersions() EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void ReleaseSuperVersionLocked(SuperVersion* sv)
      EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void InstallSuperVersion() EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // A new, empty memtable whose first writes are in WAL log_number, with
  // the filter of unversioned keys under split_version_suffix.
  MemTable* NewMemTable(uint64_t log_number) EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  SequenceNumber ReadSequence(const ReadOptions& options) const;
  TableReadOptions ToTableReadOptions(const ReadOptions& options) const;
  // Runs a point lookup through every source of sv. Returns a read error.
  Status GetFromSources(const ReadOptions& options, SuperVersion* sv,
                        const Slice& key, GetContext* ctx);
  static void CleanupIterator(void* db, void* sv);

  // ---- db_impl_background.cc
  void StartBackgroundThreads() EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void BackgroundLoop();
  // One read of SeekPrefix under sv at seq: the first live key at or
  // after target whose unversioned part is prefix, below upper (nullptr:
  // unbounded).
  Status SeekPrefixOne(SuperVersion* sv, SequenceNumber seq,
                       const TableReadOptions& tro, const Slice& target,
                       const Slice& prefix, const Slice* upper, void* arg,
                       size_t i, SeekPrefixCallback callback);
  // SeekPrefixOne without an iterator: each source offers its first entry
  // at or after target. Returns false, having called nothing, when that
  // does not decide the read (the newest entry of the key it finds is a
  // deletion or under a range tombstone, an entry is newer than seq or of
  // another unversioned part, or a source failed); SeekPrefixOne then
  // reads with an iterator.
  bool SeekPrefixPoint(SuperVersion* sv, SequenceNumber seq,
                       const TableReadOptions& tro, const Slice& target,
                       const Slice& prefix, const Slice* upper, void* arg,
                       size_t i, SeekPrefixCallback callback, Status* status);

  Status FlushOneMemTable() EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Runs c (trivial move or compaction job) and installs the result;
  // releases mutex_ while working. Deletes c.
  Status RunCompaction(Compaction* c) EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  bool NeedsCompaction() EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // A new file number, protected from obsolete-file deletion until
  // pending_outputs_ drops it.
  uint64_t NewPendingOutput() EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void DeleteObsoleteFiles() EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Switches a non-empty memtable and waits for every memtable up to it
  // to be flushed.
  Status FlushAndWait() EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  // ---- db_impl_files.cc
  Status IngestLocked(const std::vector<std::string>& paths)
      EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const Options options_;
  Env* const env_;
  const std::string dbname_;
  const InternalKeyComparator icmp_;
  Statistics stats_;
  std::unique_ptr<const FilterPolicy> filter_policy_;
  std::unique_ptr<Cache> block_cache_;
  TableOptions table_options_;
  std::unique_ptr<TableCache> table_cache_;
  const CompactionPicker picker_;

  std::unique_ptr<FileLock> db_lock_;

  // Written under mutex_ by the write leader after its group's entries are
  // in the memtable; read lock-free by readers (acquire).
  std::atomic<SequenceNumber> last_sequence_{0};
  std::atomic<int> live_iterators_{0};
  // Set when closing; checked by running compactions without mutex_.
  std::atomic<bool> shutting_down_{false};

  Mutex mutex_;
  std::unique_ptr<VersionSet> versions_;     // guarded by mutex_
  bool closing_ GUARDED_BY(mutex_) = false;  // no new writes
  bool closed_ GUARDED_BY(mutex_) = false;

  // The active memtable. Switched only by the write leader, under mutex_;
  // the write leader may use it without mutex_ while it inserts.
  MemTable* mem_ = nullptr;
  // Memtables waiting to be flushed, oldest first.
  std::deque<MemTable*> imm_ GUARDED_BY(mutex_);
  uint64_t next_memtable_id_ GUARDED_BY(mutex_) = 1;
  // What readers see; replaced under mutex_.
  SuperVersion* super_version_ GUARDED_BY(mutex_) = nullptr;
  // super_version_'s number: each installed SuperVersion gets the next.
  // Read lock-free by point reads to tell whether a cached one is current.
  std::atomic<uint64_t> super_version_number_{0};
  // Per-thread cached SuperVersions (RocksDB's thread-local SuperVersion):
  // a slot holds one reference to a SuperVersion, or kSuperVersionInUse
  // while its thread reads with it, or null. A point read takes its
  // thread's slot's SuperVersion by one atomic exchange and puts it back by
  // one compare-and-swap, instead of taking mutex_ and changing the
  // reference count twice. InstallSuperVersion empties every slot (under
  // mutex_), so a slot holds the current SuperVersion or nothing. Slots
  // live as long as the DB; threads find theirs through a thread_local
  // cache keyed by id_.
  std::unordered_map<std::thread::id, std::unique_ptr<std::atomic<void*>>>
      local_svs_ GUARDED_BY(mutex_);

  // The WAL being written. Used by the write leader without mutex_ while it
  // appends; replaced under mutex_ only by the write leader.
  std::unique_ptr<WritableFile> log_file_;
  std::unique_ptr<log::Writer> log_;
  uint64_t log_number_ GUARDED_BY(mutex_) = 0;
  // The last sequence of the last record appended to a WAL (leader only):
  // the next WAL's opening record carries it.
  SequenceNumber wal_end_seq_ = 0;
  // WALs retired by a memtable switch and not synced since, oldest first.
  // A switch does not sync the old WAL: once its memtable is flushed it is
  // deleted, and if that happens before the kernel writes it back, its
  // bytes never reach the device (RocksDB's behaviour). Until then a sync
  // of the current WAL (a synced write, SyncWAL) syncs these first, so it
  // still makes every earlier write durable. Shared with syncs running
  // without mutex_; dropped (closed) once their memtable is flushed.
  struct RetiredWal {
    uint64_t number;
    std::shared_ptr<WritableFile> file;
  };
  std::vector<RetiredWal> retired_wals_ GUARDED_BY(mutex_);
  // Writes went to the memtable only since the last switch: flushed on
  // close so they are not lost.
  bool unpersisted_writes_ GUARDED_BY(mutex_) = false;

  // Writers waiting their turn; the front one is the leader.
  std::deque<Writer*> writers_ GUARDED_BY(mutex_);
  // The leader's group and the WAL record pieces (reused, leader only).
  std::vector<Writer*> group_;
  std::vector<Slice> wal_parts_;
  // Write pacing while slowed down (db_impl_write.cc).
  uint64_t delayed_write_next_micros_ GUARDED_BY(mutex_) = 0;
  // The write leader is waiting for a stop condition to clear.
  bool write_stopped_ GUARDED_BY(mutex_) = false;
  // While write_stopped_: why, as the Busy status a no_slowdown writer
  // arriving then gets at once.
  Status write_stop_status_ GUARDED_BY(mutex_);

  SnapshotList snapshots_ GUARDED_BY(mutex_);

  // Background work.
  std::vector<std::thread> bg_threads_;
  CondVar bg_work_cv_;  // wakes background threads: work may be available
  CondVar bg_done_cv_;  // wakes waiters: a job finished or state changed
  // SyncWAL calls syncing log_file_ without mutex_. log_file_ is not
  // closed or replaced until they are done (WaitForWalSyncs).
  int wal_syncs_running_ GUARDED_BY(mutex_) = 0;
  CondVar wal_sync_cv_;
  bool flush_running_ GUARDED_BY(mutex_) = false;
  std::vector<Compaction*> running_compactions_ GUARDED_BY(mutex_);
  uint64_t deep_compactions_ GUARDED_BY(mutex_) = 0;
  int max_compactions_ = 1;
  std::set<uint64_t> pending_outputs_ GUARDED_BY(mutex_);
  int file_deletions_disabled_ GUARDED_BY(mutex_) = 0;

  // The first error that stopped writes, or OK. Cleared by Resume().
  Status bg_error_ GUARDED_BY(mutex_);
  // An append to the current WAL failed; Resume() cuts it back to
  // wal_good_length_ (its last complete record) and starts a new WAL.
  bool wal_failed_ GUARDED_BY(mutex_) = false;
  uint64_t wal_good_length_ GUARDED_BY(mutex_) = 0;

  const uint64_t id_;  // unique per DBImpl in the process, never reused
};

}  // namespace shale

#endif  // SHALE_DB_DB_IMPL_H_
