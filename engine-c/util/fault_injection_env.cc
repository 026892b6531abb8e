#include "util/fault_injection_env.h"

#include <algorithm>
#include <bit>

namespace shale {

namespace {

std::string DirOf(const std::string& fname) {
  const size_t slash = fname.rfind('/');
  return slash == std::string::npos ? "." : fname.substr(0, slash);
}

// A writable file whose operations consult the Env's faults first and
// report its syncs, so that power loss knows what is durable.
class FaultyWritableFile final : public WritableFile {
 public:
  FaultyWritableFile(FaultInjectionEnv* env, std::unique_ptr<WritableFile> base)
      : env_(env), base_(std::move(base)) {}

  Status Append(const Slice& data) override {
    Status s = env_->CheckFault(FaultInjectionEnv::kAppend, base_->Name());
    return s.ok() ? base_->Append(data) : s;
  }
  Status Flush() override {
    Status s = env_->CheckFault(FaultInjectionEnv::kAppend, base_->Name());
    if (s.ok()) s = base_->Flush();
    if (s.ok()) {
      const uint64_t size = base_->Size();
      MutexLock l(&mu_);
      flushed_ = size;
    }
    return s;
  }
  Status Sync() override {
    Status s = env_->CheckFault(FaultInjectionEnv::kSync, base_->Name());
    if (s.ok()) s = base_->Sync();
    if (s.ok()) {
      const uint64_t size = base_->Size();
      MutexLock l(&mu_);
      flushed_ = size;
      NoteSyncedLocked(size);
    }
    return s;
  }
  // May run beside Append, Flush and Sync (DBImpl::SyncWAL): it counts as
  // synced only what was flushed when it started.
  Status SyncData() override {
    Status s = env_->CheckFault(FaultInjectionEnv::kSync, base_->Name());
    if (!s.ok()) return s;
    uint64_t flushed;
    {
      MutexLock l(&mu_);
      flushed = flushed_;
    }
    s = base_->SyncData();
    if (s.ok()) {
      MutexLock l(&mu_);
      NoteSyncedLocked(flushed);
    }
    return s;
  }
  // Closing hands buffered bytes to the OS even when the power is off:
  // they are not synced, so DropUnsyncedData cuts them off again.
  Status Close() override { return base_->Close(); }
  uint64_t Size() const override { return base_->Size(); }
  const std::string& Name() const override { return base_->Name(); }

 private:
  // Reports a sync of the first size bytes unless a later one was
  // reported already (a SyncData may end after a Sync that covered more).
  void NoteSyncedLocked(uint64_t size) EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (size <= synced_) return;
    synced_ = size;
    env_->NoteSynced(base_->Name(), size);
  }

  FaultInjectionEnv* const env_;
  std::unique_ptr<WritableFile> base_;
  Mutex mu_;
  uint64_t flushed_ GUARDED_BY(mu_) = 0;  // bytes handed to the OS
  uint64_t synced_ GUARDED_BY(mu_) = 0;   // bytes reported synced
};

class FaultySequentialFile final : public SequentialFile {
 public:
  FaultySequentialFile(FaultInjectionEnv* env, std::string name,
                       std::unique_ptr<SequentialFile> base)
      : env_(env), name_(std::move(name)), base_(std::move(base)) {}

  Status Read(size_t n, Slice* result, char* scratch) override {
    Status s = env_->CheckFault(FaultInjectionEnv::kRead, name_);
    return s.ok() ? base_->Read(n, result, scratch) : s;
  }
  Status Skip(uint64_t n) override { return base_->Skip(n); }

 private:
  FaultInjectionEnv* const env_;
  const std::string name_;
  std::unique_ptr<SequentialFile> base_;
};

class FaultyRandomAccessFile final : public RandomAccessFile {
 public:
  FaultyRandomAccessFile(FaultInjectionEnv* env, std::string name,
                         std::unique_ptr<RandomAccessFile> base)
      : env_(env), name_(std::move(name)), base_(std::move(base)) {}

  Status Read(uint64_t offset, size_t n, Slice* result,
              char* scratch) const override {
    Status s = env_->CheckFault(FaultInjectionEnv::kRead, name_);
    return s.ok() ? base_->Read(offset, n, result, scratch) : s;
  }

 private:
  FaultInjectionEnv* const env_;
  const std::string name_;
  std::unique_ptr<RandomAccessFile> base_;
};

}  // namespace

void FaultInjectionEnv::SetFault(uint32_t ops, const Status& error,
                                 const std::string& name_filter) {
  MutexLock l(&mu_);
  ops_ = ops;
  error_ = error;
  filter_ = name_filter;
  faulty_.store(true, std::memory_order_release);
}

void FaultInjectionEnv::ClearFault() {
  faulty_.store(false, std::memory_order_release);
}

Status FaultInjectionEnv::CheckActive(const std::string& what) {
  if (active_.load(std::memory_order_acquire)) return Status::OK();
  faults_.fetch_add(1, std::memory_order_relaxed);
  return Status::IOError(what, "simulated power loss: the disk is gone");
}

void FaultInjectionEnv::SetDelay(uint32_t ops, uint64_t delay_micros,
                                 uint64_t jitter_micros,
                                 const std::string& name_filter) {
  MutexLock l(&delay_mu_);
  uint32_t delayed = delayed_ops_.load(std::memory_order_relaxed);
  for (int i = 0; i < kNumOps; i++) {
    const uint32_t op = 1u << i;
    if ((ops & op) == 0) continue;
    delay_[i].micros = delay_micros;
    delay_[i].jitter_micros = jitter_micros;
    delay_[i].filter = name_filter;
    if (delay_micros == 0 && jitter_micros == 0) {
      delayed &= ~op;
    } else {
      delayed |= op;
    }
  }
  delayed_ops_.store(delayed, std::memory_order_release);
}

void FaultInjectionEnv::ClearDelays() { SetDelay(kAllOps, 0, 0); }

void FaultInjectionEnv::MaybeDelay(uint32_t op, const std::string& fname) {
  if ((delayed_ops_.load(std::memory_order_acquire) & op) == 0) return;
  uint64_t micros = 0;
  {
    MutexLock l(&delay_mu_);
    const int i = std::countr_zero(op);
    if (i >= kNumOps) return;
    const Delay& d = delay_[i];
    if (!d.filter.empty() && fname.find(d.filter) == std::string::npos) {
      return;
    }
    micros = d.micros;
    if (d.jitter_micros > 0) micros += jitter_rng_.Uniform(d.jitter_micros + 1);
  }
  if (micros == 0) return;
  delays_.fetch_add(1, std::memory_order_relaxed);
  // Sleep in slices no longer than an int holds (SleepForMicroseconds).
  while (micros > 0) {
    const uint64_t slice = std::min<uint64_t>(micros, 1000000);
    base_->SleepForMicroseconds(static_cast<int>(slice));
    micros -= slice;
  }
}

Status FaultInjectionEnv::CheckFault(uint32_t op, const std::string& fname) {
  MaybeDelay(op, fname);
  if (op != kRead) {
    Status s = CheckActive(fname);
    if (!s.ok()) return s;
  }
  if (!faulty_.load(std::memory_order_acquire)) return Status::OK();
  MutexLock l(&mu_);
  if ((ops_ & op) == 0) return Status::OK();
  if (!filter_.empty() && fname.find(filter_) == std::string::npos) {
    return Status::OK();
  }
  faults_.fetch_add(1, std::memory_order_relaxed);
  return Status(error_);
}

void FaultInjectionEnv::NoteSynced(const std::string& fname, uint64_t size) {
  MutexLock l(&mu_);
  auto it = files_.find(fname);
  if (it != files_.end()) it->second.synced_size = size;
}

Status FaultInjectionEnv::NewSequentialFile(
    const std::string& fname, std::unique_ptr<SequentialFile>* result) {
  Status s = CheckFault(kRead, fname);
  if (!s.ok()) return s;
  std::unique_ptr<SequentialFile> base;
  s = base_->NewSequentialFile(fname, &base);
  if (s.ok()) {
    result->reset(new FaultySequentialFile(this, fname, std::move(base)));
  }
  return s;
}

Status FaultInjectionEnv::NewRandomAccessFile(
    const std::string& fname, std::unique_ptr<RandomAccessFile>* result,
    bool use_mmap) {
  Status s = CheckFault(kRead, fname);
  if (!s.ok()) return s;
  std::unique_ptr<RandomAccessFile> base;
  s = base_->NewRandomAccessFile(fname, &base, use_mmap);
  if (s.ok()) {
    result->reset(new FaultyRandomAccessFile(this, fname, std::move(base)));
  }
  return s;
}

Status FaultInjectionEnv::NewWritableFile(
    const std::string& fname, std::unique_ptr<WritableFile>* result) {
  Status s = CheckFault(kCreate, fname);
  if (!s.ok()) return s;
  std::unique_ptr<WritableFile> base;
  const bool existed = base_->FileExists(fname);
  s = base_->NewWritableFile(fname, &base);
  if (!s.ok()) return s;
  {
    MutexLock l(&mu_);
    // Truncated: nothing of it is synced. An existing entry stays durable.
    FileState& st = files_[fname];
    st.synced_size = 0;
    st.new_entry = !existed || st.new_entry;
  }
  result->reset(new FaultyWritableFile(this, std::move(base)));
  return s;
}

Status FaultInjectionEnv::NewAppendableFile(
    const std::string& fname, std::unique_ptr<WritableFile>* result) {
  Status s = CheckFault(kCreate, fname);
  if (!s.ok()) return s;
  std::unique_ptr<WritableFile> base;
  const bool existed = base_->FileExists(fname);
  s = base_->NewAppendableFile(fname, &base);
  if (!s.ok()) return s;
  {
    MutexLock l(&mu_);
    if (files_.find(fname) == files_.end()) {
      // What is there already counts as synced (we cannot know better).
      FileState st;
      st.synced_size = base->Size();
      st.new_entry = !existed;
      files_[fname] = st;
    }
  }
  result->reset(new FaultyWritableFile(this, std::move(base)));
  return s;
}

Status FaultInjectionEnv::RemoveFile(const std::string& fname) {
  Status s = CheckActive("remove " + fname);
  if (!s.ok()) return s;
  s = base_->RemoveFile(fname);
  if (s.ok()) {
    MutexLock l(&mu_);
    files_.erase(fname);
  }
  return s;
}

Status FaultInjectionEnv::CreateDir(const std::string& dirname) {
  Status s = CheckActive("create directory " + dirname);
  return s.ok() ? base_->CreateDir(dirname) : s;
}

Status FaultInjectionEnv::RemoveDir(const std::string& dirname) {
  Status s = CheckActive("remove directory " + dirname);
  return s.ok() ? base_->RemoveDir(dirname) : s;
}

Status FaultInjectionEnv::RenameFile(const std::string& src,
                                     const std::string& target) {
  Status s = CheckFault(kRename, src);
  if (!s.ok()) return s;
  s = base_->RenameFile(src, target);
  if (s.ok()) {
    MutexLock l(&mu_);
    auto it = files_.find(src);
    if (it != files_.end()) {
      FileState st = it->second;
      st.new_entry = false;  // renames are durable at once (see header)
      files_.erase(it);
      files_[target] = st;
    } else {
      files_.erase(target);
    }
  }
  return s;
}

Status FaultInjectionEnv::TruncateFile(const std::string& fname,
                                       uint64_t size) {
  Status s = CheckActive("truncate " + fname);
  if (!s.ok()) return s;
  s = base_->TruncateFile(fname, size);  // syncs
  if (s.ok()) {
    MutexLock l(&mu_);
    auto it = files_.find(fname);
    if (it != files_.end()) it->second.synced_size = size;
  }
  return s;
}

Status FaultInjectionEnv::LinkFile(const std::string& src,
                                   const std::string& target) {
  Status s = CheckActive("link " + target);
  return s.ok() ? base_->LinkFile(src, target) : s;
}

Status FaultInjectionEnv::SyncDir(const std::string& dirname) {
  Status s = CheckActive("sync directory " + dirname);
  if (!s.ok()) return s;
  s = CheckFault(kSync, dirname);
  if (!s.ok()) return s;
  s = base_->SyncDir(dirname);
  if (s.ok()) {
    MutexLock l(&mu_);
    for (auto& [name, st] : files_) {
      if (DirOf(name) == dirname) st.new_entry = false;
    }
  }
  return s;
}

Status FaultInjectionEnv::DropUnsyncedData() {
  MutexLock l(&mu_);
  Status result;
  for (auto it = files_.begin(); it != files_.end();) {
    const std::string& name = it->first;
    Status s;
    if (it->second.new_entry) {
      if (base_->FileExists(name)) s = base_->RemoveFile(name);
      it = files_.erase(it);
    } else {
      uint64_t size = 0;
      if (base_->GetFileSize(name, &size).ok() &&
          size > it->second.synced_size) {
        s = base_->TruncateFile(name, it->second.synced_size);
      }
      ++it;
    }
    if (!s.ok() && result.ok()) result = s;
  }
  return result;
}

}  // namespace shale
