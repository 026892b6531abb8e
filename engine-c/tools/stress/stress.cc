// stress: concurrent random operations against the engine, checked against
// an expected state that survives the process (expected_state.h), so that
// the crash test (scripts/crashtest) can SIGKILL it at any moment and the
// next run verifies that nothing acknowledged was lost, nothing never
// written appeared, and no deleted key came back.
//
//   stress --db=DIR [--mode=sync|nosync|nowal] [--duration=SECONDS]
//          [--threads=N] [--keys=N] [--seed=N] [--verify_only] [--report]
//
// Every run first opens DIR (recovering it), verifies the whole database
// against the expected state, records the outcome, then runs operations
// for --duration seconds (0: verify only): Put, Delete, DeleteRange,
// multi-record batches, Get, MultiGet, forward and backward iterator scans,
// and the occasional manual flush or compaction. Small write buffers and
// files make flushes and compactions happen every few hundred writes.
// Reads during the run are checked too.
//
// Modes:
//   sync    every write is sync=true, from --threads writers: no
//           acknowledged write may be lost.
//   nosync  sync=false from one writer (reads from the others), with one
//           write in 64 synced: the database must equal the state of the
//           last verification plus a prefix of the writes issued since,
//           and that prefix must reach the last synced write.
//   nowal   disable_wal from one writer: as nosync (a flushed prefix).
//
// Exit status: 0 verified and ran clean; 1 a durability or correctness
// violation (the message says which key, what was found and what was
// expected); 2 any other failure (bad flags, engine error).
//
// The expected state lives beside the database: DIR.expected and
// DIR.oplog (--expected, --oplog to override).

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "db/db_impl.h"
#include "db/db_iter.h"
#include "db/write_batch.h"
#include "tools/stress/expected_state.h"
#include "util/random.h"

namespace shale::stress {
namespace {

struct Flags {
  std::string db;
  std::string expected;
  std::string oplog;
  SyncMode mode = SyncMode::kSync;
  double duration = 10;
  int threads = 4;
  uint32_t keys = 20000;
  uint64_t seed = 0;
  bool verify_only = false;
  bool report = false;
};

// Keys are grouped in chunks of kChunk consecutive keys; a write touches one
// chunk and holds its lock, so the expected state of a key only changes
// under its chunk's lock.
constexpr uint32_t kChunk = 32;

[[noreturn]] void Die(int code, const std::string& msg) {
  fprintf(stderr, "stress: %s\n", msg.c_str());
  fflush(stderr);
  _exit(code);
}

[[noreturn]] void Violation(const std::string& msg) {
  Die(1, "VIOLATION: " + msg);
}

std::string Key(uint32_t i) {
  char buf[16];
  snprintf(buf, sizeof(buf), "k%08u", i);
  return buf;
}

bool ParseKey(const Slice& k, uint32_t* i) {
  if (k.size() != 9 || k[0] != 'k') return false;
  uint32_t v = 0;
  for (size_t j = 1; j < 9; j++) {
    if (k[j] < '0' || k[j] > '9') return false;
    v = v * 10 + (k[j] - '0');
  }
  *i = v;
  return true;
}

uint64_t Mix(uint64_t a, uint64_t b) {
  uint64_t x = a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull);
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  return x ^ (x >> 29);
}

// The value of version v of key i: it names both, and its filler is a
// function of both, so a value from another key, another version or a
// damaged block cannot pass for this one.
std::string Value(uint32_t i, uint32_t v) {
  char head[32];
  int n = snprintf(head, sizeof(head), "%u:%u:", i, v);
  std::string s(head, n);
  uint64_t h = Mix(i, v);
  const size_t len = 8 + h % 200;
  for (size_t j = 0; j < len; j++) {
    s.push_back(static_cast<char>('a' + (Mix(h, j) % 26)));
  }
  return s;
}

// The version a value claims to be of key i, or 0 if it is no value the
// tool writes for key i.
uint32_t ParseValue(uint32_t i, const Slice& value) {
  unsigned ki, v;
  if (sscanf(
          std::string(value.data(), std::min<size_t>(value.size(), 31)).c_str(),
          "%u:%u:", &ki, &v) != 2) {
    return 0;
  }
  if (ki != i || v == 0 || Value(i, v) != value.ToString()) return 0;
  return v;
}

std::string Describe(uint32_t v) {
  return v == 0 ? "absent" : "version " + std::to_string(v);
}

class Stress {
 public:
  explicit Stress(const Flags& f) : flags_(f) {}

  int Run();

 private:
  Options DBOptions() const;
  WriteOptions WriteOpts(Random* rnd);
  // Reads every key of the database (scan, then point reads to cross-check)
  // into versions[]; phantom keys, foreign values and scan/Get
  // disagreement are violations.
  void ReadAll(std::vector<uint32_t>* versions);
  void VerifySync(const std::vector<uint32_t>& actual);
  void VerifyUnsynced(const std::vector<uint32_t>& actual);
  void NoteCrash();
  void Worker(int id);
  void Monitor();

  // Operations. Each holds the chunk lock of the keys it touches.
  void DoPut(Random* rnd);
  void DoDelete(Random* rnd);
  void DoDeleteRange(Random* rnd);
  void DoBatch(Random* rnd);
  void DoGet(Random* rnd);
  void DoMultiGet(Random* rnd);
  void DoScan(Random* rnd);
  // Writes batch (records already in *ops for the op log) and commits the
  // pending keys.
  void Write(Random* rnd, const WriteBatch& batch,
             const std::vector<OpEntry>& ops,
             const std::vector<uint32_t>& keys);

  uint32_t Expected(uint32_t k) {
    return ExpectedState::Load(es_.slot(k).committed);
  }
  std::mutex& ChunkLock(uint32_t key) { return locks_[key / kChunk]; }
  bool Writer(int id) const {
    return flags_.mode == SyncMode::kSync || id == 0;
  }

  const Flags flags_;
  ExpectedState es_;
  OpLog oplog_;
  std::unique_ptr<DBImpl> db_;
  std::unique_ptr<std::mutex[]> locks_;
  // Numbers writes for the op log (read only in the unsynced modes, where
  // one thread writes).
  std::atomic<uint64_t> next_op_{1};
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> writes_{0}, reads_{0};
};

Options Stress::DBOptions() const {
  Options o;
  o.create_if_missing = true;
  // Small everything, so that flushes and compactions (and kills during
  // them) are frequent.
  o.write_buffer_size = 64 << 10;
  o.max_write_buffer_number = 3;
  o.block_size = 1024;
  o.target_file_size_base = 64 << 10;
  o.max_bytes_for_level_base = 256 << 10;
  o.level0_file_num_compaction_trigger = 2;
  o.level0_slowdown_writes_trigger = 8;
  o.level0_stop_writes_trigger = 12;
  o.block_cache_size = 256 << 10;
  return o;
}

WriteOptions Stress::WriteOpts(Random* rnd) {
  WriteOptions wo;
  switch (flags_.mode) {
    case SyncMode::kSync:
      wo.sync = true;
      break;
    case SyncMode::kNoSync:
      wo.sync = rnd->OneIn(64);
      break;
    case SyncMode::kNoWal:
      wo.disable_wal = true;
      break;
  }
  return wo;
}

void Stress::ReadAll(std::vector<uint32_t>* versions) {
  versions->assign(flags_.keys, 0);
  {
    std::unique_ptr<DBIter> it(
        db_->NewIterator(ReadOptions(), nullptr, nullptr));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      uint32_t k;
      if (!ParseKey(it->key(), &k) || k >= flags_.keys) {
        Violation("phantom key '" + it->key().ToString() +
                  "' (never written by this tool)");
      }
      const uint32_t v = ParseValue(k, it->value());
      if (v == 0 || v > ExpectedState::Load(es_.slot(k).max_issued)) {
        Violation("key " + Key(k) + ": value '" +
                  it->value().ToString().substr(0, 40) +
                  "' was never written for this key");
      }
      (*versions)[k] = v;
    }
    if (!it->status().ok()) {
      Die(2, "verification scan: " + it->status().ToString());
    }
  }
  for (uint32_t k = 0; k < flags_.keys; k++) {
    std::string value;
    Status s = db_->Get(ReadOptions(), Key(k), &value);
    uint32_t v = 0;
    if (s.ok()) {
      v = ParseValue(k, value);
      if (v == 0) Violation("key " + Key(k) + ": Get returned a foreign value");
    } else if (!s.IsNotFound()) {
      Die(2, "verification Get " + Key(k) + ": " + s.ToString());
    }
    if (v != (*versions)[k]) {
      Violation("key " + Key(k) + ": scan found " + Describe((*versions)[k]) +
                " but Get found " + Describe(v));
    }
  }
}

// Synced mode: committed versions must all be there; in-flight writes may
// have landed or not, but a batch all or nothing.
void Stress::VerifySync(const std::vector<uint32_t>& actual) {
  Header* h = es_.header();
  for (uint32_t c = 0; c * kChunk < flags_.keys; c++) {
    int landed = 0, missed = 0;
    for (uint32_t k = c * kChunk; k < std::min(flags_.keys, (c + 1) * kChunk);
         k++) {
      Slot& s = es_.slot(k);
      const uint32_t committed = ExpectedState::Load(s.committed);
      const uint32_t pending = ExpectedState::Load(s.pending);
      const uint32_t a = actual[k];
      if (pending != 0) {
        const uint32_t pv = pending & ~kPendingFlag;
        if (a == pv && pv != committed) {
          landed++;
        } else if (a == committed && pv != committed) {
          missed++;
        } else if (a != pv && a != committed) {
          Violation("key " + Key(k) + ": found " + Describe(a) +
                    ", expected the acknowledged " + Describe(committed) +
                    " or the in-flight " + Describe(pv));
        }
        continue;
      }
      if (a == committed) continue;
      if (committed != 0 && a == 0) {
        Violation("key " + Key(k) + ": acknowledged synced write of " +
                  Describe(committed) + " lost (key absent)");
      } else if (committed == 0) {
        Violation("key " + Key(k) + ": deleted (acknowledged) but " +
                  Describe(a) + " came back");
      } else if (a < committed) {
        Violation("key " + Key(k) + ": acknowledged synced " +
                  Describe(committed) + " lost; older " + Describe(a) +
                  " returned");
      } else {
        Violation("key " + Key(k) + ": " + Describe(a) +
                  " was never acknowledged nor in flight (expected " +
                  Describe(committed) + ")");
      }
    }
    if (landed > 0 && missed > 0) {
      Violation("chunk at " + Key(c * kChunk) + ": an in-flight batch landed " +
                "for " + std::to_string(landed) + " keys but not for " +
                std::to_string(missed));
    }
    h->pending_resolved_new += landed > 0;
    h->pending_resolved_old += missed > 0;
  }
}

// Unsynced modes: actual must be base + a prefix of the op log reaching at
// least min_durable_op.
void Stress::VerifyUnsynced(const std::vector<uint32_t>& actual) {
  Header* h = es_.header();
  std::string data;
  Status s = oplog_.ReadAll(&data);
  if (!s.ok()) Die(2, s.ToString());
  const OpEntry* ops = reinterpret_cast<const OpEntry*>(data.data());
  const size_t n = data.size() / sizeof(OpEntry);
  std::vector<uint32_t> state(flags_.keys);
  int64_t mismatches = 0;
  for (uint32_t k = 0; k < flags_.keys; k++) {
    state[k] = ExpectedState::Load(es_.slot(k).base);
    mismatches += state[k] != actual[k];
  }
  auto set = [&](uint32_t k, uint32_t v) {
    if (k >= flags_.keys) return;
    mismatches -= state[k] != actual[k];
    state[k] = v;
    mismatches += state[k] != actual[k];
  };
  const uint64_t min_op = h->min_durable_op;
  // The best cut: the longest prefix that matches, else (for the report)
  // the one with the fewest mismatches.
  int64_t match_groups = mismatches == 0 && min_op == 0 ? 0 : -1;
  uint64_t groups = 0, last_op = 0;
  int64_t fewest = mismatches;
  uint64_t fewest_at = 0;
  for (size_t i = 0; i < n;) {
    const uint64_t op = ops[i].op;
    for (; i < n && ops[i].op == op; i++) {
      const OpEntry& e = ops[i];
      if (e.magic != kOpMagic) Die(2, "op log: damaged entry");
      switch (e.type) {
        case kOpPut:
          set(e.key, e.arg);
          break;
        case kOpDelete:
          set(e.key, 0);
          break;
        case kOpDeleteRange:
          for (uint32_t k = e.key; k < e.arg; k++) set(k, 0);
          break;
      }
    }
    groups++;
    last_op = op;
    if (mismatches == 0 && op >= min_op) match_groups = groups;
    if (mismatches < fewest) {
      fewest = mismatches;
      fewest_at = groups;
    }
  }
  if (match_groups < 0) {
    // Name a key that differs at the closest cut.
    std::vector<uint32_t> at(flags_.keys);
    for (uint32_t k = 0; k < flags_.keys; k++) {
      at[k] = ExpectedState::Load(es_.slot(k).base);
    }
    uint64_t g = 0;
    for (size_t i = 0; i < n && g < fewest_at;) {
      const uint64_t op = ops[i].op;
      for (; i < n && ops[i].op == op; i++) {
        const OpEntry& e = ops[i];
        if (e.type == kOpPut) at[e.key] = e.arg;
        if (e.type == kOpDelete) at[e.key] = 0;
        if (e.type == kOpDeleteRange) {
          for (uint32_t k = e.key; k < e.arg && k < flags_.keys; k++) at[k] = 0;
        }
      }
      g++;
    }
    std::string example;
    for (uint32_t k = 0; k < flags_.keys; k++) {
      if (at[k] != actual[k]) {
        example = "key " + Key(k) + " is " + Describe(actual[k]) +
                  ", expected " + Describe(at[k]);
        break;
      }
    }
    Violation("the database is not the verified state plus any prefix of " +
              std::to_string(groups) + " writes issued since (the last " +
              "acknowledged synced write is op " + std::to_string(min_op) +
              "); closest cut after " + std::to_string(fewest_at) +
              " writes differs in " + std::to_string(fewest) +
              " keys: " + example);
  }
  h->unsynced_ops_kept += match_groups;
  h->unsynced_ops_lost += groups - match_groups;
  (void)last_op;
}

void Stress::NoteCrash() {
  Header* h = es_.header();
  if (h->running) {
    h->unclean_exits++;
    if (h->running_flushes) h->kills_during_flush++;
    if (h->running_compactions) h->kills_during_compaction++;
    fprintf(stderr,
            "stress: previous run died while running (flush %s, compaction "
            "%s)\n",
            h->running_flushes ? "running" : "idle",
            h->running_compactions ? "running" : "idle");
  }
  if (h->recovering) {
    h->kills_during_recovery++;
    fprintf(stderr, "stress: previous run died while recovering\n");
  }
  h->running = 0;
  h->running_flushes = h->running_compactions = 0;
}

int Stress::Run() {
  bool created;
  Status s = es_.Open(flags_.expected, flags_.keys, flags_.mode, &created);
  if (!s.ok()) Die(2, s.ToString());
  Header* h = es_.header();
  if (flags_.report) {
    printf("mode=%s opens_verified=%" PRIu64 " unclean_exits=%" PRIu64
           " kills_during_recovery=%" PRIu64 " kills_during_flush=%" PRIu64
           " kills_during_compaction=%" PRIu64 " writes_acknowledged=%" PRIu64
           " inflight_landed=%" PRIu64 " inflight_not_landed=%" PRIu64
           " unsynced_ops_kept=%" PRIu64 " unsynced_ops_lost=%" PRIu64 "\n",
           SyncModeName(flags_.mode), h->opens_verified, h->unclean_exits,
           h->kills_during_recovery, h->kills_during_flush,
           h->kills_during_compaction, h->writes_acknowledged,
           h->pending_resolved_new, h->pending_resolved_old,
           h->unsynced_ops_kept, h->unsynced_ops_lost);
    return 0;
  }
  if (flags_.mode != SyncMode::kSync) {
    s = oplog_.Open(flags_.oplog);
    if (!s.ok()) Die(2, s.ToString());
  }
  if (created && Env::Default()->FileExists(flags_.db + "/CURRENT")) {
    Die(2, "database " + flags_.db +
               " exists but its expected state is new: start from an empty "
               "directory");
  }
  NoteCrash();
  locks_.reset(new std::mutex[(flags_.keys + kChunk - 1) / kChunk]);

  h->recovering = 1;
  s = DBImpl::Open(DBOptions(), flags_.db, &db_);
  if (!s.ok()) Die(2, "open " + flags_.db + ": " + s.ToString());
  std::vector<uint32_t> actual;
  ReadAll(&actual);
  if (flags_.mode == SyncMode::kSync) {
    VerifySync(actual);
  } else {
    VerifyUnsynced(actual);
  }
  // Verified: the database is the new baseline. Slots first, the op log
  // last, so a kill in between re-verifies the same way.
  uint64_t present = 0;
  for (uint32_t k = 0; k < flags_.keys; k++) {
    Slot& sl = es_.slot(k);
    ExpectedState::Store(sl.committed, actual[k]);
    ExpectedState::Store(sl.base, actual[k]);
    ExpectedState::Store(sl.pending, 0);
    present += actual[k] != 0;
  }
  h->min_durable_op = 0;
  if (flags_.mode != SyncMode::kSync) {
    s = oplog_.Truncate();
    if (!s.ok()) Die(2, s.ToString());
  }
  h->opens_verified++;
  h->recovering = 0;
  printf("stress: open #%" PRIu64 " verified (mode %s): %" PRIu64
         " of %u keys present\n",
         h->opens_verified, SyncModeName(flags_.mode), present, flags_.keys);
  fflush(stdout);
  if (flags_.verify_only || flags_.duration <= 0) {
    s = db_->Close();
    if (!s.ok()) Die(2, "close: " + s.ToString());
    return 0;
  }

  h->running = 1;
  std::vector<std::thread> threads;
  for (int i = 0; i < flags_.threads; i++) {
    threads.emplace_back([this, i] { Worker(i); });
  }
  std::thread monitor([this] { Monitor(); });
  std::this_thread::sleep_for(std::chrono::duration<double>(flags_.duration));
  stop_.store(true);
  for (std::thread& t : threads) t.join();
  monitor.join();
  h->running = 0;
  s = db_->Close();
  if (!s.ok()) Die(2, "close: " + s.ToString());
  printf("stress: ran %.1fs: %" PRIu64 " writes, %" PRIu64 " reads checked\n",
         flags_.duration, writes_.load(), reads_.load());
  return 0;
}

void Stress::Monitor() {
  Header* h = es_.header();
  while (!stop_.load(std::memory_order_relaxed)) {
    DBStats st;
    db_->GetStats(&st);
    ExpectedState::Store(h->running_flushes,
                         static_cast<uint32_t>(st.running_flushes));
    ExpectedState::Store(h->running_compactions,
                         static_cast<uint32_t>(st.running_compactions));
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

void Stress::Worker(int id) {
  Random rnd(flags_.seed * 7919 + id + 1);
  while (!stop_.load(std::memory_order_relaxed)) {
    uint64_t r = rnd.Uniform(1000);
    // The unsynced modes' single writer only writes: were it to run a
    // manual compaction (which flushes first), the memtable would mostly
    // be empty when the process is killed and the test would prove little.
    if (flags_.mode != SyncMode::kSync && id == 0) r %= 600;
    if (Writer(id) && r < 600) {
      if (r < 300) {
        DoPut(&rnd);
      } else if (r < 420) {
        DoDelete(&rnd);
      } else if (r < 460) {
        DoDeleteRange(&rnd);
      } else {
        DoBatch(&rnd);
      }
    } else if (r < 800) {
      DoGet(&rnd);
    } else if (r < 880) {
      DoMultiGet(&rnd);
    } else if (r < 995) {
      DoScan(&rnd);
    } else if (r < 998) {
      Status s = db_->Flush(false);
      if (!s.ok()) Die(2, "flush: " + s.ToString());
    } else {
      const uint32_t a = rnd.Uniform(flags_.keys);
      const std::string begin = Key(a), end = Key(a + rnd.Uniform(2000));
      Slice b(begin), e(end);
      Status s = db_->CompactRange(&b, &e);
      if (!s.ok()) Die(2, "compact range: " + s.ToString());
    }
  }
}

void Stress::Write(Random* rnd, const WriteBatch& batch,
                   const std::vector<OpEntry>& ops,
                   const std::vector<uint32_t>& keys) {
  const WriteOptions wo = WriteOpts(rnd);
  if (flags_.mode != SyncMode::kSync) {
    Status s = oplog_.Append(ops.data(), ops.size());
    if (!s.ok()) Die(2, s.ToString());
  }
  Status s = db_->Write(wo, batch.Data());
  if (!s.ok()) Die(2, "write: " + s.ToString());
  if (flags_.mode == SyncMode::kNoSync && wo.sync) {
    es_.header()->min_durable_op = ops.front().op;
  }
  for (uint32_t k : keys) es_.Commit(k);
  std::atomic_ref<uint64_t>(es_.header()->writes_acknowledged)
      .fetch_add(1, std::memory_order_relaxed);
  writes_.fetch_add(1, std::memory_order_relaxed);
}

void Stress::DoPut(Random* rnd) {
  const uint32_t k = rnd->Uniform(flags_.keys);
  std::lock_guard<std::mutex> l(ChunkLock(k));
  const uint32_t v = es_.NewVersion(k);
  es_.SetPending(k, v);
  WriteBatch b;
  b.Put(Key(k), Value(k, v));
  Write(rnd, b, {OpEntry{next_op_.fetch_add(1), kOpPut, k, v, kOpMagic}}, {k});
}

void Stress::DoDelete(Random* rnd) {
  const uint32_t k = rnd->Uniform(flags_.keys);
  std::lock_guard<std::mutex> l(ChunkLock(k));
  es_.SetPending(k, 0);
  WriteBatch b;
  b.Delete(Key(k));
  Write(rnd, b, {OpEntry{next_op_.fetch_add(1), kOpDelete, k, 0, kOpMagic}},
        {k});
}

void Stress::DoDeleteRange(Random* rnd) {
  const uint32_t chunk = rnd->Uniform((flags_.keys + kChunk - 1) / kChunk);
  const uint32_t lo = chunk * kChunk;
  const uint32_t hi = std::min(flags_.keys, lo + kChunk);
  const uint32_t a = lo + rnd->Uniform(hi - lo);
  const uint32_t e = a + 1 + rnd->Uniform(std::min<uint32_t>(8, hi - a));
  std::lock_guard<std::mutex> l(locks_[chunk]);
  std::vector<uint32_t> keys;
  for (uint32_t k = a; k < e; k++) {
    es_.SetPending(k, 0);
    keys.push_back(k);
  }
  WriteBatch b;
  b.DeleteRange(Key(a), Key(e));
  Write(rnd, b,
        {OpEntry{next_op_.fetch_add(1), kOpDeleteRange, a, e, kOpMagic}}, keys);
}

// 2-6 records on keys of one chunk, including the occasional range delete;
// a later record on the same key wins, as in the engine.
void Stress::DoBatch(Random* rnd) {
  const uint32_t chunk = rnd->Uniform((flags_.keys + kChunk - 1) / kChunk);
  const uint32_t lo = chunk * kChunk;
  const uint32_t hi = std::min(flags_.keys, lo + kChunk);
  std::lock_guard<std::mutex> l(locks_[chunk]);
  const uint64_t op = next_op_.fetch_add(1);
  WriteBatch b;
  std::vector<OpEntry> ops;
  std::vector<uint32_t> keys;
  std::vector<int64_t> final(hi - lo, -1);
  const int n = 2 + rnd->Uniform(5);
  for (int i = 0; i < n; i++) {
    const uint32_t k = lo + rnd->Uniform(hi - lo);
    const uint64_t r = rnd->Uniform(10);
    if (r < 6) {
      const uint32_t v = es_.NewVersion(k);
      b.Put(Key(k), Value(k, v));
      ops.push_back(OpEntry{op, kOpPut, k, v, kOpMagic});
      final[k - lo] = v;
    } else if (r < 9) {
      b.Delete(Key(k));
      ops.push_back(OpEntry{op, kOpDelete, k, 0, kOpMagic});
      final[k - lo] = 0;
    } else {
      const uint32_t e = k + 1 + rnd->Uniform(std::min<uint32_t>(6, hi - k));
      b.DeleteRange(Key(k), Key(e));
      ops.push_back(OpEntry{op, kOpDeleteRange, k, e, kOpMagic});
      for (uint32_t j = k; j < e; j++) final[j - lo] = 0;
    }
  }
  for (uint32_t k = lo; k < hi; k++) {
    if (final[k - lo] < 0) continue;
    es_.SetPending(k, static_cast<uint32_t>(final[k - lo]));
    keys.push_back(k);
  }
  Write(rnd, b, ops, keys);
}

void Stress::DoGet(Random* rnd) {
  const uint32_t k = rnd->Uniform(flags_.keys);
  std::lock_guard<std::mutex> l(ChunkLock(k));
  std::string value;
  Status s = db_->Get(ReadOptions(), Key(k), &value);
  uint32_t v = 0;
  if (s.ok()) {
    v = ParseValue(k, value);
    if (v == 0) Violation("Get " + Key(k) + " returned a foreign value");
  } else if (!s.IsNotFound()) {
    Die(2, "Get " + Key(k) + ": " + s.ToString());
  }
  if (v != Expected(k)) {
    Violation("Get " + Key(k) + " during the run: " + Describe(v) +
              ", expected " + Describe(Expected(k)));
  }
  reads_.fetch_add(1, std::memory_order_relaxed);
}

void Stress::DoMultiGet(Random* rnd) {
  const uint32_t chunk = rnd->Uniform((flags_.keys + kChunk - 1) / kChunk);
  const uint32_t lo = chunk * kChunk;
  const uint32_t hi = std::min(flags_.keys, lo + kChunk);
  std::lock_guard<std::mutex> l(locks_[chunk]);
  const size_t n = hi - lo;
  std::vector<std::string> key_strings(n);
  std::vector<Slice> keys(n);
  for (size_t i = 0; i < n; i++) {
    key_strings[i] = Key(lo + i);
    keys[i] = key_strings[i];
  }
  std::vector<std::string> values(n);
  std::vector<Status> statuses(n);
  db_->MultiGet(ReadOptions(), n, keys.data(), values.data(), statuses.data());
  for (size_t i = 0; i < n; i++) {
    const uint32_t k = lo + i;
    uint32_t v = 0;
    if (statuses[i].ok()) {
      v = ParseValue(k, values[i]);
    } else if (!statuses[i].IsNotFound()) {
      Die(2, "MultiGet " + Key(k) + ": " + statuses[i].ToString());
    }
    if (v != Expected(k)) {
      Violation("MultiGet " + Key(k) + " during the run: " + Describe(v) +
                ", expected " + Describe(Expected(k)));
    }
  }
  reads_.fetch_add(n, std::memory_order_relaxed);
}

// Scans one chunk through a bounded iterator, forwards or backwards.
void Stress::DoScan(Random* rnd) {
  const uint32_t chunk = rnd->Uniform((flags_.keys + kChunk - 1) / kChunk);
  const uint32_t lo = chunk * kChunk;
  const uint32_t hi = std::min(flags_.keys, lo + kChunk);
  const bool reverse = rnd->OneIn(2);
  std::lock_guard<std::mutex> l(locks_[chunk]);
  const std::string lower = Key(lo), upper = Key(hi);
  Slice lb(lower), ub(upper);
  std::unique_ptr<DBIter> it(db_->NewIterator(ReadOptions(), &lb, &ub));
  std::vector<uint32_t> seen(hi - lo, 0);
  int64_t last = reverse ? static_cast<int64_t>(hi) : -1;
  if (reverse) {
    it->SeekToLast();
  } else {
    it->SeekToFirst();
  }
  for (; it->Valid(); reverse ? it->Prev() : it->Next()) {
    uint32_t k;
    if (!ParseKey(it->key(), &k) || k < lo || k >= hi) {
      Violation("scan of [" + lower + ", " + upper + ") returned key '" +
                it->key().ToString() + "'");
    }
    if (reverse ? k >= last : static_cast<int64_t>(k) <= last) {
      Violation(std::string(reverse ? "reverse " : "") + "scan of [" + lower +
                ", " + upper + ") out of order: " + Key(k) + " after " +
                Key(static_cast<uint32_t>(last)));
    }
    last = k;
    seen[k - lo] = ParseValue(k, it->value());
    if (seen[k - lo] == 0) Violation("scan: foreign value for " + Key(k));
  }
  if (!it->status().ok()) Die(2, "scan: " + it->status().ToString());
  for (uint32_t k = lo; k < hi; k++) {
    if (seen[k - lo] != Expected(k)) {
      Violation(std::string(reverse ? "reverse " : "") + "scan " + Key(k) +
                " during the run: " + Describe(seen[k - lo]) + ", expected " +
                Describe(Expected(k)));
    }
  }
  reads_.fetch_add(hi - lo, std::memory_order_relaxed);
}

bool ParseFlag(const char* arg, const char* name, std::string* value) {
  const size_t n = strlen(name);
  if (strncmp(arg, name, n) != 0 || arg[n] != '=') return false;
  *value = arg + n + 1;
  return true;
}

Flags ParseFlags(int argc, char** argv) {
  Flags f;
  f.seed = std::chrono::steady_clock::now().time_since_epoch().count();
  for (int i = 1; i < argc; i++) {
    std::string v;
    const char* a = argv[i];
    if (ParseFlag(a, "--db", &v)) {
      f.db = v;
    } else if (ParseFlag(a, "--expected", &v)) {
      f.expected = v;
    } else if (ParseFlag(a, "--oplog", &v)) {
      f.oplog = v;
    } else if (ParseFlag(a, "--mode", &v)) {
      if (v == "sync") {
        f.mode = SyncMode::kSync;
      } else if (v == "nosync") {
        f.mode = SyncMode::kNoSync;
      } else if (v == "nowal") {
        f.mode = SyncMode::kNoWal;
      } else {
        Die(2, "--mode must be sync, nosync or nowal, not '" + v + "'");
      }
    } else if (ParseFlag(a, "--duration", &v)) {
      f.duration = atof(v.c_str());
    } else if (ParseFlag(a, "--threads", &v)) {
      f.threads = atoi(v.c_str());
    } else if (ParseFlag(a, "--keys", &v)) {
      f.keys = static_cast<uint32_t>(strtoul(v.c_str(), nullptr, 10));
    } else if (ParseFlag(a, "--seed", &v)) {
      f.seed = strtoull(v.c_str(), nullptr, 10);
    } else if (strcmp(a, "--verify_only") == 0) {
      f.verify_only = true;
    } else if (strcmp(a, "--report") == 0) {
      f.report = true;
    } else {
      Die(2, std::string("unknown flag '") + a +
                 "'; see the comment at the top of tools/stress/stress.cc");
    }
  }
  if (f.db.empty()) Die(2, "--db=DIR is required");
  if (f.threads < 1 || f.threads > 64) Die(2, "--threads must be 1..64");
  if (f.keys < kChunk || f.keys > 10000000) {
    Die(2, "--keys must be " + std::to_string(kChunk) + "..10000000");
  }
  if (f.expected.empty()) f.expected = f.db + ".expected";
  if (f.oplog.empty()) f.oplog = f.db + ".oplog";
  // One writer in the unsynced modes: the op log's order is then the
  // engine's order, which the prefix check needs.
  return f;
}

}  // namespace
}  // namespace shale::stress

int main(int argc, char** argv) {
  shale::stress::Stress stress(shale::stress::ParseFlags(argc, argv));
  return stress.Run();
}
