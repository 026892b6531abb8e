// ExpectedState: what the stress tool knows the database must hold, kept in
// a file that outlives the process, so that a run killed with SIGKILL can be
// checked by the next one.
//
// The file is mmap'd shared: every store lands in the page cache at once and
// survives the death of the process (not of the machine; the crash test
// kills processes, the fault-injection tests simulate power loss).
//
// Layout (native endian, one machine):
//
//   header   Header, 4 KiB
//   slots    Slot[num_keys]
//
// Per key, versions number its values: 0 is "absent", 1.. are the values
// put, each version written at most once (max_issued only grows), so a
// version seen in the database names exactly one write.
//
// Protocol for one write in the synced mode (the caller holds the lock of
// every key it touches, so no two writes to a key are in flight at once):
//   1. SetPending(key, new_version) for every key the write touches;
//   2. the engine write (sync);
//   3. Commit(key) for each: committed = pending, then pending cleared.
// After a crash a key may hold its committed version, or its pending one if
// set; nothing else. Keys pending together (one batch) must all hold the
// old or all the new versions.
//
// In the unsynced modes the single writer also appends each write to an
// operation log (OpLog) before issuing it; base[] holds the state verified
// at the last open, and the database must equal base plus some prefix of
// the log.
//
// Thread safety: slot updates are atomic 32-bit stores; the protocol above
// (per-key locks held by the caller) keeps them meaningful.

#ifndef SHALE_TOOLS_STRESS_EXPECTED_STATE_H_
#define SHALE_TOOLS_STRESS_EXPECTED_STATE_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "util/status.h"

namespace shale::stress {

enum class SyncMode : uint32_t {
  kSync = 1,    // every write sync=true: nothing acknowledged may be lost
  kNoSync = 2,  // sync=false: a suffix of the writes may be lost
  kNoWal = 3,   // disable_wal: everything since the last flush may be lost
};

const char* SyncModeName(SyncMode m);

// pending's high bit says "a write is in flight"; the low bits are the
// version it writes (0: delete).
constexpr uint32_t kPendingFlag = 0x80000000u;

struct Slot {
  uint32_t committed;   // version acknowledged (0: absent)
  uint32_t pending;     // kPendingFlag | version, or 0
  uint32_t max_issued;  // highest version ever handed out for this key
  uint32_t base;        // unsynced modes: version verified at the last open
};

struct Header {
  char magic[8];  // "SHSTRES2" (the layout version)
  uint32_t num_keys;
  uint32_t mode;  // SyncMode
  // Unsynced modes: the op log must survive at least up to this op (the
  // last write acknowledged with sync=true, which makes all before it
  // durable); 0 if none.
  uint64_t min_durable_op;
  // Written every few milliseconds while running, read by the next run:
  // what the engine was doing when the process died.
  uint32_t running_flushes;
  uint32_t running_compactions;
  uint32_t running;     // 1 while a run is writing
  uint32_t recovering;  // 1 from before open until verification is done
  // Counters over the life of the file.
  uint64_t opens_verified;
  uint64_t kills_during_flush;
  uint64_t kills_during_compaction;
  uint64_t unclean_exits;
  uint64_t kills_during_recovery;  // died opening or verifying
  uint64_t writes_acknowledged;
  uint64_t pending_resolved_new;  // in-flight writes found applied
  uint64_t pending_resolved_old;  // in-flight writes found not applied
  uint64_t unsynced_ops_lost;     // unsynced modes: log suffix lost
  uint64_t unsynced_ops_kept;
};

class ExpectedState {
 public:
  ExpectedState() = default;
  ExpectedState(const ExpectedState&) = delete;
  ExpectedState& operator=(const ExpectedState&) = delete;
  ~ExpectedState();

  // Maps path, creating it for num_keys keys in mode if it does not exist.
  // *created says whether it was new. An existing file must match num_keys
  // and mode.
  Status Open(const std::string& path, uint32_t num_keys, SyncMode mode,
              bool* created);

  Header* header() { return header_; }
  uint32_t num_keys() const { return num_keys_; }
  Slot& slot(uint32_t key) { return slots_[key]; }

  // Atomic accessors (the file is shared with our own future self).
  static uint32_t Load(const uint32_t& v) {
    return std::atomic_ref<const uint32_t>(v).load(std::memory_order_acquire);
  }
  static void Store(uint32_t& v, uint32_t x) {
    std::atomic_ref<uint32_t>(v).store(x, std::memory_order_release);
  }

  // A fresh version for key (recorded before use, so never reused).
  uint32_t NewVersion(uint32_t key);
  void SetPending(uint32_t key, uint32_t version);
  void Commit(uint32_t key);

 private:
  int fd_ = -1;
  void* map_ = nullptr;
  size_t map_size_ = 0;
  Header* header_ = nullptr;
  Slot* slots_ = nullptr;
  uint32_t num_keys_ = 0;
};

// The unsynced modes' log of writes, in the order the single writer issued
// them. Each entry is appended (write(2), no fsync: it only has to survive
// the process) before the write goes to the engine.
struct OpEntry {
  uint64_t op;     // writes of one batch share op
  uint32_t type;   // kOpPut, kOpDelete, kOpDeleteRange
  uint32_t key;    // first key
  uint32_t arg;    // put: version; delete range: end key (exclusive)
  uint32_t magic;  // kOpMagic: tells a torn entry from a whole one
};
enum : uint32_t { kOpPut = 1, kOpDelete = 2, kOpDeleteRange = 3 };
constexpr uint32_t kOpMagic = 0x5eed0b5u;

class OpLog {
 public:
  OpLog() = default;
  OpLog(const OpLog&) = delete;
  OpLog& operator=(const OpLog&) = delete;
  ~OpLog();

  Status Open(const std::string& path);
  Status Append(const OpEntry* entries, size_t n);
  // Every whole entry in the file, in order (a torn last entry is dropped).
  Status ReadAll(std::string* data);
  Status Truncate();

 private:
  int fd_ = -1;
  std::string path_;
};

}  // namespace shale::stress

#endif  // SHALE_TOOLS_STRESS_EXPECTED_STATE_H_
