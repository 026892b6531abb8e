// DBImpl: the write path - group commit, the WAL, memtable switches and
// write stalls.
//
// Writers queue in writers_. The front writer leads: it makes room in the
// memtable (waiting on a stall if it must), takes the writers queued behind
// it into its group, and with mutex_ released appends the whole group to
// the WAL as one record (header + each batch's records, gathered without
// copying), syncs once if any of them asked to, and inserts every batch
// into the memtable. Then it publishes the new last sequence, completes the
// group and hands the lead to the next writer.
//
// Stalls (memory stays bounded under overload):
//   - at level0_slowdown_writes_trigger L0 files, writes are paced to
//     delayed_write_rate bytes/s;
//   - when max_write_buffer_number memtables are full, or at
//     level0_stop_writes_trigger L0 files, writes wait for a flush or
//     compaction.
// With disable_auto_compactions the two L0 triggers do not apply (as in
// RocksDB): nothing would ever compact L0 on its own, so a stop there
// would last until someone ran a manual compaction. Memory still stays
// bounded by the memtable limit.
// A writer with no_slowdown fails with Busy instead of waiting.

#include <algorithm>

#include "db/db_impl.h"
#include "db/db_impl_internal.h"
#include "db/filename.h"
#include "db/memtable.h"
#include "db/version_set.h"
#include "db/write_batch.h"

namespace shale {

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
  if (closing_) return Status::Closed("write: the database is closing");
  // A writer that must not wait does not queue behind a stopped leader.
  if (w.no_slowdown && write_stopped_) return write_stop_status_;
  writers_.push_back(&w);
  while (!w.done && &w != writers_.front()) w.cv.Wait();
  if (w.done) return w.status;

  // This writer leads a group.
  Status status = MakeRoomForWrite(w.no_slowdown, batch.size());
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
    if (w.disable_wal) unpersisted_writes_ = true;
    const uint64_t wal_length_before = log_->good_length();
    MemTable* const mem = mem_;
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
          // WALs retired unsynced first: the sync covers every write
          // acknowledged before it.
          status = SyncRetiredWals();
          if (status.ok()) status = log_->Sync();
          stats_.Record(kWalSyncs);
        }
        if (status.ok() && total_count > 0) {
          wal_end_seq_ = first_seq + total_count - 1;
        }
      }
      if (status.ok()) {
        SequenceNumber seq = first_seq;
        for (const Writer* g : group_) {
          seq += InsertBatchRecords(Slice(g->batch.data() + kBatchHeaderSize,
                                          g->batch.size() - kBatchHeaderSize),
                                    seq, mem);
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

void DBImpl::EnterExclusiveWrite(Writer* w) {
  mutex_.AssertHeld();
  w->exclusive = true;
  writers_.push_back(w);
  while (w != writers_.front()) w->cv.Wait();
}

bool DBImpl::EnterExclusiveWriteUnlessStalled(Writer* w) {
  mutex_.AssertHeld();
  w->exclusive = true;
  writers_.push_back(w);
  while (w != writers_.front() && !write_stopped_) w->cv.Wait();
  if (w == writers_.front()) return true;
  writers_.erase(std::find(writers_.begin(), writers_.end(), w));
  return false;
}

void DBImpl::ExitExclusiveWrite(Writer* w) {
  mutex_.AssertHeld();
  assert(writers_.front() == w);
  writers_.pop_front();
  if (!writers_.empty()) writers_.front()->cv.Signal();
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
    if (w->exclusive) break;
    if (w->sync && !first->sync) break;
    if (w->disable_wal != first->disable_wal) break;
    size += w->batch.size();
    if (size > max_size) break;
    group_.push_back(w);
    last = w;
  }
  return last;
}

void DBImpl::FailNoSlowdownWriters(const Status& busy) {
  mutex_.AssertHeld();
  for (auto it = writers_.begin() + 1; it != writers_.end();) {
    Writer* w = *it;
    if (w->no_slowdown && !w->exclusive) {
      w->status = busy;
      w->done = true;
      w->cv.Signal();
      it = writers_.erase(it);
    } else {
      ++it;
    }
  }
}

uint64_t DBImpl::WriteDelayMicros(uint64_t bytes) {
  mutex_.AssertHeld();
  // Each write moves the earliest time of the next one forward by its
  // share of delayed_write_rate; writers sleep once that adds up to a
  // millisecond, so the average rate is the configured one.
  const uint64_t now = env_->NowMicros();
  if (delayed_write_next_micros_ < now) delayed_write_next_micros_ = now;
  delayed_write_next_micros_ += bytes * 1000000 / options_.delayed_write_rate;
  const uint64_t delay = delayed_write_next_micros_ - now;
  return delay >= 1000 ? delay : 0;
}

Status DBImpl::MakeRoomForWrite(bool no_slowdown, uint64_t bytes) {
  mutex_.AssertHeld();
  bool allow_delay = true;
  while (true) {
    if (!bg_error_.ok()) return bg_error_;
    // L0 counts only while compaction can bring it down (see above).
    const int l0_files = options_.disable_auto_compactions
                             ? 0
                             : versions_->current()->NumFiles(0);
    if (allow_delay && l0_files >= options_.level0_slowdown_writes_trigger) {
      // Slow down, once per write, to let compaction catch up.
      const Status busy = Status::Busy(
          "write slowed down: " + std::to_string(l0_files) +
          " L0 files (slowdown at " +
          std::to_string(options_.level0_slowdown_writes_trigger) + ")");
      if (no_slowdown) return busy;
      const uint64_t delay = WriteDelayMicros(bytes);
      if (delay > 0) {
        FailNoSlowdownWriters(busy);
        mutex_.Unlock();
        env_->SleepForMicroseconds(static_cast<int>(delay));
        mutex_.Lock();
        stats_.Record(kStallMicros, delay);
      }
      allow_delay = false;
      continue;
    }
    // An empty memtable always has room (a huge batch goes into it whole).
    // Only the leader adds to mem_, and it is here, so the data size is
    // stable.
    if (mem_->empty() ||
        mem_->ApproximateDataSize() < options_.write_buffer_size) {
      break;
    }
    std::string stop_reason;
    if (static_cast<int>(imm_.size()) >= options_.max_write_buffer_number - 1) {
      stop_reason = std::to_string(imm_.size() + 1) +
                    " memtables are full (max_write_buffer_number " +
                    std::to_string(options_.max_write_buffer_number) + ")";
    } else if (l0_files >= options_.level0_stop_writes_trigger) {
      stop_reason = std::to_string(l0_files) + " L0 files (stop at " +
                    std::to_string(options_.level0_stop_writes_trigger) + ")";
    }
    if (!stop_reason.empty()) {
      // Stop until a flush or compaction makes room.
      const Status busy = Status::Busy("write stopped: " + stop_reason);
      if (no_slowdown) return busy;
      FailNoSlowdownWriters(busy);
      bg_work_cv_.SignalAll();
      // Exclusive sections queued behind (a manual flush or compaction,
      // which may be what ends the stall) need not wait for it.
      write_stopped_ = true;
      write_stop_status_ = busy;
      for (Writer* q : writers_) {
        if (q->exclusive) q->cv.Signal();
      }
      const uint64_t start = env_->NowMicros();
      bg_done_cv_.Wait();
      write_stopped_ = false;
      stats_.Record(kStallMicros, env_->NowMicros() - start);
      if (shutting_down_.load(std::memory_order_relaxed)) {
        return Status::Closed("write: the database is closing");
      }
      continue;
    }
    Status s = SwitchMemtable();
    if (!s.ok()) return s;
  }
  return Status::OK();
}

Status DBImpl::NewWal(uint64_t number) {
  mutex_.AssertHeld();
  std::unique_ptr<WritableFile> file;
  Status s = env_->NewWritableFile(LogFileName(dbname_, number), &file);
  // The new name must be durable before synced writes are acknowledged
  // from the file.
  if (s.ok()) s = env_->SyncDir(dbname_);
  if (!s.ok()) return s;
  // Every WAL starts with its opening record (after Resume: where the WAL
  // cut back ends), so that recovery can tell a WAL lost whole.
  auto writer = std::make_unique<log::Writer>(file.get());
  s = AppendWalOpening(writer.get());
  if (!s.ok()) return s;
  WaitForWalSyncs();
  log_.reset();
  if (log_file_ != nullptr) log_file_->Close();
  log_file_ = std::move(file);
  log_ = std::move(writer);
  log_number_ = number;
  return Status::OK();
}

Status DBImpl::AppendWalOpening(log::Writer* w) {
  char header[kBatchHeaderSize];
  EncodeFixed64(header, wal_end_seq_);
  EncodeFixed32(header + 8, 0);
  const uint64_t before = w->good_length();
  const Status s = w->AddRecord(Slice(header, kBatchHeaderSize));
  stats_.Record(kWalBytesWritten, w->good_length() - before);
  return s;
}

Status DBImpl::SyncRetiredWals() {
  std::vector<RetiredWal> wals;
  {
    MutexLock l(&mutex_);
    wals = retired_wals_;
  }
  if (wals.empty()) return Status::OK();
  for (const RetiredWal& w : wals) {
    const Status s = w.file->SyncData();
    if (!s.ok()) {
      return Status::IOError("syncing retired WAL " + w.file->Name(),
                             s.ToString());
    }
  }
  MutexLock l(&mutex_);
  for (const RetiredWal& w : wals) {
    for (auto it = retired_wals_.begin(); it != retired_wals_.end(); ++it) {
      if (it->number == w.number) {
        retired_wals_.erase(it);
        break;
      }
    }
  }
  return Status::OK();
}

Status DBImpl::SwitchMemtable() {
  mutex_.AssertHeld();
  const uint64_t new_log_number = versions_->NewFileNumber();
  std::unique_ptr<WritableFile> file;
  std::unique_ptr<log::Writer> writer;
  Status s;
  {
    // The caller leads the write queue, so log_ and wal_end_seq_ are ours
    // while unlocked. The old WAL is not synced (see retired_wals_): the
    // new WAL's opening record tells recovery where the old one must end,
    // so a power loss that cuts the old WAL short while the kernel wrote
    // the new one back is seen, and replay stops there.
    mutex_.Unlock();
    s = env_->NewWritableFile(LogFileName(dbname_, new_log_number), &file);
    if (s.ok()) s = env_->SyncDir(dbname_);
    if (s.ok()) {
      writer = std::make_unique<log::Writer>(file.get());
      s = AppendWalOpening(writer.get());
    }
    mutex_.Lock();
  }
  if (!s.ok()) {
    RecordBackgroundError(
        s,
        "switching to WAL " + LogFileName(dbname_, new_log_number) + " failed");
    return bg_error_;
  }
  WaitForWalSyncs();
  log_.reset();
  retired_wals_.push_back(RetiredWal{
      log_number_, std::shared_ptr<WritableFile>(log_file_.release())});
  log_file_ = std::move(file);
  log_ = std::move(writer);
  log_number_ = new_log_number;
  imm_.push_back(mem_);
  mem_ = NewMemTable(new_log_number);
  InstallSuperVersion();
  bg_work_cv_.SignalAll();
  return Status::OK();
}

void DBImpl::RecordBackgroundError(const Status& s, const std::string& what) {
  mutex_.AssertHeld();
  if (!bg_error_.ok()) return;
  const std::string msg =
      "writes stopped: " + what + " (" + s.ToString() + "); call resume";
  bg_error_ =
      s.IsNoSpace() ? Status::NoSpace(msg) : Status::BackgroundError(msg);
  bg_done_cv_.SignalAll();
}

Status DBImpl::SyncWAL() {
  WritableFile* file;
  {
    MutexLock l(&mutex_);
    if (closing_) return Status::Closed("sync WAL: the database is closing");
    if (!bg_error_.ok()) return bg_error_;
    // Each WAL record reaches the OS before its Write returns (log::Writer
    // flushes it), so syncing the retired WALs and then the current file
    // covers every write that returned. A WAL retired after the first step
    // is synced in the second (log_file_ cannot change while it runs).
    file = log_file_.get();
    wal_syncs_running_++;
  }
  Status s = SyncRetiredWals();
  if (s.ok()) s = file->SyncData();
  MutexLock l(&mutex_);
  if (--wal_syncs_running_ == 0) wal_sync_cv_.SignalAll();
  if (!s.ok()) {
    RecordBackgroundError(s, "syncing WAL " + file->Name() + " failed");
    return bg_error_;
  }
  stats_.Record(kWalSyncs);
  return s;
}

void DBImpl::WaitForWalSyncs() {
  mutex_.AssertHeld();
  while (wal_syncs_running_ > 0) wal_sync_cv_.Wait();
}

}  // namespace shale
