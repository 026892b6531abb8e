#include "db/db_impl.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <random>

#include "db/db_iter.h"
#include "db/filename.h"
#include "db/get_context.h"
#include "db/memtable.h"
#include "db/range_tombstone.h"
#include "db/write_batch.h"
#include "log/log_reader.h"
#include "table/merging_iterator.h"

namespace shale {

// One caller of Write(), queued until it leads a group or a leader has
// written its batch for it.
struct DBImpl::Writer {
  explicit Writer(Mutex* mu) : cv(mu) {}

  Slice batch;  // the caller's whole batch, header included
  uint32_t count = 0;
  bool sync = false;
  bool disable_wal = false;
  bool no_slowdown = false;

  bool done = false;  // GUARDED_BY(mutex_)
  Status status;      // set by the leader before done
  CondVar cv;
};

// What a reader needs to see the database: the memtables (and, from the
// next milestone on, the SST file set). Immutable once installed; readers
// hold a reference instead of the DB mutex while they read.
struct DBImpl::SuperVersion {
  MemTable* mem = nullptr;
  std::vector<MemTable*> imm;  // immutable memtables, newest first
  std::atomic<int> refs{1};
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

DBImpl::DBImpl(const Options& options, const std::string& dbname)
    : options_(options),
      env_(options.env != nullptr ? options.env : Env::Default()),
      dbname_(dbname),
      icmp_(BytewiseComparator()) {}

DBImpl::~DBImpl() {
  MutexLock l(&mutex_);
  if (!closed_) ShutDown();
}

// ------------------------------------------------------------ open, close

Status DBImpl::Open(const Options& options, const std::string& dbname,
                    std::unique_ptr<DBImpl>* dbptr) {
  dbptr->reset();
  Status s = options.Validate();
  if (!s.ok()) return s;
  if (dbname.empty()) return Status::InvalidArgument("open: empty path");
  std::unique_ptr<DBImpl> db(new DBImpl(options, dbname));
  {
    MutexLock l(&db->mutex_);
    s = db->Recover();
    if (s.ok()) s = db->NewWal();
    if (s.ok()) db->InstallSuperVersion();
  }
  if (!s.ok()) return s;  // the destructor releases what was acquired
  *dbptr = std::move(db);
  return Status::OK();
}

Status DBImpl::Recover() {
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

  if (env_->FileExists(IdentityFileName(dbname_))) {
    if (options_.error_if_exists) {
      return Status::InvalidArgument(dbname_,
                                     "exists (error_if_exists is true)");
    }
  } else {
    if (!options_.create_if_missing) {
      return Status::InvalidArgument(
          dbname_, "is not a database (create_if_missing is false)");
    }
    // A new database: its identity is a random 128-bit number.
    std::random_device rd;
    char id[40];
    snprintf(id, sizeof(id), "%08x%08x%08x%08x\n", rd(), rd(), rd(), rd());
    s = WriteStringToFile(env_, id, IdentityFileName(dbname_), true);
    if (s.ok()) s = env_->SyncDir(dbname_);
    if (!s.ok()) return s;
  }

  std::vector<std::string> children;
  s = env_->GetChildren(dbname_, &children);
  if (!s.ok()) return s;
  std::vector<uint64_t> logs;
  for (const std::string& child : children) {
    uint64_t number;
    FileType type;
    if (!ParseFileName(child, &number, &type)) continue;
    next_file_number_ = std::max(next_file_number_, number + 1);
    if (type == FileType::kLogFile) logs.push_back(number);
  }
  std::sort(logs.begin(), logs.end());

  mem_ = new MemTable(icmp_);
  bool stop_replay = false;
  std::vector<uint64_t> dropped;  // WALs after a point-in-time stop
  std::vector<std::pair<uint64_t, uint64_t>> cuts;  // (WAL, good length)
  for (size_t i = 0; i < logs.size(); i++) {
    if (stop_replay) {
      dropped.push_back(logs[i]);
      continue;
    }
    uint64_t good_end = 0;
    bool damaged = false;
    s = RecoverLogFile(logs[i], i + 1 == logs.size(), &stop_replay, &good_end,
                       &damaged);
    if (!s.ok()) return s;
    if (damaged) cuts.emplace_back(logs[i], good_end);
    live_logs_.push_back(logs[i]);
  }
  // Discard what the recovery mode chose to drop, so the next open does not
  // meet it again: newest WALs first, then the damaged tails, so that a
  // crash in between leaves a state this same logic recovers from.
  for (auto it = dropped.rbegin(); it != dropped.rend(); ++it) {
    s = env_->RemoveFile(LogFileName(dbname_, *it));
    if (!s.ok()) return s;
  }
  for (const auto& [number, length] : cuts) {
    s = env_->TruncateFile(LogFileName(dbname_, number), length);
    if (!s.ok()) return s;
  }
  if (!dropped.empty()) s = env_->SyncDir(dbname_);
  return s;
}

Status DBImpl::RecoverLogFile(uint64_t number, bool last_log, bool* stop_replay,
                              uint64_t* good_end, bool* damaged) {
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
  while (reader.ReadRecord(&record, &scratch)) {
    if (!reporter.io_error.ok()) return reporter.io_error;
    if (reporter.damaged) {
      // A good record after damage: the damage is not a torn tail.
      if (mode == WalRecoveryMode::kPointInTime) {
        *stop_replay = true;
        *damaged = true;
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
        *stop_replay = true;
        *damaged = true;
        break;
      }
      return Status::Corruption(
          fname + ": bad write batch in the record at offset " +
              std::to_string(reader.LastRecordOffset()),
          s.message());
    }
    const SequenceNumber seq = DecodeFixed64(record.data());
    InsertBatchRecords(Slice(record.data() + kBatchHeaderSize,
                             record.size() - kBatchHeaderSize),
                       seq, mem_);
    if (summary.count > 0) {
      max_seq = std::max(max_seq, seq + summary.count - 1);
    }
    *good_end = reader.LastRecordEnd();
  }
  if (!reporter.io_error.ok()) return reporter.io_error;
  last_sequence_.store(max_seq, std::memory_order_release);
  if (reporter.damaged && !*damaged) {
    // Damage with nothing valid after it: a torn tail.
    *damaged = true;
    switch (mode) {
      case WalRecoveryMode::kAbsoluteConsistency:
        return Status::Corruption(reporter.first_damage.message(),
                                  "wal_recovery_mode is absolute consistency");
      case WalRecoveryMode::kTolerateCorruptedTail:
        if (!last_log) {
          return Status::Corruption(reporter.first_damage.message(),
                                    "in a WAL that is not the newest");
        }
        break;
      case WalRecoveryMode::kPointInTime:
        *stop_replay = true;
        break;
    }
  }
  return Status::OK();
}

Status DBImpl::NewWal() {
  mutex_.AssertHeld();
  const uint64_t number = next_file_number_++;
  std::unique_ptr<WritableFile> file;
  Status s = env_->NewWritableFile(LogFileName(dbname_, number), &file);
  // The new name must be durable before synced writes are acknowledged
  // from the file.
  if (s.ok()) s = env_->SyncDir(dbname_);
  if (!s.ok()) return s;
  log_.reset();
  log_file_ = std::move(file);
  log_ = std::make_unique<log::Writer>(log_file_.get());
  log_number_ = number;
  live_logs_.push_back(number);
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
  shutting_down_ = true;
  // Let queued writers finish: each leader hands over to the next.
  while (!writers_.empty()) {
    mutex_.Unlock();
    env_->SleepForMicroseconds(100);
    mutex_.Lock();
  }
  Status s;
  log_.reset();
  if (log_file_ != nullptr) {
    s = log_file_->Close();
    log_file_.reset();
  }
  if (super_version_ != nullptr) {
    SuperVersion* sv = super_version_;
    super_version_ = nullptr;
    mutex_.Unlock();
    ReleaseSuperVersion(sv);
    mutex_.Lock();
  }
  if (mem_ != nullptr) {
    mem_->Unref();
    mem_ = nullptr;
  }
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

// ------------------------------------------------------------- write path

Status DBImpl::Write(const WriteOptions& options, const Slice& batch) {
  WriteBatchSummary summary;
  Status s = ValidateWriteBatch(batch, icmp_.user_comparator(), &summary);
  if (!s.ok()) return s;
  if (summary.count == 0 && !options.sync) return Status::OK();

  Writer w(&mutex_);
  w.batch = batch;
  w.count = summary.count;
  w.sync = options.sync;
  w.disable_wal = options.disable_wal;
  w.no_slowdown = options.no_slowdown;

  MutexLock l(&mutex_);
  if (shutting_down_) return Status::Closed("write: the database is closing");
  writers_.push_back(&w);
  while (!w.done && &w != writers_.front()) w.cv.Wait();
  if (w.done) return w.status;

  // This writer leads a group: it writes its own batch and those queued
  // behind it, in one WAL record and with at most one fsync.
  Status status = MakeRoomForWrite(w.no_slowdown);
  Writer* last_writer = &w;
  if (status.ok()) {
    last_writer = BuildBatchGroup();
    const SequenceNumber first_seq =
        last_sequence_.load(std::memory_order_relaxed) + 1;
    uint64_t total_count = 0;
    uint64_t total_bytes = 0;
    bool need_sync = false;
    for (const Writer* g : group_) {
      total_count += g->count;
      total_bytes += g->batch.size();
      need_sync |= g->sync;
    }
    const uint64_t wal_length_before = log_->good_length();
    {
      // Only the leader touches log_ and mem_ for writing; other writers
      // wait in the queue, and their batches stay valid until released.
      mutex_.Unlock();
      if (!w.disable_wal) {
        char header[kBatchHeaderSize];
        EncodeFixed64(header, first_seq);
        EncodeFixed32(header + 8, static_cast<uint32_t>(total_count));
        if (total_count > 0) {
          wal_parts_.clear();
          wal_parts_.emplace_back(header, kBatchHeaderSize);
          for (const Writer* g : group_) {
            wal_parts_.emplace_back(g->batch.data() + kBatchHeaderSize,
                                    g->batch.size() - kBatchHeaderSize);
          }
          status = log_->AddRecordParts(wal_parts_.data(), wal_parts_.size());
          stats_.Record(kWalBytesWritten,
                        log_->good_length() - wal_length_before);
        }
        if (status.ok() && need_sync) {
          status = log_->Sync();
          stats_.Record(kWalSyncs);
        }
      }
      if (status.ok()) {
        SequenceNumber seq = first_seq;
        for (const Writer* g : group_) {
          seq += InsertBatchRecords(Slice(g->batch.data() + kBatchHeaderSize,
                                          g->batch.size() - kBatchHeaderSize),
                                    seq, mem_);
        }
        stats_.Record(kUserBytesWritten, total_bytes);
        stats_.Record(kUserKeysWritten, total_count);
      }
      mutex_.Lock();
    }
    if (status.ok()) {
      // Publish: readers that load this sequence see every entry above.
      last_sequence_.store(first_seq + total_count - 1,
                           std::memory_order_release);
    } else {
      wal_failed_ = true;
      wal_good_length_ = wal_length_before;
      RecordBackgroundError(
          status,
          "WAL append to " + LogFileName(dbname_, log_number_) + " failed");
    }
  }

  while (true) {
    Writer* ready = writers_.front();
    writers_.pop_front();
    if (ready != &w) {
      ready->status = status;
      ready->done = true;
      ready->cv.Signal();
    }
    if (ready == last_writer) break;
  }
  if (!writers_.empty()) writers_.front()->cv.Signal();
  return status;
}

Status DBImpl::MakeRoomForWrite(bool no_slowdown) {
  mutex_.AssertHeld();
  if (!bg_error_.ok()) return bg_error_;
  // The memtable grows without bound until flushes exist (next milestone).
  return Status::OK();
}

DBImpl::Writer* DBImpl::BuildBatchGroup() {
  mutex_.AssertHeld();
  Writer* first = writers_.front();
  group_.clear();
  group_.push_back(first);
  size_t size = first->batch.size();
  // Cap the group, and keep it small when the leader's batch is small so
  // that a small write is not slowed down by a large one.
  size_t max_size = 1 << 20;
  if (size <= (128 << 10)) max_size = size + (128 << 10);
  Writer* last = first;
  for (auto it = writers_.begin() + 1; it != writers_.end(); ++it) {
    Writer* w = *it;
    // A synced write must not ride with a leader that will not sync, and
    // WAL and no-WAL writes are different groups.
    if (w->sync && !first->sync) break;
    if (w->disable_wal != first->disable_wal) break;
    size += w->batch.size();
    if (size > max_size) break;
    group_.push_back(w);
    last = w;
  }
  return last;
}

void DBImpl::RecordBackgroundError(const Status& s, const std::string& what) {
  mutex_.AssertHeld();
  if (!bg_error_.ok()) return;
  const std::string msg =
      "writes stopped: " + what + " (" + s.ToString() + "); call resume";
  bg_error_ =
      s.IsNoSpace() ? Status::NoSpace(msg) : Status::BackgroundError(msg);
}

Status DBImpl::Resume() {
  MutexLock l(&mutex_);
  if (bg_error_.ok()) return Status::OK();
  if (wal_failed_) {
    // The failed WAL ends in a partial record. Cut it back to its last
    // complete record, then continue in a fresh WAL.
    log_.reset();
    log_file_->Close();  // its error is the one already recorded
    Status s =
        env_->TruncateFile(LogFileName(dbname_, log_number_), wal_good_length_);
    if (s.ok()) s = NewWal();
    if (!s.ok()) {
      // Still failing: writes stay stopped (no leader uses log_ while
      // bg_error_ is set) and the next Resume() tries again.
      return s;
    }
    wal_failed_ = false;
  }
  bg_error_ = Status::OK();
  return Status::OK();
}

// -------------------------------------------------------------- read path

SequenceNumber DBImpl::ReadSequence(const ReadOptions& options) const {
  return options.snapshot != nullptr ? options.snapshot->sequence()
                                     : LastSequence();
}

void DBImpl::InstallSuperVersion() {
  mutex_.AssertHeld();
  SuperVersion* sv = new SuperVersion;
  sv->mem = mem_;
  sv->mem->Ref();
  SuperVersion* old = super_version_;
  super_version_ = sv;
  if (old != nullptr) {
    mutex_.Unlock();
    ReleaseSuperVersion(old);
    mutex_.Lock();
  }
}

DBImpl::SuperVersion* DBImpl::AcquireSuperVersion() {
  MutexLock l(&mutex_);
  SuperVersion* sv = super_version_;
  sv->refs.fetch_add(1, std::memory_order_relaxed);
  return sv;
}

void DBImpl::ReleaseSuperVersion(SuperVersion* sv) {
  if (sv->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  sv->mem->Unref();
  for (MemTable* m : sv->imm) m->Unref();
  delete sv;
}

void DBImpl::GetFromSources(SuperVersion* sv, const Slice& key,
                            GetContext* ctx) {
  // The sequence goes into the lookup key; the newest visible version of
  // the key is then the first entry at or after it.
  LookupKey lkey(key, ctx->read_seq());
  if (sv->mem->Get(lkey, ctx)) return;
  for (MemTable* m : sv->imm) {
    if (m->Get(lkey, ctx)) return;
  }
}

Status DBImpl::Get(const ReadOptions& options, const Slice& key, char* buf,
                   size_t cap, size_t* value_len) {
  // Read the sequence before taking the super version: everything at or
  // below it is then in the super version's sources.
  const SequenceNumber seq = ReadSequence(options);
  SuperVersion* sv = AcquireSuperVersion();
  GetContext ctx(&icmp_, key, seq, nullptr, buf, cap);
  GetFromSources(sv, key, &ctx);
  ReleaseSuperVersion(sv);
  *value_len = 0;
  switch (ctx.state()) {
    case GetContext::kFound:
      *value_len = ctx.value_size();
      if (!ctx.value_fits()) {
        return Status::BufferTooSmall(
            "get: the value of " + std::to_string(ctx.value_size()) +
            " bytes does not fit in a buffer of " + std::to_string(cap));
      }
      stats_.Record(kKeysRead);
      stats_.Record(kBytesRead, key.size() + ctx.value_size());
      return Status::OK();
    case GetContext::kCorrupt:
      return ctx.status();
    case GetContext::kNotFound:
    case GetContext::kDeleted:
      break;
  }
  return Status::NotFound(Slice());
}

Status DBImpl::Get(const ReadOptions& options, const Slice& key,
                   std::string* value) {
  const SequenceNumber seq = ReadSequence(options);
  SuperVersion* sv = AcquireSuperVersion();
  GetContext ctx(&icmp_, key, seq, value, nullptr, 0);
  GetFromSources(sv, key, &ctx);
  ReleaseSuperVersion(sv);
  switch (ctx.state()) {
    case GetContext::kFound:
      stats_.Record(kKeysRead);
      stats_.Record(kBytesRead, key.size() + ctx.value_size());
      return Status::OK();
    case GetContext::kCorrupt:
      return ctx.status();
    case GetContext::kNotFound:
    case GetContext::kDeleted:
      break;
  }
  value->clear();
  return Status::NotFound(Slice());
}

void DBImpl::MultiGet(const ReadOptions& options, size_t n, const Slice* keys,
                      std::string* values, Status* statuses) {
  const SequenceNumber seq = ReadSequence(options);
  SuperVersion* sv = AcquireSuperVersion();
  uint64_t found = 0, bytes = 0;
  for (size_t i = 0; i < n; i++) {
    GetContext ctx(&icmp_, keys[i], seq, &values[i], nullptr, 0);
    GetFromSources(sv, keys[i], &ctx);
    switch (ctx.state()) {
      case GetContext::kFound:
        statuses[i] = Status::OK();
        found++;
        bytes += keys[i].size() + ctx.value_size();
        break;
      case GetContext::kCorrupt:
        statuses[i] = ctx.status();
        values[i].clear();
        break;
      case GetContext::kNotFound:
      case GetContext::kDeleted:
        statuses[i] = Status::NotFound(Slice());
        values[i].clear();
        break;
    }
  }
  ReleaseSuperVersion(sv);
  stats_.Record(kKeysRead, found);
  stats_.Record(kBytesRead, bytes);
}

DBIter* DBImpl::NewIterator(const ReadOptions& options, const Slice* lower,
                            const Slice* upper) {
  const SequenceNumber seq = ReadSequence(options);
  SuperVersion* sv = AcquireSuperVersion();
  std::vector<Iterator*> children;
  auto range_del = std::make_unique<RangeDelAggregator>(&icmp_, seq);
  children.push_back(sv->mem->NewIterator());
  range_del->AddTombstones(sv->mem->GetFragmentedTombstones());
  for (MemTable* m : sv->imm) {
    children.push_back(m->NewIterator());
    range_del->AddTombstones(m->GetFragmentedTombstones());
  }
  Iterator* internal = NewMergingIterator(&icmp_, children.data(),
                                          static_cast<int>(children.size()));
  DBIter* iter =
      new DBIter(&icmp_, internal, std::move(range_del), seq, lower, upper);
  live_iterators_.fetch_add(1, std::memory_order_relaxed);
  iter->RegisterCleanup(&DBImpl::CleanupIterator, this, sv);
  return iter;
}

void DBImpl::CleanupIterator(void* db, void* sv) {
  DBImpl* self = static_cast<DBImpl*>(db);
  self->ReleaseSuperVersion(static_cast<SuperVersion*>(sv));
  self->live_iterators_.fetch_sub(1, std::memory_order_release);
}

const Snapshot* DBImpl::GetSnapshot() {
  MutexLock l(&mutex_);
  return snapshots_.New(LastSequence());
}

void DBImpl::ReleaseSnapshot(const Snapshot* snapshot) {
  MutexLock l(&mutex_);
  snapshots_.Delete(snapshot);
}

// ------------------------------------------------- maintenance and stats

Status DBImpl::Flush(bool wait) {
  return Status::NotSupported("flush: not yet implemented");
}

Status DBImpl::CompactRange(const Slice* begin, const Slice* end) {
  return Status::NotSupported("compact_range: not yet implemented");
}

Status DBImpl::WaitForCompaction() {
  // No background work exists yet, so there is never any to wait for.
  return Status::OK();
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
  if (super_version_ != nullptr) {
    out->memtable_bytes = super_version_->mem->ApproximateMemoryUsage();
    for (MemTable* m : super_version_->imm) {
      out->memtable_bytes += m->ApproximateMemoryUsage();
    }
    out->num_immutable_memtables = super_version_->imm.size();
  }
  out->num_snapshots = snapshots_.size();
  out->background_error = bg_error_.code();
  for (uint64_t number : live_logs_) {
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
    snprintf(line, sizeof(line),
             "memtable bytes: %" PRIu64 "\nimmutable memtables: %" PRIu64
             "\nlast sequence: %" PRIu64 "\nsnapshots: %" PRIu64
             "\nlive WAL bytes: %" PRIu64 "\nbackground error: %d\n",
             st.memtable_bytes, st.num_immutable_memtables, st.last_sequence,
             st.num_snapshots, st.wal_file_bytes, st.background_error);
    value->append(line);
    return true;
  }
  if (name == "shale.levelstats") {
    value->append("Level Files Size(MB)\n");
    value->append("--------------------\n");
    for (int level = 0; level < st.num_levels; level++) {
      snprintf(line, sizeof(line), "%5d %5" PRIu64 " %8.1f\n", level,
               st.level_files[level], st.level_bytes[level] / 1048576.0);
      value->append(line);
    }
    return true;
  }
  if (name == "shale.sstables") {
    // No SSTs exist before the flush milestone; one header per level.
    for (int level = 0; level < st.num_levels; level++) {
      snprintf(line, sizeof(line), "--- level %d ---\n", level);
      value->append(line);
    }
    return true;
  }
  return false;
}

Status DBImpl::ApproximateSize(const Slice& begin, const Slice& end,
                               uint64_t* bytes, uint64_t* keys) {
  // Counts SST data; there are no SSTs before the flush milestone.
  *bytes = 0;
  *keys = 0;
  return Status::OK();
}

}  // namespace shale
