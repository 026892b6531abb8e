#include "tools/db_bench/benchmark.h"

#include <atomic>
#include <cinttypes>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "db/db_iter.h"
#include "db/write_batch.h"
#include "tools/db_bench/stats.h"
#include "tools/db_bench/workload.h"

namespace shale {
namespace bench {

// What the threads of one benchmark share. mu guards the counts; the
// threads start together once all have initialized.
struct SharedState {
  std::mutex mu;
  std::condition_variable cv;
  int total = 0;
  int initialized = 0;
  int done = 0;
  bool start = false;
  // Readers still running (readwhilewriting's writer stops at zero).
  std::atomic<int> readers_running{0};
};

struct ThreadState {
  ThreadState(int id, uint64_t seed, bool histogram)
      : tid(id), rand(seed), stats(histogram) {}
  const int tid;
  Random rand;
  Stats stats;
  SharedState* shared = nullptr;
};

namespace {

[[noreturn]] void Die(const char* what, const Status& s) {
  fprintf(stderr, "%s error: %s\n", what, s.ToString().c_str());
  exit(1);
}

// RocksDB's ticker names for the counters that have one, so scripts read
// the same lines from both tools.
struct TickerAlias {
  Ticker ticker;
  const char* rocksdb_name;
};
constexpr TickerAlias kAliases[] = {
    {kBlockCacheHit, "rocksdb.block.cache.hit"},
    {kBlockCacheMiss, "rocksdb.block.cache.miss"},
    {kBloomFilterUseful, "rocksdb.bloom.filter.useful"},
    {kUserBytesWritten, "rocksdb.bytes.written"},
    {kBytesRead, "rocksdb.bytes.read"},
    {kWalBytesWritten, "rocksdb.wal.bytes"},
    {kWalSyncs, "rocksdb.wal.synced"},
    {kFlushBytesWritten, "rocksdb.flush.write.bytes"},
    {kCompactionBytesWritten, "rocksdb.compact.write.bytes"},
    {kCompactionBytesRead, "rocksdb.compact.read.bytes"},
    {kStallMicros, "rocksdb.stall.micros"},
};

}  // namespace

Benchmark::Benchmark(const Flags& flags) : flags_(flags) {
  path_ = flags_.db.empty()
              ? (std::filesystem::temp_directory_path() / "dbbench").string()
              : flags_.db;
  if (flags_.benchmark_write_rate_limit > 0) {
    write_limiter_ =
        std::make_unique<RateLimiter>(flags_.benchmark_write_rate_limit);
  }
}

Benchmark::~Benchmark() { CloseDB(); }

Status Benchmark::OpenDB() {
  Options o;
  o.write_buffer_size = flags_.write_buffer_size;
  o.max_write_buffer_number = flags_.max_write_buffer_number;
  o.block_size = flags_.block_size;
  o.bloom_bits_per_key = flags_.bloom_bits < 0 ? 0 : flags_.bloom_bits;
  o.compression =
      flags_.compression_type == "none" ? kNoCompression : kSnappyCompression;
  o.block_cache_size = flags_.cache_size < 0 ? 0 : flags_.cache_size;
  o.cache_index_and_filter_blocks = flags_.cache_index_and_filter_blocks;
  o.max_open_files = flags_.open_files;
  o.use_mmap_reads = flags_.mmap_read;
  o.target_file_size_base = flags_.target_file_size_base;
  o.max_bytes_for_level_base = flags_.max_bytes_for_level_base;
  o.max_bytes_for_level_multiplier = flags_.max_bytes_for_level_multiplier;
  o.level0_file_num_compaction_trigger =
      flags_.level0_file_num_compaction_trigger;
  o.level0_slowdown_writes_trigger = flags_.level0_slowdown_writes_trigger;
  o.level0_stop_writes_trigger = flags_.level0_stop_writes_trigger;
  o.max_background_jobs = flags_.max_background_jobs;
  o.delayed_write_rate = flags_.delayed_write_rate;
  o.disable_auto_compactions = flags_.disable_auto_compactions;
  return DBImpl::Open(o, path_, &db_);
}

void Benchmark::CloseDB() {
  if (db_ == nullptr) return;
  for (uint32_t t = 0; t < kTickerCount; t++) {
    carried_[t] += db_->statistics()->Get(static_cast<Ticker>(t));
  }
  Status s = db_->Close();
  if (!s.ok()) Die("close", s);
  db_.reset();
}

void Benchmark::PrintHeader() const {
  const int64_t raw = flags_.key_size + flags_.value_size;
  fprintf(stdout, "Shale:      engine-c db_bench\n");
  time_t now = time(nullptr);
  fprintf(stdout, "Date:       %s", ctime(&now));
  fprintf(stdout, "CPU:        %u\n", std::thread::hardware_concurrency());
  fprintf(stdout, "Keys:       %d bytes each\n", flags_.key_size);
  fprintf(stdout, "Values:     %d bytes each (%d bytes after compression)\n",
          flags_.value_size,
          static_cast<int>(flags_.value_size * flags_.compression_ratio + 0.5));
  fprintf(stdout, "Entries:    %" PRId64 "\n", flags_.num);
  fprintf(stdout, "RawSize:    %.1f MB (estimated)\n",
          raw * flags_.num / 1048576.0);
  fprintf(stdout, "Compression: %s\n",
          flags_.compression_type == "none" ? "NoCompression" : "Snappy");
  fprintf(stdout, "------------------------------------------------\n");
  fflush(stdout);
}

void Benchmark::PrintStatistics() const {
  uint64_t v[kTickerCount];
  for (uint32_t t = 0; t < kTickerCount; t++) {
    v[t] = carried_[t] +
           (db_ ? db_->statistics()->Get(static_cast<Ticker>(t)) : 0);
  }
  fprintf(stdout, "STATISTICS:\n");
  for (const TickerAlias& a : kAliases) {
    fprintf(stdout, "%s COUNT : %" PRIu64 "\n", a.rocksdb_name, v[a.ticker]);
  }
  for (uint32_t t = 0; t < kTickerCount; t++) {
    fprintf(stdout, "%s COUNT : %" PRIu64 "\n",
            TickerName(static_cast<Ticker>(t)), v[t]);
  }
  fflush(stdout);
}

int Benchmark::Run() {
  uint64_t seed = flags_.seed;
  if (seed == 0) {
    seed = NowMicros();
    fprintf(stdout, "Set seed to %" PRIu64 " because --seed was 0\n", seed);
  }
  PrintHeader();
  if (flags_.compression_type != "none" &&
      flags_.compression_type != "snappy") {
    fprintf(stderr, "--compression_type=%s: only none and snappy\n",
            flags_.compression_type.c_str());
    return 1;
  }
  if (!flags_.use_existing_db) {
    Status s = DBImpl::Destroy(path_);
    if (!s.ok() && std::filesystem::exists(path_)) Die("destroy", s);
  }
  if (Status s = OpenDB(); !s.ok()) Die("open", s);

  seed_ = seed;
  std::stringstream list(flags_.benchmarks);
  std::string name;
  while (std::getline(list, name, ',')) {
    if (name.empty()) continue;
    num_ = flags_.num;
    reads_ = flags_.reads < 0 ? flags_.num : flags_.reads;
    writes_ = flags_.writes < 0 ? flags_.num : flags_.writes;
    entries_per_batch_ = std::max<int64_t>(flags_.batch_size, 1);
    write_options_ = WriteOptions();
    write_options_.sync = flags_.sync;
    write_options_.disable_wal = flags_.disable_wal;

    Method method = nullptr;
    bool fresh_db = false;
    int threads = flags_.threads;
    if (name == "fillseq") {
      fresh_db = true;
      method = &Benchmark::WriteSeq;
    } else if (name == "fillrandom") {
      fresh_db = true;
      method = &Benchmark::WriteRandom;
    } else if (name == "overwrite") {
      method = &Benchmark::WriteRandom;
    } else if (name == "fillsync") {
      fresh_db = true;
      num_ = std::max<int64_t>(num_ / 1000, 1);
      write_options_.sync = true;
      method = &Benchmark::WriteRandom;
    } else if (name == "readrandom") {
      method = &Benchmark::ReadRandom;
    } else if (name == "readseq") {
      method = &Benchmark::ReadSequential;
    } else if (name == "readreverse") {
      method = &Benchmark::ReadReverse;
    } else if (name == "seekrandom") {
      method = &Benchmark::SeekRandom;
    } else if (name == "readwhilewriting") {
      threads++;  // the writer
      method = &Benchmark::ReadWhileWriting;
    } else if (name == "multireadrandom") {
      method = &Benchmark::MultiReadRandom;
    } else if (name == "waitforcompaction") {
      fprintf(stdout, "waitforcompaction(%s): started\n", path_.c_str());
      fflush(stdout);
      if (Status s = db_->WaitForCompaction(); !s.ok()) {
        Die("waitforcompaction", s);
      }
      fprintf(stdout, "waitforcompaction(%s): finished\n", path_.c_str());
      continue;
    } else if (name == "compact") {
      // As RocksDB's: the whole key range, every level, down to the last.
      if (Status s = db_->CompactRange(nullptr, nullptr); !s.ok()) {
        Die("compact", s);
      }
      continue;
    } else if (name == "stats") {
      std::string levels, counters;
      db_->GetProperty("shale.levelstats", &levels);
      db_->GetProperty("shale.stats", &counters);
      fprintf(stdout, "\n** Level stats **\n%s\n** DB stats **\n%s\n",
              levels.c_str(), counters.c_str());
      continue;
    } else {
      fprintf(stderr, "unknown benchmark '%s'\n", name.c_str());
      return 1;
    }
    if (fresh_db) {
      if (flags_.use_existing_db) {
        fprintf(stdout, "%-12s : skipped (--use_existing_db is true)\n",
                name.c_str());
        continue;
      }
      CloseDB();
      if (Status s = DBImpl::Destroy(path_); !s.ok()) Die("destroy", s);
      if (Status s = OpenDB(); !s.ok()) Die("open", s);
    }
    fprintf(stdout, "DB path: [%s]\n", path_.c_str());
    fflush(stdout);
    RunBenchmark(threads, name, method);
  }
  if (flags_.statistics) PrintStatistics();
  return 0;
}

void Benchmark::RunBenchmark(int n, const std::string& name, Method method) {
  SharedState shared;
  shared.total = n;
  std::vector<std::unique_ptr<ThreadState>> states;
  for (int i = 0; i < n; i++) {
    states.push_back(std::make_unique<ThreadState>(
        i, seed_ + 1000 * (++thread_serial_), flags_.histogram));
    states.back()->shared = &shared;
  }
  std::vector<std::thread> threads;
  for (int i = 0; i < n; i++) {
    threads.emplace_back([this, &shared, method, t = states[i].get()] {
      {
        std::unique_lock<std::mutex> l(shared.mu);
        shared.initialized++;
        if (shared.initialized >= shared.total) shared.cv.notify_all();
        shared.cv.wait(l, [&] { return shared.start; });
      }
      t->stats.Start();
      (this->*method)(t);
      t->stats.Stop();
      std::lock_guard<std::mutex> l(shared.mu);
      shared.done++;
      if (shared.done >= shared.total) shared.cv.notify_all();
    });
  }
  {
    std::unique_lock<std::mutex> l(shared.mu);
    shared.cv.wait(l, [&] { return shared.initialized >= shared.total; });
    shared.start = true;
    shared.cv.notify_all();
  }
  for (std::thread& t : threads) t.join();

  Stats merged(flags_.histogram);
  for (const auto& t : states) merged.Merge(t->stats);
  merged.Report(name);
}

void Benchmark::DoWrite(ThreadState* thread, bool sequential) {
  // As in RocksDB's db_bench, --duration bounds random fills only.
  Duration duration(sequential ? 0 : flags_.duration, writes_);
  KeyMaker keys(flags_.key_size);
  ValueGenerator values(flags_.compression_ratio, flags_.value_size);
  WriteBatch batch;
  int64_t i = 0;
  int64_t bytes = 0;
  const int64_t entry_bytes = flags_.key_size + flags_.value_size;
  while (!duration.Done(entries_per_batch_)) {
    batch.Clear();
    for (int64_t j = 0; j < entries_per_batch_; j++) {
      const uint64_t k =
          sequential ? i + j
                     : thread->rand.Uniform(static_cast<uint64_t>(num_));
      batch.Put(keys.Make(k), values.Generate(flags_.value_size));
    }
    bytes += entry_bytes * entries_per_batch_;
    if (write_limiter_)
      write_limiter_->Request(entry_bytes * entries_per_batch_);
    Status s = db_->Write(write_options_, batch.Data());
    if (!s.ok()) Die("put", s);
    i += entries_per_batch_;
    thread->stats.FinishedOps(entries_per_batch_, kWrite);
  }
  thread->stats.AddBytes(bytes);
  if (num_ != flags_.num) {
    char msg[64];
    snprintf(msg, sizeof(msg), "(%" PRId64 " ops)", num_);
    thread->stats.AddMessage(msg);
  }
}

void Benchmark::ReadRandom(ThreadState* thread) {
  Duration duration(flags_.duration, reads_);
  KeyMaker keys(flags_.key_size);
  ReadOptions ro;
  std::string value;
  int64_t read = 0, found = 0, bytes = 0;
  while (!duration.Done(1)) {
    const Slice key =
        keys.Make(thread->rand.Uniform(static_cast<uint64_t>(flags_.num)));
    Status s = db_->Get(ro, key, &value);
    read++;
    if (s.ok()) {
      found++;
      bytes += key.size() + value.size();
    } else if (!s.IsNotFound()) {
      Die("get", s);
    }
    thread->stats.FinishedOps(1, kRead);
  }
  char msg[100];
  snprintf(msg, sizeof(msg), "(%" PRId64 " of %" PRId64 " found)", found, read);
  thread->stats.AddBytes(bytes);
  thread->stats.AddMessage(msg);
}

void Benchmark::ReadSequential(ThreadState* thread) {
  std::unique_ptr<DBIter> it(db_->NewIterator(ReadOptions(), nullptr, nullptr));
  int64_t i = 0, bytes = 0;
  for (it->SeekToFirst(); i < reads_ && it->Valid(); it->Next()) {
    bytes += it->key().size() + it->value().size();
    thread->stats.FinishedOps(1, kRead);
    ++i;
  }
  if (!it->status().ok()) Die("readseq", it->status());
  thread->stats.AddBytes(bytes);
}

void Benchmark::ReadReverse(ThreadState* thread) {
  std::unique_ptr<DBIter> it(db_->NewIterator(ReadOptions(), nullptr, nullptr));
  int64_t i = 0, bytes = 0;
  for (it->SeekToLast(); i < reads_ && it->Valid(); it->Prev()) {
    bytes += it->key().size() + it->value().size();
    thread->stats.FinishedOps(1, kRead);
    ++i;
  }
  if (!it->status().ok()) Die("readreverse", it->status());
  thread->stats.AddBytes(bytes);
}

void Benchmark::SeekRandom(ThreadState* thread) {
  // One iterator per thread for all seeks, as RocksDB's db_bench does by
  // default: it reads the state of the moment it was created.
  std::unique_ptr<DBIter> it(db_->NewIterator(ReadOptions(), nullptr, nullptr));
  Duration duration(flags_.duration, reads_);
  KeyMaker keys(flags_.key_size);
  int64_t read = 0, found = 0, bytes = 0;
  while (!duration.Done(1)) {
    const Slice key =
        keys.Make(thread->rand.Uniform(static_cast<uint64_t>(flags_.num)));
    it->Seek(key);
    read++;
    if (it->Valid() && it->key() == key) found++;
    for (int j = 0; j < flags_.seek_nexts && it->Valid(); j++) {
      bytes += it->key().size() + it->value().size();
      it->Next();
    }
    if (!it->status().ok()) Die("seek", it->status());
    thread->stats.FinishedOps(1, kSeek);
  }
  char msg[100];
  snprintf(msg, sizeof(msg), "(%" PRId64 " of %" PRId64 " found)", found, read);
  thread->stats.AddBytes(bytes);
  thread->stats.AddMessage(msg);
}

void Benchmark::MultiReadRandom(ThreadState* thread) {
  Duration duration(flags_.duration, reads_);
  const size_t n = static_cast<size_t>(entries_per_batch_);
  std::vector<std::string> key_store(n, std::string(flags_.key_size, '0'));
  std::vector<Slice> keys(n);
  std::vector<std::string> values(n);
  std::vector<Status> statuses(n);
  KeyMaker maker(flags_.key_size);
  ReadOptions ro;
  int64_t read = 0, found = 0, bytes = 0;
  while (!duration.Done(entries_per_batch_)) {
    for (size_t i = 0; i < n; i++) {
      const Slice k =
          maker.Make(thread->rand.Uniform(static_cast<uint64_t>(flags_.num)));
      key_store[i].assign(k.data(), k.size());
      keys[i] = Slice(key_store[i]);
    }
    db_->MultiGet(ro, n, keys.data(), values.data(), statuses.data());
    for (size_t i = 0; i < n; i++) {
      if (statuses[i].ok()) {
        found++;
        bytes += keys[i].size() + values[i].size();
      } else if (!statuses[i].IsNotFound()) {
        Die("multiget", statuses[i]);
      }
    }
    read += entries_per_batch_;
    thread->stats.FinishedOps(entries_per_batch_, kRead);
  }
  char msg[100];
  snprintf(msg, sizeof(msg), "(%" PRId64 " of %" PRId64 " found)", found, read);
  thread->stats.AddBytes(bytes);
  thread->stats.AddMessage(msg);
}

void Benchmark::ReadWhileWriting(ThreadState* thread) {
  if (thread->tid == 0) {
    BackgroundWriter(thread);
    return;
  }
  thread->shared->readers_running.fetch_add(1);
  ReadRandom(thread);
  thread->shared->readers_running.fetch_sub(1);
}

void Benchmark::BackgroundWriter(ThreadState* thread) {
  thread->stats.SetExcludeFromMerge();
  // Wait until the readers have registered, so an early check does not see
  // zero readers and stop at once.
  while (thread->shared->readers_running.load() == 0) {
    std::lock_guard<std::mutex> l(thread->shared->mu);
    if (thread->shared->done >= thread->shared->total - 1) return;
    std::this_thread::yield();
  }
  KeyMaker keys(flags_.key_size);
  ValueGenerator values(flags_.compression_ratio, flags_.value_size);
  WriteBatch batch;
  const int64_t entry_bytes = flags_.key_size + flags_.value_size;
  while (thread->shared->readers_running.load(std::memory_order_relaxed) > 0) {
    batch.Clear();
    batch.Put(keys.Make(thread->rand.Uniform(static_cast<uint64_t>(num_))),
              values.Generate(flags_.value_size));
    if (write_limiter_) write_limiter_->Request(entry_bytes);
    Status s = db_->Write(write_options_, batch.Data());
    if (!s.ok()) Die("put", s);
    thread->stats.FinishedOps(1, kWrite);
  }
}

}  // namespace bench
}  // namespace shale
