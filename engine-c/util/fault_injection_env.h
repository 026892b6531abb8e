// FaultInjectionEnv: an Env that passes everything to a real Env, except
// that tests can make it misbehave the way disks and power supplies do:
//
//   - fail chosen kinds of operation (writes, syncs, file creation, reads,
//     renames) with a given error, ENOSPC included, on all files or on the
//     files whose name contains a filter, until cleared;
//   - slow chosen kinds of operation down (a slow or overloaded disk): each
//     one first sleeps a set delay plus a random jitter, until cleared;
//   - simulate power loss: SetFilesystemActive(false) makes every later
//     mutation fail (the machine is off), then DropUnsyncedData() puts the
//     files back to what a real disk would hold after the power returned:
//     each file cut back to the length it had at its last Sync, and each
//     file created since the last SyncDir of its directory removed.
//
// What power loss keeps, precisely: data appended and synced (Sync) stays;
// a file's existence is durable once its directory was synced after its
// creation. Renames are treated as durable at once (the engine syncs the
// directory right after each rename it relies on, and an undone rename is
// not simulated); a renamed file keeps its synced length. Files the Env did
// not create (opened before it wrapped them, or by another Env) are left
// alone.
//
// Thread safety: as for Env; the fault and delay switches may be flipped at
// any time from any thread (an operation already asleep finishes its
// sleep). DropUnsyncedData() requires that no file is being written (the DB
// is closed or dead).

#ifndef SHALE_UTIL_FAULT_INJECTION_ENV_H_
#define SHALE_UTIL_FAULT_INJECTION_ENV_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "util/env.h"
#include "util/mutex.h"
#include "util/random.h"

namespace shale {

class FaultInjectionEnv final : public Env {
 public:
  // Operations a fault can be set on (a bit mask).
  enum Op : uint32_t {
    kAppend = 1u << 0,  // WritableFile::Append and Flush
    kSync = 1u << 1,    // WritableFile::Sync
    kCreate = 1u << 2,  // NewWritableFile, NewAppendableFile
    kRead = 1u << 3,    // reads of SequentialFile and RandomAccessFile
    kRename = 1u << 4,  // RenameFile
    // Everything a full or failing disk refuses.
    kWriteOps = kAppend | kSync | kCreate,
    kAllOps = kWriteOps | kRead | kRename,
  };

  // base must outlive this Env.
  explicit FaultInjectionEnv(Env* base) : base_(base) {}

  // From now on, the operations in ops on files whose name contains
  // name_filter (empty: all files) fail with error, until ClearFault().
  void SetFault(uint32_t ops, const Status& error,
                const std::string& name_filter = "");
  // SetFault(kWriteOps, ...): appends, flushes, syncs and file creation.
  void SetWriteFault(const Status& error, const std::string& name_filter = "") {
    SetFault(kWriteOps, error, name_filter);
  }
  void ClearFault();
  // How many operations failed because of a fault (or power loss).
  uint64_t faults_injected() const {
    return faults_.load(std::memory_order_relaxed);
  }

  // From now on, each operation in ops on a file whose name contains
  // name_filter (empty: all files) first sleeps delay_micros plus a
  // uniformly random extra in [0, jitter_micros], until ClearDelays() or a
  // later SetDelay on the same ops. A delay and jitter of 0 remove the
  // delay of ops. Delays are independent of faults: a delayed operation
  // may then fail. kSync covers Sync, SyncData and SyncDir, so a delay on
  // it slows the WAL syncs of synced writes and of SyncWAL as well as the
  // syncs of SSTs, the MANIFEST and directories. The sleeps happen outside
  // any lock of this Env or of the file, as a slow device would: other
  // threads may append to a file while its sync is delayed.
  void SetDelay(uint32_t ops, uint64_t delay_micros, uint64_t jitter_micros = 0,
                const std::string& name_filter = "");
  void ClearDelays();
  // How many operations were delayed so far.
  uint64_t delays_injected() const {
    return delays_.load(std::memory_order_relaxed);
  }

  // false: the power is off. Every mutation (appends, syncs, creation,
  // removal, renames, truncation, links, directory syncs) fails with
  // IOError until it is turned back on; reads still work.
  void SetFilesystemActive(bool active) {
    active_.store(active, std::memory_order_release);
  }
  bool filesystem_active() const {
    return active_.load(std::memory_order_acquire);
  }
  // Puts every file this Env created back to its state at the last sync
  // (see the header comment). REQUIRES: no file is being written.
  Status DropUnsyncedData();

  // Sleeps op's delay if it applies to fname, then returns the error op on
  // fname must fail with, or OK. For the wrapped files. op is one Op bit.
  Status CheckFault(uint32_t op, const std::string& fname);
  // Bookkeeping from the wrapped writable files.
  void NoteSynced(const std::string& fname, uint64_t size);

  Status NewSequentialFile(const std::string& fname,
                           std::unique_ptr<SequentialFile>* result) override;
  Status NewRandomAccessFile(const std::string& fname,
                             std::unique_ptr<RandomAccessFile>* result,
                             bool use_mmap) override;
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
  Status RemoveFile(const std::string& fname) override;
  Status CreateDir(const std::string& dirname) override;
  Status RemoveDir(const std::string& dirname) override;
  Status GetFileSize(const std::string& fname, uint64_t* size) override {
    return base_->GetFileSize(fname, size);
  }
  Status RenameFile(const std::string& src, const std::string& target) override;
  Status TruncateFile(const std::string& fname, uint64_t size) override;
  Status LinkFile(const std::string& src, const std::string& target) override;
  Status SyncDir(const std::string& dirname) override;
  Status LockFile(const std::string& fname,
                  std::unique_ptr<FileLock>* lock) override {
    return base_->LockFile(fname, lock);
  }
  uint64_t NowMicros() override { return base_->NowMicros(); }
  void SleepForMicroseconds(int micros) override {
    base_->SleepForMicroseconds(micros);
  }

 private:
  // What a power loss would leave of one file.
  struct FileState {
    uint64_t synced_size = 0;
    // Created since its directory was last synced: gone after power loss.
    bool new_entry = true;
  };

  // The delay of one kind of operation.
  struct Delay {
    uint64_t micros = 0;
    uint64_t jitter_micros = 0;
    std::string filter;
  };
  static constexpr int kNumOps = 5;  // the single-bit members of Op

  // IOError if the power is off (counted as a fault).
  Status CheckActive(const std::string& what);
  // Sleeps op's delay if one is set and fname matches its filter.
  void MaybeDelay(uint32_t op, const std::string& fname);

  Env* const base_;
  std::atomic<bool> faulty_{false};
  std::atomic<bool> active_{true};
  std::atomic<uint64_t> faults_{0};
  // The ops with a delay set: lets undelayed operations skip delay_mu_.
  std::atomic<uint32_t> delayed_ops_{0};
  std::atomic<uint64_t> delays_{0};
  Mutex delay_mu_;
  Delay delay_[kNumOps] GUARDED_BY(delay_mu_);
  Random jitter_rng_ GUARDED_BY(delay_mu_){0x5107D15C};
  Mutex mu_;
  uint32_t ops_ GUARDED_BY(mu_) = 0;
  Status error_ GUARDED_BY(mu_);
  std::string filter_ GUARDED_BY(mu_);
  std::map<std::string, FileState> files_ GUARDED_BY(mu_);
};

}  // namespace shale

#endif  // SHALE_UTIL_FAULT_INJECTION_ENV_H_
