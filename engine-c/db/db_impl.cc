// DBImpl: open, recovery, close, destroy, statistics and properties.

#include "db/db_impl.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <random>

#include "db/builder.h"
#include "db/db_impl_internal.h"
#include "db/filename.h"
#include "db/filter_key.h"
#include "db/memtable.h"
#include "db/table_cache.h"
#include "db/version_set.h"
#include "db/write_batch.h"
#include "log/log_reader.h"
#include "util/cache.h"

namespace shale {

namespace {
std::atomic<uint64_t> next_db_id{1};
}  // namespace

DBImpl::DBImpl(const Options& options, const std::string& dbname)
    : options_(options),
      env_(options.env != nullptr ? options.env : Env::Default()),
      dbname_(dbname),
      icmp_(BytewiseComparator()),
      picker_(options_, &icmp_),
      bg_work_cv_(&mutex_),
      bg_done_cv_(&mutex_),
      wal_sync_cv_(&mutex_),
      id_(next_db_id.fetch_add(1, std::memory_order_relaxed)) {
  filter_policy_ = NewInternalFilterPolicy(options_);
  if (options_.block_cache_size > 0) {
    block_cache_.reset(NewLRUCache(options_.block_cache_size));
  }
  table_options_.comparator = &icmp_;
  table_options_.filter_policy = filter_policy_.get();
  table_options_.block_size = options_.block_size;
  table_options_.block_restart_interval = options_.block_restart_interval;
  table_options_.compression = options_.compression;
  table_options_.block_cache = block_cache_.get();
  table_options_.cache_index_and_filter_blocks =
      options_.cache_index_and_filter_blocks;
  table_options_.statistics = &stats_;
  table_cache_ = std::make_unique<TableCache>(dbname_, env_, table_options_,
                                              options_.max_open_files,
                                              options_.use_mmap_reads);
  versions_ = std::make_unique<VersionSet>(dbname_, &options_, env_,
                                           table_cache_.get(), &icmp_, &mutex_);
  max_compactions_ =
      options_.max_background_jobs >= 2 ? options_.max_background_jobs - 1 : 1;
}

DBImpl::~DBImpl() {
  MutexLock l(&mutex_);
  if (!closed_) ShutDown();
}

MemTable* DBImpl::NewMemTable(uint64_t log_number) {
  return new MemTable(
      icmp_, next_memtable_id_++, log_number, options_.write_buffer_size,
      options_.split_version_suffix ? &options_.versioned_key_prefix : nullptr);
}

Status DBImpl::Open(const Options& options, const std::string& dbname,
                    std::unique_ptr<DBImpl>* dbptr) {
  dbptr->reset();
  Status s = options.Validate();
  if (!s.ok()) return s;
  if (dbname.empty()) return Status::InvalidArgument("open: empty path");
  std::unique_ptr<DBImpl> db(new DBImpl(options, dbname));
  {
    MutexLock l(&db->mutex_);
    VersionEdit edit;
    s = db->Recover(&edit);
    if (s.ok()) {
      // Everything recovered is in L0 files now: the old WALs retire with
      // the edit that names the new one.
      const uint64_t log_number = db->versions_->NewFileNumber();
      s = db->NewWal(log_number);
      if (s.ok()) {
        db->mem_ = db->NewMemTable(log_number);
        edit.SetLogNumber(log_number);
        edit.SetLastSequence(db->LastSequence());
        s = db->versions_->LogAndApply(&edit);
      }
    }
    if (s.ok()) {
      db->InstallSuperVersion();
      db->DeleteObsoleteFiles();
      // Every table is opened now rather than by the first read of it.
      Version* v = db->versions_->current();
      for (int level = 0; level < v->num_levels(); level++) {
        for (FileMetaData* f : v->files(level)) db->table_cache_->Preload(f);
      }
      db->StartBackgroundThreads();
    }
  }
  if (!s.ok()) return s;  // the destructor releases what was acquired
  *dbptr = std::move(db);
  return Status::OK();
}

Status DBImpl::NewDB() {
  mutex_.AssertHeld();
  // A directory with data files but no CURRENT is a damaged database, not
  // an empty one: refuse rather than start over on top of it.
  std::vector<std::string> children;
  Status s = env_->GetChildren(dbname_, &children);
  if (!s.ok()) return s;
  for (const std::string& child : children) {
    uint64_t number;
    FileType type;
    if (ParseFileName(child, &number, &type) &&
        (type == FileType::kLogFile || type == FileType::kTableFile ||
         type == FileType::kDescriptorFile)) {
      return Status::Corruption(
          dbname_, "holds " + child +
                       " but no CURRENT file: not creating a new database "
                       "over it");
    }
  }
  if (!env_->FileExists(IdentityFileName(dbname_))) {
    // The database's identity: a random 128-bit number.
    std::random_device rd;
    char id[40];
    snprintf(id, sizeof(id), "%08x%08x%08x%08x\n", rd(), rd(), rd(), rd());
    s = WriteStringToFile(env_, id, IdentityFileName(dbname_), true);
    if (!s.ok()) return s;
  }
  return versions_->CreateNew();
}

Status DBImpl::Recover(VersionEdit* edit) {
  mutex_.AssertHeld();
  Status s;
  if (!env_->FileExists(dbname_)) {
    if (!options_.create_if_missing) {
      return Status::InvalidArgument(
          dbname_, "does not exist (create_if_missing is false)");
    }
    s = env_->CreateDir(dbname_);
    if (!s.ok() && !env_->FileExists(dbname_)) return s;
  }
  s = env_->LockFile(LockFileName(dbname_), &db_lock_);
  if (!s.ok()) return s;

  if (!env_->FileExists(CurrentFileName(dbname_))) {
    if (!options_.create_if_missing) {
      return Status::InvalidArgument(
          dbname_, "is not a database (create_if_missing is false)");
    }
    s = NewDB();
    if (!s.ok()) return s;
  } else if (options_.error_if_exists) {
    return Status::InvalidArgument(dbname_, "exists (error_if_exists is true)");
  }
  s = versions_->Recover();
  if (!s.ok()) return s;
  last_sequence_.store(versions_->RecoveredLastSequence(),
                       std::memory_order_release);

  // Every file the MANIFEST names must be there; WALs newer than the last
  // flush are replayed.
  std::vector<std::string> children;
  s = env_->GetChildren(dbname_, &children);
  if (!s.ok()) return s;
  std::set<uint64_t> expected;
  versions_->AddLiveFiles(&expected);
  std::vector<uint64_t> logs;
  for (const std::string& child : children) {
    uint64_t number;
    FileType type;
    if (!ParseFileName(child, &number, &type)) continue;
    if (type == FileType::kTableFile) expected.erase(number);
    if (type == FileType::kLogFile && number >= versions_->LogNumber()) {
      logs.push_back(number);
    }
  }
  if (!expected.empty()) {
    return Status::Corruption(
        dbname_, std::to_string(expected.size()) +
                     " table file(s) named by the MANIFEST are missing, e.g. " +
                     TableFileName(dbname_, *expected.begin()));
  }
  std::sort(logs.begin(), logs.end());
  for (uint64_t number : logs) versions_->MarkFileNumberUsed(number);

  mem_ = NewMemTable(0);
  WalReplay replay;
  for (size_t i = 0; i < logs.size() && s.ok() && !replay.stop; i++) {
    s = RecoverLogFile(logs[i], i + 1 == logs.size(), edit, &replay);
  }
  // The replayed WALs are retired by the edit that follows recovery; the
  // next WAL starts after the last record found.
  wal_end_seq_ = last_sequence_.load(std::memory_order_relaxed);
  if (s.ok() && !mem_->empty()) s = WriteLevel0Table(mem_, edit);
  mem_->Unref();
  mem_ = nullptr;
  return s;
}

Status DBImpl::WriteLevel0Table(MemTable* mem, VersionEdit* edit) {
  mutex_.AssertHeld();
  FileMetaData meta;
  meta.number = NewPendingOutput();
  std::unique_ptr<Iterator> iter(mem->NewIterator());
  auto tombstones = mem->GetFragmentedTombstones();
  // Recovery runs before anyone else uses the DB: no need to unlock.
  Status s = BuildTable(dbname_, env_, table_options_, table_cache_.get(),
                        iter.get(), tombstones.get(), {}, &meta);
  pending_outputs_.erase(meta.number);
  if (s.ok() && meta.file_size > 0) {
    edit->AddFile(0, meta);
    stats_.Record(kFlushBytesWritten, meta.file_size);
    stats_.Record(kFlushCount);
  }
  return s;
}

Status DBImpl::RecoverLogFile(uint64_t number, bool last_log, VersionEdit* edit,
                              WalReplay* replay) {
  mutex_.AssertHeld();
  const std::string fname = LogFileName(dbname_, number);
  std::unique_ptr<SequentialFile> file;
  Status s = env_->NewSequentialFile(fname, &file);
  if (!s.ok()) return s;
  LogReporter reporter;
  log::Reader reader(file.get(), fname, &reporter, /*checksum=*/true);
  const WalRecoveryMode mode = options_.wal_recovery_mode;
  std::string scratch;
  Slice record;
  SequenceNumber max_seq = last_sequence_.load(std::memory_order_relaxed);
  bool damaged_in_middle = false;
  bool first = true;
  while (reader.ReadRecord(&record, &scratch)) {
    if (!reporter.io_error.ok()) return reporter.io_error;
    if (reporter.damaged) {
      // A good record after damage: the damage is not a torn tail.
      if (mode == WalRecoveryMode::kPointInTime) {
        damaged_in_middle = true;
        break;
      }
      return Status::Corruption(
          reporter.first_damage.message(),
          "valid records follow it, so it is not a torn tail");
    }
    WriteBatchSummary summary;
    s = ValidateWriteBatch(record, icmp_.user_comparator(), &summary);
    if (!s.ok()) {
      if (mode == WalRecoveryMode::kPointInTime) {
        damaged_in_middle = true;
        break;
      }
      return Status::Corruption(
          fname + ": bad write batch in the record at offset " +
              std::to_string(reader.LastRecordOffset()),
          s.message());
    }
    const SequenceNumber seq = DecodeFixed64(record.data());
    if (summary.count == 0) {
      // The opening record of a WAL: seq is the last sequence of the WAL
      // before it (SwitchMemtable does not sync that WAL).
      // A WAL before it that yielded no record at all lost even its own
      // opening record: it was never written back, so it is cut short too.
      const bool lost_whole = !replay->have_end && replay->wals_read > 0;
      if (first &&
          (lost_whole || (replay->have_end && seq != replay->end_seq))) {
        if (!lost_whole && seq < replay->end_seq) {
          return Status::Corruption(
              fname, "opens after sequence " + std::to_string(seq) +
                         " but the WAL before it reaches " +
                         std::to_string(replay->end_seq));
        }
        // The WAL before this one lost its tail (records up to seq): a
        // power loss before it was synced, while this one was written
        // back. Nothing here was synced either (a sync syncs the retired
        // WALs first), so the database is the prefix replayed so far.
        if (mode == WalRecoveryMode::kAbsoluteConsistency) {
          return Status::Corruption(
              fname, "the WAL before it ends short of sequence " +
                         std::to_string(seq) +
                         " and wal_recovery_mode is absolute consistency");
        }
        replay->stop = true;
        replay->torn.clear();
        break;
      }
      replay->end_seq = seq;
      replay->have_end = true;
      first = false;
      continue;
    }
    first = false;
    if (!replay->torn.empty()) {
      // The WAL before ended in damage, yet this one holds records that
      // follow it: damage, not a torn tail.
      return Status::Corruption(replay->torn,
                                "in a WAL that is not the newest");
    }
    InsertBatchRecords(Slice(record.data() + kBatchHeaderSize,
                             record.size() - kBatchHeaderSize),
                       seq, mem_);
    max_seq = std::max(max_seq, seq + summary.count - 1);
    replay->end_seq = seq + summary.count - 1;
    replay->have_end = true;
    if (mem_->ApproximateDataSize() >= options_.write_buffer_size) {
      s = WriteLevel0Table(mem_, edit);
      if (!s.ok()) return s;
      mem_->Unref();
      mem_ = NewMemTable(0);
    }
  }
  if (!reporter.io_error.ok()) return reporter.io_error;
  last_sequence_.store(max_seq, std::memory_order_release);
  replay->wals_read++;
  if (replay->stop) return Status::OK();
  if (damaged_in_middle) {
    replay->stop = true;
  } else if (reporter.damaged) {
    // Damage with nothing valid after it: a torn tail.
    switch (mode) {
      case WalRecoveryMode::kAbsoluteConsistency:
        return Status::Corruption(reporter.first_damage.message(),
                                  "wal_recovery_mode is absolute consistency");
      case WalRecoveryMode::kTolerateCorruptedTail:
        // In an older WAL, acceptable only if the next WAL's opening
        // record shows this one was cut short by a power loss, or if no
        // later WAL holds a record at all.
        if (!last_log) replay->torn = reporter.first_damage.message();
        break;
      case WalRecoveryMode::kPointInTime:
        replay->stop = true;
        break;
    }
  }
  // What was dropped is gone for good: the recovered data goes to L0 and
  // this WAL retires with the edit that follows recovery.
  return Status::OK();
}

Status DBImpl::Close() {
  MutexLock l(&mutex_);
  if (closed_) return Status::OK();
  const int iterators = live_iterators_.load(std::memory_order_acquire);
  const size_t snapshots = snapshots_.size();
  if (iterators > 0 || snapshots > 0) {
    return Status::InvalidArgument(
        "close: " + std::to_string(iterators) + " iterator(s) and " +
        std::to_string(snapshots) +
        " snapshot(s) are still open; release them first");
  }
  return ShutDown();
}

Status DBImpl::ShutDown() {
  mutex_.AssertHeld();
  closing_ = true;
  // Let queued writers finish: each leader hands over to the next.
  while (!writers_.empty()) {
    mutex_.Unlock();
    env_->SleepForMicroseconds(100);
    mutex_.Lock();
  }
  Status s;
  if (unpersisted_writes_ && bg_error_.ok() && !bg_threads_.empty()) {
    // Writes made without the WAL exist only in memory: flush them.
    s = FlushAndWait();
  }
  shutting_down_.store(true, std::memory_order_release);
  bg_work_cv_.SignalAll();
  bg_done_cv_.SignalAll();
  std::vector<std::thread> threads;
  threads.swap(bg_threads_);
  mutex_.Unlock();
  for (std::thread& t : threads) t.join();
  mutex_.Lock();

  WaitForWalSyncs();
  log_.reset();
  if (log_file_ != nullptr) {
    Status c = log_file_->Close();
    if (s.ok()) s = c;
    log_file_.reset();
  }
  retired_wals_.clear();  // closes them; no sync is running any more
  ScrapeLocalSuperVersions();
  if (super_version_ != nullptr) {
    ReleaseSuperVersionLocked(super_version_);
    super_version_ = nullptr;
  }
  if (mem_ != nullptr) {
    mem_->Unref();
    mem_ = nullptr;
  }
  for (MemTable* m : imm_) m->Unref();
  imm_.clear();
  // Versions release their files (and pinned tables) before the caches go.
  versions_.reset();
  table_cache_.reset();
  block_cache_.reset();
  db_lock_.reset();
  closed_ = true;
  return s;
}

Status DBImpl::Destroy(const std::string& dbname, Env* env) {
  if (env == nullptr) env = Env::Default();
  std::vector<std::string> children;
  Status s = env->GetChildren(dbname, &children);
  if (!s.ok()) {
    // Nothing to destroy.
    return s.IsNotFound() ? Status::OK() : s;
  }
  std::unique_ptr<FileLock> lock;
  s = env->LockFile(LockFileName(dbname), &lock);
  if (!s.ok()) return s;
  Status result;
  for (const std::string& child : children) {
    uint64_t number;
    FileType type;
    if (!ParseFileName(child, &number, &type) || type == FileType::kLockFile) {
      continue;
    }
    Status del = env->RemoveFile(dbname + "/" + child);
    if (result.ok() && !del.ok()) result = del;
  }
  lock.reset();
  env->RemoveFile(LockFileName(dbname));
  // Leaves the directory if it holds files that are not the engine's.
  env->RemoveDir(dbname);
  return result;
}

// ------------------------------------------------------------ statistics

uint64_t DBImpl::TEST_DeepCompactions() {
  MutexLock l(&mutex_);
  return deep_compactions_;
}

std::vector<FileMetaData> DBImpl::TEST_LevelFiles(int level) {
  MutexLock l(&mutex_);
  std::vector<FileMetaData> r;
  for (const FileMetaData* f : versions_->current()->files(level)) {
    r.push_back(*f);
  }
  return r;
}

void DBImpl::GetStats(DBStats* out) {
  *out = DBStats();
  out->user_bytes_written = stats_.Get(kUserBytesWritten);
  out->user_keys_written = stats_.Get(kUserKeysWritten);
  out->wal_bytes_written = stats_.Get(kWalBytesWritten);
  out->wal_syncs = stats_.Get(kWalSyncs);
  out->flush_bytes_written = stats_.Get(kFlushBytesWritten);
  out->compaction_bytes_written = stats_.Get(kCompactionBytesWritten);
  out->compaction_bytes_read = stats_.Get(kCompactionBytesRead);
  out->bytes_read = stats_.Get(kBytesRead);
  out->keys_read = stats_.Get(kKeysRead);
  out->stall_micros = stats_.Get(kStallMicros);
  out->block_cache_hits = stats_.Get(kBlockCacheHit);
  out->block_cache_misses = stats_.Get(kBlockCacheMiss);
  out->bloom_filter_checked = stats_.Get(kBloomFilterChecked);
  out->bloom_filter_useful = stats_.Get(kBloomFilterUseful);
  out->flush_count = stats_.Get(kFlushCount);
  out->compaction_count = stats_.Get(kCompactionCount);
  out->last_sequence = LastSequence();
  out->num_levels = options_.num_levels;

  MutexLock l(&mutex_);
  if (block_cache_ != nullptr) {
    out->block_cache_usage = block_cache_->TotalCharge();
    out->block_cache_capacity = block_cache_->Capacity();
  }
  if (mem_ != nullptr) out->memtable_bytes = mem_->ApproximateMemoryUsage();
  for (MemTable* m : imm_) out->memtable_bytes += m->ApproximateMemoryUsage();
  out->num_immutable_memtables = imm_.size();
  out->running_flushes = flush_running_ ? 1 : 0;
  out->running_compactions = running_compactions_.size();
  out->num_snapshots = snapshots_.size();
  out->background_error = bg_error_.code();
  if (versions_ != nullptr) {
    const Version* v = versions_->current();
    for (int level = 0; level < options_.num_levels; level++) {
      out->level_files[level] = v->NumFiles(level);
      out->level_bytes[level] = v->NumLevelBytes(level);
      out->live_sst_bytes += out->level_bytes[level];
    }
    out->pending_compaction_bytes = picker_.EstimatePendingBytes(v);
  }
  // Live WALs: the current one and those of memtables not yet flushed.
  std::set<uint64_t> logs;
  if (mem_ != nullptr) logs.insert(mem_->log_number());
  for (MemTable* m : imm_) logs.insert(m->log_number());
  for (uint64_t number : logs) {
    uint64_t size = 0;
    if (number == log_number_ && log_ != nullptr) {
      size = log_->good_length();
    } else if (!env_->GetFileSize(LogFileName(dbname_, number), &size).ok()) {
      size = 0;
    }
    out->wal_file_bytes += size;
  }
}

bool DBImpl::GetProperty(const Slice& name, std::string* value) {
  value->clear();
  DBStats st;
  GetStats(&st);
  char line[256];
  if (name == "shale.stats") {
    for (uint32_t t = 0; t < kTickerCount; t++) {
      snprintf(line, sizeof(line), "%s: %" PRIu64 "\n",
               TickerName(static_cast<Ticker>(t)),
               stats_.Get(static_cast<Ticker>(t)));
      value->append(line);
    }
    const double wamp = st.user_bytes_written == 0
                            ? 0
                            : static_cast<double>(st.wal_bytes_written +
                                                  st.flush_bytes_written +
                                                  st.compaction_bytes_written) /
                                  st.user_bytes_written;
    snprintf(line, sizeof(line),
             "write amplification: %.2f\nmemtable bytes: %" PRIu64
             "\nimmutable memtables: %" PRIu64 "\nlast sequence: %" PRIu64
             "\nsnapshots: %" PRIu64 "\nlive SST bytes: %" PRIu64
             "\nlive WAL bytes: %" PRIu64 "\npending compaction bytes: %" PRIu64
             "\nbackground error: %d\n",
             wamp, st.memtable_bytes, st.num_immutable_memtables,
             st.last_sequence, st.num_snapshots, st.live_sst_bytes,
             st.wal_file_bytes, st.pending_compaction_bytes,
             st.background_error);
    value->append(line);
    return true;
  }
  if (name == "shale.levelstats") {
    value->append("Level Files Size(MB) Score\n");
    value->append("--------------------------\n");
    double scores[kMaxLevels] = {};
    {
      MutexLock l(&mutex_);
      if (versions_ != nullptr) {
        picker_.ComputeScores(versions_->current(), scores);
      }
    }
    for (int level = 0; level < st.num_levels; level++) {
      snprintf(line, sizeof(line), "%5d %5" PRIu64 " %8.1f %5.2f\n", level,
               st.level_files[level], st.level_bytes[level] / 1048576.0,
               scores[level]);
      value->append(line);
    }
    return true;
  }
  if (name == "shale.sstables") {
    MutexLock l(&mutex_);
    if (versions_ != nullptr) *value = versions_->current()->DebugString();
    return true;
  }
  return false;
}

}  // namespace shale
