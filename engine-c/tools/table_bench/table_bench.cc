// table_bench: micro benchmarks of the table layer alone (no memtable, no
// WAL, no compaction), for tuning its hot paths with perf or callgrind.
//
//   table_bench --num=1000000 --benchmarks=build,get,multiget,scan
//
// It builds one SST of --num entries (keys "%016d" over a random
// permutation-free sequence, values half compressible like db_bench's
// --compression_ratio=0.5), opens it, and runs each benchmark, printing
// one db_bench-style line per benchmark:
//
//   get          :       0.512 micros/op 1953125 ops/sec; (hits 100000)
//
// Benchmarks:
//   build        write the SST (MB/s of raw key+value bytes)
//   get          Table::Get of existing keys in random order
//   getmiss      Table::Get of absent keys (filter negatives)
//   multiget     Table::MultiGet of sorted random batches (--batch_size);
//                ops are keys
//   seek         NewIterator + Seek to a random key, then --seek_nexts Next()
//   scan         one iterator, SeekToFirst, Next() over every entry
//   reversescan  one iterator, SeekToLast, Prev() over every entry
//   mergescan    a merging iterator over --merge_width tables, forward;
//                each table holds runs of --merge_run consecutive keys
//
// Numbers taken while other work shares the machine are noisy; compare runs
// back to back.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "table/filter_policy.h"
#include "table/merging_iterator.h"
#include "table/table.h"
#include "table/table_builder.h"
#include "util/cache.h"
#include "util/comparator.h"
#include "util/env.h"
#include "util/random.h"
#include "util/statistics.h"

namespace shale {
namespace {

struct Flags {
  std::string benchmarks = "build,get,getmiss,multiget,seek,scan,reversescan";
  std::string db;  // directory; default: table_bench in the temp directory
  long num = 1000000;
  long reads = -1;  // -1: num
  int key_size = 16;
  int value_size = 100;
  int block_size = 4096;
  int restart_interval = 16;
  std::string compression = "snappy";
  int bloom_bits = 10;
  long cache_size = 64L << 20;  // 0: no block cache
  bool cache_index_and_filter = false;
  bool mmap = false;
  bool verify_checksums = true;
  int batch_size = 16;
  int seek_nexts = 0;
  int merge_width = 4;
  int merge_run = 1;
  uint64_t seed = 301;
};

void Usage() {
  fprintf(stderr,
          "table_bench: micro benchmarks of the SST layer\n"
          "  --benchmarks=LIST        comma-separated: build get getmiss "
          "multiget seek scan reversescan mergescan\n"
          "  --db=DIR                 directory for the SST files\n"
          "  --num=N                  entries in the table (1000000)\n"
          "  --reads=N                lookups per read benchmark (num)\n"
          "  --key_size=N             bytes per key, >= 16 (16)\n"
          "  --value_size=N           bytes per value (100)\n"
          "  --block_size=N           data block size (4096)\n"
          "  --restart_interval=N     data block restart interval (16)\n"
          "  --compression=none|snappy (snappy)\n"
          "  --bloom_bits=N           bits per key, 0 = no filter (10)\n"
          "  --cache_size=N           block cache bytes, 0 = none (64 MiB)\n"
          "  --cache_index_and_filter=0|1  index/filter in the cache (0)\n"
          "  --mmap=0|1               read through mmap (0)\n"
          "  --verify_checksums=0|1   (1)\n"
          "  --batch_size=N           keys per MultiGet (16)\n"
          "  --seek_nexts=N           Next() calls after each seek (0)\n"
          "  --merge_width=N          tables merged by mergescan (4)\n"
          "  --merge_run=N            consecutive keys per table in mergescan "
          "(1)\n"
          "  --seed=N                 random seed (301)\n");
}

bool ParseFlag(const char* arg, Flags* f) {
  auto match = [arg](const char* name, const char** value) {
    const size_t n = strlen(name);
    if (strncmp(arg, name, n) == 0 && arg[n] == '=') {
      *value = arg + n + 1;
      return true;
    }
    return false;
  };
  const char* v;
  if (match("--benchmarks", &v)) {
    f->benchmarks = v;
  } else if (match("--db", &v)) {
    f->db = v;
  } else if (match("--num", &v)) {
    f->num = atol(v);
  } else if (match("--reads", &v)) {
    f->reads = atol(v);
  } else if (match("--key_size", &v)) {
    f->key_size = atoi(v);
  } else if (match("--value_size", &v)) {
    f->value_size = atoi(v);
  } else if (match("--block_size", &v)) {
    f->block_size = atoi(v);
  } else if (match("--restart_interval", &v)) {
    f->restart_interval = atoi(v);
  } else if (match("--compression", &v)) {
    f->compression = v;
    if (f->compression != "none" && f->compression != "snappy") return false;
  } else if (match("--bloom_bits", &v)) {
    f->bloom_bits = atoi(v);
  } else if (match("--cache_size", &v)) {
    f->cache_size = atol(v);
  } else if (match("--cache_index_and_filter", &v)) {
    f->cache_index_and_filter = atoi(v) != 0;
  } else if (match("--mmap", &v)) {
    f->mmap = atoi(v) != 0;
  } else if (match("--verify_checksums", &v)) {
    f->verify_checksums = atoi(v) != 0;
  } else if (match("--batch_size", &v)) {
    f->batch_size = atoi(v);
  } else if (match("--seek_nexts", &v)) {
    f->seek_nexts = atoi(v);
  } else if (match("--merge_width", &v)) {
    f->merge_width = atoi(v);
  } else if (match("--merge_run", &v)) {
    f->merge_run = atoi(v);
  } else if (match("--seed", &v)) {
    f->seed = strtoull(v, nullptr, 10);
  } else {
    return false;
  }
  return true;
}

[[noreturn]] void Fail(const std::string& what, const Status& s) {
  fprintf(stderr, "table_bench: %s: %s\n", what.c_str(), s.ToString().c_str());
  exit(1);
}

double NowSeconds() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class Bench {
 public:
  explicit Bench(const Flags& flags)
      : flags_(flags),
        env_(Env::Default()),
        filter_(flags.bloom_bits > 0 ? NewBloomFilterPolicy(flags.bloom_bits)
                                     : nullptr),
        cache_(flags.cache_size > 0 ? NewLRUCache(flags.cache_size) : nullptr) {
    options_.comparator = BytewiseComparator();
    options_.filter_policy = filter_.get();
    options_.block_size = flags.block_size;
    options_.block_restart_interval = flags.restart_interval;
    options_.compression =
        flags.compression == "none" ? kNoCompression : kSnappyCompression;
    options_.block_cache = cache_.get();
    options_.cache_index_and_filter_blocks = flags.cache_index_and_filter;
    options_.statistics = &stats_;
    read_options_.verify_checksums = flags.verify_checksums;
    reads_ = flags.reads < 0 ? flags.num : flags.reads;

    // Values like db_bench's with compression_ratio 0.5: 100-byte pieces,
    // each 50 random bytes written twice.
    Random rnd(flags.seed);
    while (value_pool_.size() < (1 << 20)) {
      std::string half;
      for (int i = 0; i < 50; i++) {
        half.push_back(static_cast<char>(' ' + rnd.Uniform(95)));
      }
      value_pool_ += half;
      value_pool_ += half;
    }
  }

  ~Bench() {
    tables_.clear();  // before the cache they use
  }

  void Run() {
    size_t start = 0;
    const std::string& list = flags_.benchmarks;
    while (start <= list.size()) {
      size_t end = list.find(',', start);
      if (end == std::string::npos) end = list.size();
      const std::string name = list.substr(start, end - start);
      start = end + 1;
      if (name.empty()) continue;
      if (name != "build" && name != "mergescan" && tables_.empty()) {
        OpenTables(1, false);
      }
      if (name == "build") {
        Build();
      } else if (name == "get") {
        Get(/*hits=*/true);
      } else if (name == "getmiss") {
        Get(/*hits=*/false);
      } else if (name == "multiget") {
        MultiGet();
      } else if (name == "seek") {
        Seek();
      } else if (name == "scan") {
        Scan(/*forward=*/true);
      } else if (name == "reversescan") {
        Scan(/*forward=*/false);
      } else if (name == "mergescan") {
        MergeScan();
      } else {
        fprintf(stderr, "table_bench: unknown benchmark %s\n", name.c_str());
        exit(1);
      }
    }
  }

 private:
  // bench.sst is the table of every benchmark but mergescan, whose tables
  // are merge<t>.sst.
  std::string FileName(int t, bool merge = false) const {
    return merge ? flags_.db + "/merge" + std::to_string(t) + ".sst"
                 : flags_.db + "/bench.sst";
  }

  // "%016ld" of i, padded with 'k' to key_size; by hand, because
  // snprintf would cost as much as a cached lookup.
  void MakeKey(long i, std::string* key) const {
    key->resize(flags_.key_size, 'k');
    char* p = key->data();
    for (int d = 15; d >= 0; d--) {
      p[d] = static_cast<char>('0' + i % 10);
      i /= 10;
    }
  }

  Slice ValueFor(long i) const {
    const size_t off = (static_cast<size_t>(i) * 97) %
                       (value_pool_.size() - flags_.value_size);
    return Slice(value_pool_.data() + off, flags_.value_size);
  }

  // Writes the keys < num that belong to table t of width: runs of run
  // consecutive keys go to the tables in turn, so a merge of the width
  // tables covers every key once.
  void BuildFile(int t, int width, int run, bool merge) {
    std::unique_ptr<WritableFile> file;
    Status s = env_->NewWritableFile(FileName(t, merge), &file);
    if (!s.ok()) Fail("create", s);
    TableBuilder builder(options_, file.get());
    std::string key;
    for (long i = 0; i < flags_.num; i++) {
      if ((i / run) % width != t) continue;
      MakeKey(i, &key);
      builder.Add(key, ValueFor(i));
    }
    s = builder.Finish();
    if (s.ok()) s = file->Close();
    if (!s.ok()) Fail("build", s);
  }

  void Build() {
    tables_.clear();
    const double start = NowSeconds();
    BuildFile(0, 1, 1, false);
    const double secs = NowSeconds() - start;
    uint64_t size = 0;
    env_->GetFileSize(FileName(0), &size);
    const double raw_mb = static_cast<double>(flags_.num) *
                          (flags_.key_size + flags_.value_size) / 1048576.0;
    Report("build", secs, flags_.num,
           std::to_string(raw_mb / secs).substr(0, 6) + " MB/s; file " +
               std::to_string(size >> 20) + " MiB");
    OpenTables(1, false);
  }

  void OpenTables(int n, bool merge) {
    tables_.clear();
    for (int t = 0; t < n; t++) {
      const std::string name = FileName(t, merge);
      if (!env_->FileExists(name)) {
        fprintf(stderr, "table_bench: %s missing; run build first\n",
                name.c_str());
        exit(1);
      }
      std::unique_ptr<RandomAccessFile> file;
      Status s = env_->NewRandomAccessFile(name, &file, flags_.mmap);
      uint64_t size = 0;
      if (s.ok()) s = env_->GetFileSize(name, &size);
      std::unique_ptr<Table> table;
      if (s.ok()) {
        s = Table::Open(options_, std::move(file), size, t + 1, 0, name,
                        &table);
      }
      if (!s.ok()) Fail("open", s);
      tables_.push_back(std::move(table));
    }
  }

  static void CountFound(void* arg, size_t, const Slice&, const Slice&) {
    ++*static_cast<long*>(arg);
  }

  // Warms the block cache (if it can hold the table) so that read
  // benchmarks measure CPU, not the first pass of page faults.
  void Warm() {
    std::unique_ptr<Iterator> it(tables_[0]->NewIterator(read_options_));
    long n = 0;
    for (it->SeekToFirst(); it->Valid(); it->Next()) n++;
    if (!it->status().ok()) Fail("warm", it->status());
  }

  void Get(bool hits) {
    Warm();
    Random rnd(flags_.seed + 1);
    std::string key;
    long found = 0;
    const double start = NowSeconds();
    for (long i = 0; i < reads_; i++) {
      MakeKey(static_cast<long>(rnd.Uniform(flags_.num)), &key);
      if (!hits) key[0] = 'x';  // sorts after every key: never present
      Status s = tables_[0]->Get(read_options_, key, &found, &CountFound);
      if (!s.ok()) Fail("get", s);
    }
    Report(hits ? "get" : "getmiss", NowSeconds() - start, reads_,
           "(found " + std::to_string(found) + " of " + std::to_string(reads_) +
               ")");
  }

  void MultiGet() {
    Warm();
    Random rnd(flags_.seed + 2);
    const int batch = std::max(1, flags_.batch_size);
    std::vector<std::string> keys(batch);
    std::vector<Slice> slices(batch);
    std::vector<Status> statuses(batch);
    long found = 0;
    long done = 0;
    const double start = NowSeconds();
    while (done < reads_) {
      const int n = static_cast<int>(std::min<long>(batch, reads_ - done));
      std::vector<long> ids(n);
      for (int i = 0; i < n; i++) ids[i] = rnd.Uniform(flags_.num);
      std::sort(ids.begin(), ids.end());
      for (int i = 0; i < n; i++) {
        MakeKey(ids[i], &keys[i]);
        slices[i] = keys[i];
      }
      Status s = tables_[0]->MultiGet(read_options_, n, slices.data(), &found,
                                      &CountFound, statuses.data());
      if (!s.ok()) Fail("multiget", s);
      done += n;
    }
    Report("multiget", NowSeconds() - start, done,
           "(batch " + std::to_string(batch) + ", found " +
               std::to_string(found) + ")");
  }

  void Seek() {
    Warm();
    Random rnd(flags_.seed + 3);
    std::string key;
    long found = 0;
    const double start = NowSeconds();
    for (long i = 0; i < reads_; i++) {
      std::unique_ptr<Iterator> it(tables_[0]->NewIterator(read_options_));
      MakeKey(static_cast<long>(rnd.Uniform(flags_.num)), &key);
      it->Seek(key);
      for (int j = 0; j < flags_.seek_nexts && it->Valid(); j++) it->Next();
      if (it->Valid()) found++;
    }
    Report("seek", NowSeconds() - start, reads_,
           "(nexts " + std::to_string(flags_.seek_nexts) + ", found " +
               std::to_string(found) + ")");
  }

  void Scan(bool forward) {
    Warm();
    std::unique_ptr<Iterator> it(tables_[0]->NewIterator(read_options_));
    long n = 0;
    size_t bytes = 0;
    const double start = NowSeconds();
    if (forward) {
      for (it->SeekToFirst(); it->Valid(); it->Next()) {
        bytes += it->key().size() + it->value().size();
        n++;
      }
    } else {
      for (it->SeekToLast(); it->Valid(); it->Prev()) {
        bytes += it->key().size() + it->value().size();
        n++;
      }
    }
    const double secs = NowSeconds() - start;
    if (!it->status().ok()) Fail("scan", it->status());
    Report(forward ? "scan" : "reversescan", secs, n,
           std::to_string(bytes / 1048576.0 / secs).substr(0, 6) + " MB/s");
  }

  void MergeScan() {
    const int w = std::max(1, flags_.merge_width);
    const int run = std::max(1, flags_.merge_run);
    for (int t = 0; t < w; t++) BuildFile(t, w, run, true);
    OpenTables(w, true);
    std::vector<Iterator*> children;
    for (auto& t : tables_) children.push_back(t->NewIterator(read_options_));
    std::unique_ptr<Iterator> it(
        NewMergingIterator(BytewiseComparator(), children.data(),
                           static_cast<int>(children.size())));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
    }  // warm
    long n = 0;
    const double start = NowSeconds();
    for (it->SeekToFirst(); it->Valid(); it->Next()) n++;
    Report("mergescan", NowSeconds() - start, n,
           "(" + std::to_string(w) + " tables, runs of " + std::to_string(run) +
               ")");
    tables_.clear();
  }

  void Report(const char* name, double secs, long ops,
              const std::string& extra) {
    const double micros = secs * 1e6 / std::max(1L, ops);
    printf("%-12s : %11.3f micros/op %ld ops/sec; %s\n", name, micros,
           static_cast<long>(ops / secs), extra.c_str());
    fflush(stdout);
  }

  const Flags flags_;
  Env* const env_;
  std::unique_ptr<const FilterPolicy> filter_;
  std::unique_ptr<Cache> cache_;
  Statistics stats_;
  TableOptions options_;
  TableReadOptions read_options_;
  long reads_;
  std::string value_pool_;
  std::vector<std::unique_ptr<Table>> tables_;
};

}  // namespace
}  // namespace shale

int main(int argc, char** argv) {
  shale::Flags flags;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      shale::Usage();
      return 0;
    }
    if (!shale::ParseFlag(argv[i], &flags)) {
      fprintf(stderr, "table_bench: bad flag %s\n", argv[i]);
      shale::Usage();
      return 1;
    }
  }
  if (flags.key_size < 16 || flags.value_size < 0 || flags.num <= 0 ||
      flags.value_size > (1 << 19)) {
    fprintf(stderr,
            "table_bench: need --key_size >= 16, 0 <= --value_size <= 512 "
            "KiB, --num > 0\n");
    return 1;
  }
  if (flags.db.empty()) {
    // The system's temporary directory ($TMPDIR if set).
    std::error_code ec;
    const std::filesystem::path tmp = std::filesystem::temp_directory_path(ec);
    if (ec) {
      fprintf(stderr, "table_bench: no temporary directory (%s); use --db\n",
              ec.message().c_str());
      return 1;
    }
    flags.db = (tmp / "table_bench").string();
  }
  shale::Env* env = shale::Env::Default();
  shale::Status s = env->CreateDir(flags.db);
  if (!s.ok() && !env->FileExists(flags.db)) {  // an existing dir is fine
    fprintf(stderr, "table_bench: %s\n", s.ToString().c_str());
    return 1;
  }
  shale::Bench bench(flags);
  bench.Run();
  return 0;
}
