// DBImpl: background work - the flush and compaction threads, manual
// flushes and compactions, obsolete-file deletion, and Resume.
//
// Each of the max_background_jobs threads loops: flush the oldest
// immutable memtable if no flush is running; otherwise run a compaction if
// fewer than max_compactions_ are running and the picker finds one;
// otherwise sleep on bg_work_cv_. Every finished job signals bg_done_cv_
// (writers waiting on a stall, WaitForCompaction, Flush) and bg_work_cv_
// (more work may now be possible).
//
// A failed flush or compaction records a background error: writes stop
// with an error naming what failed, background work stops, and files are
// not deleted. Resume() clears it and lets the work be retried.

#include <algorithm>

#include "db/builder.h"
#include "db/compaction_job.h"
#include "db/db_impl.h"
#include "db/db_impl_internal.h"
#include "db/filename.h"
#include "db/memtable.h"
#include "db/table_cache.h"
#include "db/version_set.h"

namespace shale {

void DBImpl::StartBackgroundThreads() {
  mutex_.AssertHeld();
  for (int i = 0; i < options_.max_background_jobs; i++) {
    bg_threads_.emplace_back([this] { BackgroundLoop(); });
  }
}

void DBImpl::BackgroundLoop() {
  MutexLock l(&mutex_);
  while (!shutting_down_.load(std::memory_order_relaxed)) {
    if (bg_error_.ok() && !imm_.empty() && !flush_running_) {
      flush_running_ = true;
      FlushOneMemTable();
      flush_running_ = false;
    } else if (bg_error_.ok() && static_cast<int>(running_compactions_.size()) <
                                     max_compactions_) {
      Compaction* c = picker_.Pick(versions_->current(), running_compactions_,
                                   !imm_.empty());
      if (c == nullptr) {
        bg_work_cv_.Wait();
        continue;
      }
      RunCompaction(c);
    } else {
      bg_work_cv_.Wait();
      continue;
    }
    bg_done_cv_.SignalAll();
    bg_work_cv_.SignalAll();
  }
}

uint64_t DBImpl::NewPendingOutput() {
  mutex_.AssertHeld();
  const uint64_t number = versions_->NewFileNumber();
  pending_outputs_.insert(number);
  return number;
}

Status DBImpl::FlushOneMemTable() {
  mutex_.AssertHeld();
  MemTable* m = imm_.front();
  FileMetaData meta;
  meta.number = NewPendingOutput();
  const std::vector<SequenceNumber> snapshots = snapshots_.All();
  Status s;
  {
    mutex_.Unlock();
    std::unique_ptr<Iterator> iter(m->NewIterator());
    auto tombstones = m->GetFragmentedTombstones();
    s = BuildTable(dbname_, env_, table_options_, table_cache_.get(),
                   iter.get(), tombstones.get(), snapshots, &meta);
    // The file's directory entry must be durable before the MANIFEST names
    // it.
    if (s.ok() && meta.file_size > 0) s = env_->SyncDir(dbname_);
    mutex_.Lock();
  }
  if (s.ok()) {
    VersionEdit edit;
    if (meta.file_size > 0) edit.AddFile(0, meta);
    // WALs older than the next unflushed memtable's are no longer needed.
    edit.SetLogNumber(imm_.size() > 1 ? imm_[1]->log_number()
                                      : mem_->log_number());
    edit.SetLastSequence(LastSequence());
    s = versions_->LogAndApply(&edit);
  }
  pending_outputs_.erase(meta.number);
  if (!s.ok()) {
    RecordBackgroundError(
        s, "flush to " + TableFileName(dbname_, meta.number) + " failed");
    return s;
  }
  imm_.pop_front();
  InstallSuperVersion();
  m->Unref();
  stats_.Record(kFlushCount);
  stats_.Record(kFlushBytesWritten, meta.file_size);
  DeleteObsoleteFiles();
  return Status::OK();
}

Status DBImpl::RunCompaction(Compaction* c) {
  mutex_.AssertHeld();
  running_compactions_.push_back(c);
  Status s;
  VersionEdit edit;
  std::vector<uint64_t> allocated;
  if (c->IsTrivialMove()) {
    for (FileMetaData* f : c->inputs(0)) {
      edit.DeleteFile(c->level(), f->number);
      edit.AddFile(c->output_level(), *f);
    }
  } else {
    CompactionJob job(
        c, dbname_, env_, table_options_, table_cache_.get(), snapshots_.All(),
        [this, &allocated] {
          MutexLock l(&mutex_);
          const uint64_t number = NewPendingOutput();
          allocated.push_back(number);
          return number;
        },
        &shutting_down_);
    mutex_.Unlock();
    s = job.Run();
    if (s.ok() && !job.outputs().empty()) s = env_->SyncDir(dbname_);
    mutex_.Lock();
    stats_.Record(kCompactionBytesRead, job.bytes_read());
    stats_.Record(kCompactionBytesWritten, job.bytes_written());
    if (s.ok()) {
      c->AddInputDeletions(&edit);
      for (const CompactionJob::Output& out : job.outputs()) {
        edit.AddFile(out.level, out.meta);
      }
    }
  }
  if (s.ok()) {
    edit.SetLastSequence(LastSequence());
    s = versions_->LogAndApply(&edit);
  }
  for (uint64_t number : allocated) pending_outputs_.erase(number);
  c->MarkFilesBeingCompacted(false);
  running_compactions_.erase(
      std::find(running_compactions_.begin(), running_compactions_.end(), c));
  const std::string what = c->DebugString();
  const bool deep = c->has_deep_range();
  delete c;
  if (s.ok()) {
    stats_.Record(kCompactionCount);
    if (deep) deep_compactions_++;
    InstallSuperVersion();
    DeleteObsoleteFiles();
  } else if (!shutting_down_.load(std::memory_order_relaxed)) {
    RecordBackgroundError(s, "compaction " + what + " failed");
  }
  return s;
}

bool DBImpl::NeedsCompaction() {
  mutex_.AssertHeld();
  if (options_.disable_auto_compactions) return false;
  double scores[kMaxLevels];
  picker_.ComputeScores(versions_->current(), scores);
  for (int level = 0; level < options_.num_levels; level++) {
    if (scores[level] >= 1) return true;
  }
  return false;
}

void DBImpl::DeleteObsoleteFiles() {
  mutex_.AssertHeld();
  // After a background error the state of the files is uncertain: keep
  // them all. Checkpoints hold deletions off while they link files.
  if (!bg_error_.ok() || file_deletions_disabled_ > 0) return;
  std::set<uint64_t> live = pending_outputs_;
  versions_->AddLiveFiles(&live);
  std::vector<std::string> children;
  if (!env_->GetChildren(dbname_, &children).ok()) return;
  const uint64_t min_log = versions_->LogNumber();
  // A retired WAL whose memtable is flushed needs no sync any more (see
  // retired_wals_): close it unsynced, so its bytes may never reach the
  // device. (A sync running without mutex_ keeps its own reference.)
  retired_wals_.erase(std::remove_if(retired_wals_.begin(), retired_wals_.end(),
                                     [min_log](const RetiredWal& w) {
                                       return w.number < min_log;
                                     }),
                      retired_wals_.end());
  const uint64_t manifest = versions_->ManifestFileNumber();
  const bool manifest_busy = versions_->ManifestWriteInProgress();
  std::vector<std::pair<FileType, uint64_t>> doomed;
  for (const std::string& child : children) {
    uint64_t number;
    FileType type;
    if (!ParseFileName(child, &number, &type)) continue;
    bool keep = true;
    switch (type) {
      case FileType::kLogFile:
        keep = number >= min_log || number == log_number_;
        break;
      case FileType::kDescriptorFile:
        // A newer MANIFEST may be being written.
        keep = number >= manifest;
        break;
      case FileType::kTableFile:
        keep = live.count(number) > 0;
        break;
      case FileType::kTempFile:
        keep = live.count(number) > 0 || manifest_busy;
        break;
      case FileType::kCurrentFile:
      case FileType::kLockFile:
      case FileType::kIdentityFile:
        break;
    }
    if (!keep) doomed.emplace_back(type, number);
  }
  if (doomed.empty()) return;
  mutex_.Unlock();
  for (const auto& [type, number] : doomed) {
    std::string fname;
    switch (type) {
      case FileType::kLogFile:
        fname = LogFileName(dbname_, number);
        break;
      case FileType::kDescriptorFile:
        fname = DescriptorFileName(dbname_, number);
        break;
      case FileType::kTableFile:
        table_cache_->Evict(number);
        fname = TableFileName(dbname_, number);
        break;
      default:
        fname = TempFileName(dbname_, number);
        break;
    }
    // Another thread may have deleted it first; nothing to report then.
    env_->RemoveFile(fname);
  }
  mutex_.Lock();
}

Status DBImpl::FlushAndWait() {
  mutex_.AssertHeld();
  Writer w(&mutex_);
  Status s;
  uint64_t target = 0;  // flush every memtable up to this id
  if (EnterExclusiveWriteUnlessStalled(&w)) {
    s = bg_error_;
    if (s.ok()) {
      if (!mem_->empty()) {
        target = mem_->id();
        s = SwitchMemtable();
      } else if (!imm_.empty()) {
        target = imm_.back()->id();
      }
    }
    ExitExclusiveWrite(&w);
  } else {
    // The write leader is stopped on a full memtable and will switch it
    // once the stall clears; flush what is already immutable.
    s = bg_error_;
    if (!imm_.empty()) target = imm_.back()->id();
  }
  if (!s.ok()) return s;
  bg_work_cv_.SignalAll();
  while (!imm_.empty() && imm_.front()->id() <= target) {
    if (!bg_error_.ok()) return bg_error_;
    if (shutting_down_.load(std::memory_order_relaxed)) {
      return Status::Closed("flush: the database is closing");
    }
    bg_done_cv_.Wait();
  }
  if (target != 0 && imm_.empty()) unpersisted_writes_ = false;
  return bg_error_;
}

Status DBImpl::Flush(bool wait) {
  MutexLock l(&mutex_);
  if (closing_) return Status::Closed("flush: the database is closing");
  if (wait) return FlushAndWait();
  Writer w(&mutex_);
  EnterExclusiveWrite(&w);
  Status s = bg_error_;
  if (s.ok() && !mem_->empty()) s = SwitchMemtable();
  ExitExclusiveWrite(&w);
  return s;
}

Status DBImpl::CompactRange(const Slice* begin, const Slice* end) {
  MutexLock l(&mutex_);
  if (closing_) return Status::Closed("compact_range: the database is closing");
  Status s = FlushAndWait();
  if (!s.ok()) return s;
  // Push the range down to the deepest level that holds data, then
  // rewrite that level in place if it held data already, so that what no
  // snapshot needs any more (overwritten versions, deletions, tombstones
  // and what they cover) is dropped.
  int last = 1;
  for (int level = 1; level < options_.num_levels; level++) {
    if (versions_->current()->NumFiles(level) > 0) last = level;
  }
  bool last_had_data = false;
  {
    std::vector<FileMetaData*> inputs;
    versions_->current()->GetOverlappingInputs(last, begin, end, &inputs);
    last_had_data = !inputs.empty();
  }
  for (int level = 0; level <= last; level++) {
    const bool in_place = level == last;
    if (in_place && !last_had_data) break;
    while (true) {
      if (!bg_error_.ok()) return bg_error_;
      if (shutting_down_.load(std::memory_order_relaxed)) {
        return Status::Closed("compact_range: the database is closing");
      }
      bool busy = false;
      Compaction* c =
          picker_.PickManual(versions_->current(), level, begin, end, in_place,
                             running_compactions_, &busy);
      if (c != nullptr) {
        s = RunCompaction(c);
        bg_done_cv_.SignalAll();
        bg_work_cv_.SignalAll();
        // The background error says which compaction failed and what to do.
        if (!s.ok()) return bg_error_.ok() ? s : bg_error_;
        break;
      }
      if (!busy) break;    // nothing of this level in the range
      bg_done_cv_.Wait();  // a running compaction holds some of the files
    }
  }
  return Status::OK();
}

Status DBImpl::WaitForCompaction() {
  MutexLock l(&mutex_);
  while (true) {
    if (!bg_error_.ok()) return bg_error_;
    if (closing_ || shutting_down_.load(std::memory_order_relaxed)) {
      return Status::Closed("wait_for_compaction: the database is closing");
    }
    const bool idle =
        imm_.empty() && !flush_running_ && running_compactions_.empty();
    if (idle && !NeedsCompaction()) return Status::OK();
    bg_work_cv_.SignalAll();
    bg_done_cv_.Wait();
  }
}

Status DBImpl::Resume() {
  MutexLock l(&mutex_);
  if (bg_error_.ok()) return Status::OK();
  if (wal_failed_) {
    // The failed WAL ends in a partial record. Cut it back to its last
    // complete record, then continue in a fresh WAL, which the memtable's
    // flush will retire together with the old one.
    WaitForWalSyncs();
    log_.reset();
    log_file_->Close();  // its error is the one already recorded
    Status s =
        env_->TruncateFile(LogFileName(dbname_, log_number_), wal_good_length_);
    if (s.ok()) s = NewWal(versions_->NewFileNumber());
    if (!s.ok()) return s;  // writes stay stopped; try again later
    wal_failed_ = false;
  }
  bg_error_ = Status::OK();
  bg_work_cv_.SignalAll();
  bg_done_cv_.SignalAll();
  return Status::OK();
}

}  // namespace shale
