// FaultInjectionEnv: an Env that passes everything to a real Env, except
// that it can be told to fail file writes, syncs or new files with a given
// error (ENOSPC, EIO...) - the way a full or failing disk does - so that
// tests can check the engine stops writes with a clear error, loses
// nothing, and resumes once the fault is cleared.
//
// Thread safety: as for Env; the fault switches may be flipped at any time
// from any thread.

#ifndef SHALE_UTIL_FAULT_INJECTION_ENV_H_
#define SHALE_UTIL_FAULT_INJECTION_ENV_H_

#include <atomic>
#include <memory>
#include <string>

#include "util/env.h"
#include "util/mutex.h"

namespace shale {

class FaultInjectionEnv final : public Env {
 public:
  // base must outlive this Env.
  explicit FaultInjectionEnv(Env* base) : base_(base) {}

  // From now on, appends, flushes and syncs of writable files (and the
  // creation of new ones) fail with error, until ClearFault(). Only files
  // whose name contains name_filter (empty: all) are affected.
  void SetWriteFault(const Status& error, const std::string& name_filter = "");
  void ClearFault();
  // How many operations failed because of the fault.
  uint64_t faults_injected() const {
    return faults_.load(std::memory_order_relaxed);
  }

  // Returns the fault for fname, or OK. For the wrapped files.
  Status CheckFault(const std::string& fname);

  Status NewSequentialFile(const std::string& fname,
                           std::unique_ptr<SequentialFile>* result) override {
    return base_->NewSequentialFile(fname, result);
  }
  Status NewRandomAccessFile(const std::string& fname,
                             std::unique_ptr<RandomAccessFile>* result,
                             bool use_mmap) override {
    return base_->NewRandomAccessFile(fname, result, use_mmap);
  }
  Status NewWritableFile(const std::string& fname,
                         std::unique_ptr<WritableFile>* result) override;
  Status NewAppendableFile(const std::string& fname,
                           std::unique_ptr<WritableFile>* result) override;
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
  std::atomic<bool> faulty_{false};
  std::atomic<uint64_t> faults_{0};
  Mutex mu_;
  Status error_ GUARDED_BY(mu_);
  std::string filter_ GUARDED_BY(mu_);
};

}  // namespace shale

#endif  // SHALE_UTIL_FAULT_INJECTION_ENV_H_
