#include "tools/db_bench/flags.h"

#include <cerrno>
#include <cinttypes>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

namespace shale {
namespace bench {
namespace {

enum class Kind { kBool, kInt32, kInt64, kUint64, kDouble, kString };

struct FlagDef {
  const char* name;
  Kind kind;
  void* field;  // the member of the Flags the table was built for
  const char* help;
};

#define SHALE_FLAG(name, kind, help) \
  FlagDef { #name, Kind::kind, &f->name, help }

// The flag table, pointing into *f.
std::vector<FlagDef> Defs(Flags* f) {
  return {
      SHALE_FLAG(benchmarks, kString,
                 "Comma-separated benchmarks, run in order: fillseq "
                 "fillrandom overwrite fillsync readrandom readseq "
                 "readreverse seekrandom readwhilewriting multireadrandom "
                 "waitforcompaction compact stats"),
      SHALE_FLAG(db, kString,
                 "Database directory (default: dbbench under the system "
                 "temp directory)"),
      SHALE_FLAG(use_existing_db, kBool,
                 "Do not destroy the database; benchmarks that need a fresh "
                 "one (fill*) then fail"),
      SHALE_FLAG(num, kInt64, "Number of key/values to place in database"),
      SHALE_FLAG(reads, kInt64,
                 "Read operations per thread; negative means --num"),
      SHALE_FLAG(writes, kInt64,
                 "Write operations per thread; negative means --num"),
      SHALE_FLAG(threads, kInt32,
                 "Concurrent benchmark threads (readwhilewriting adds one "
                 "writer)"),
      SHALE_FLAG(duration, kInt32,
                 "Seconds for each benchmark to run; 0: --num/--reads/"
                 "--writes decide"),
      SHALE_FLAG(key_size, kInt32, "Size of each key"),
      SHALE_FLAG(value_size, kInt32, "Size of each value"),
      SHALE_FLAG(seed, kInt64,
                 "Seed base for random number generators; 0: from the "
                 "clock"),
      SHALE_FLAG(compression_type, kString, "none or snappy"),
      SHALE_FLAG(compression_ratio, kDouble,
                 "Values shrink to this fraction of their size when "
                 "compressed"),
      SHALE_FLAG(block_size, kInt32, "Bytes in a data block"),
      SHALE_FLAG(bloom_bits, kInt32,
                 "Bloom filter bits per key; negative: default (none); 0: "
                 "none"),
      SHALE_FLAG(cache_size, kInt64, "Block cache bytes (uncompressed)"),
      SHALE_FLAG(cache_index_and_filter_blocks, kBool,
                 "Keep index and filter blocks in the block cache"),
      SHALE_FLAG(open_files, kInt32,
                 "Maximum open table readers; -1: no limit"),
      SHALE_FLAG(mmap_read, kBool, "Read SST files through mmap"),
      SHALE_FLAG(write_buffer_size, kInt64, "Bytes in a memtable"),
      SHALE_FLAG(max_write_buffer_number, kInt32,
                 "Memtables (active + immutable)"),
      SHALE_FLAG(target_file_size_base, kInt64, "Target SST file size"),
      SHALE_FLAG(max_bytes_for_level_base, kUint64, "Max bytes for level 1"),
      SHALE_FLAG(max_bytes_for_level_multiplier, kDouble,
                 "Growth of max bytes per level below L1"),
      SHALE_FLAG(level0_file_num_compaction_trigger, kInt32,
                 "L0 files that start a compaction"),
      SHALE_FLAG(level0_slowdown_writes_trigger, kInt32,
                 "L0 files that slow writes down"),
      SHALE_FLAG(level0_stop_writes_trigger, kInt32,
                 "L0 files that stop writes"),
      SHALE_FLAG(max_background_jobs, kInt32,
                 "Background threads for flushes and compactions"),
      SHALE_FLAG(delayed_write_rate, kUint64,
                 "Bytes/s allowed while writes are slowed down"),
      SHALE_FLAG(disable_auto_compactions, kBool, "No automatic compactions"),
      SHALE_FLAG(sync, kBool, "Sync every write"),
      SHALE_FLAG(disable_wal, kBool, "Write without the WAL"),
      SHALE_FLAG(batch_size, kInt64,
                 "Keys per write batch and per MultiGet (multireadrandom)"),
      SHALE_FLAG(multiread_batched, kBool,
                 "Use the batched MultiGet (the engine's MultiGet is always "
                 "batched)"),
      SHALE_FLAG(seek_nexts, kInt32, "Next() calls after each Seek()"),
      SHALE_FLAG(benchmark_write_rate_limit, kUint64,
                 "Writer bytes/s in readwhilewriting and writes; 0: "
                 "unlimited"),
      SHALE_FLAG(statistics, kBool, "Print the engine's counters at the end"),
      SHALE_FLAG(histogram, kBool, "Print a latency histogram per benchmark"),
  };
}

#undef SHALE_FLAG

const FlagDef* Find(const std::vector<FlagDef>& defs, std::string_view name) {
  for (const FlagDef& d : defs) {
    if (name == d.name) return &d;
  }
  return nullptr;
}

bool ParseBool(const std::string& v, bool* out) {
  if (v == "true" || v == "1" || v == "yes" || v == "t" || v == "y") {
    *out = true;
  } else if (v == "false" || v == "0" || v == "no" || v == "f" || v == "n") {
    *out = false;
  } else {
    return false;
  }
  return true;
}

bool SetValue(const FlagDef& d, const std::string& v, std::string* error) {
  void* base = d.field;
  char* end = nullptr;
  errno = 0;
  bool ok = !v.empty();
  switch (d.kind) {
    case Kind::kBool:
      ok = ParseBool(v, static_cast<bool*>(base));
      break;
    case Kind::kInt32: {
      const long long x = strtoll(v.c_str(), &end, 10);
      ok = ok && *end == '\0' && errno == 0 && x >= INT32_MIN && x <= INT32_MAX;
      if (ok) *static_cast<int32_t*>(base) = static_cast<int32_t>(x);
      break;
    }
    case Kind::kInt64: {
      const long long x = strtoll(v.c_str(), &end, 10);
      ok = ok && *end == '\0' && errno == 0;
      if (ok) *static_cast<int64_t*>(base) = x;
      break;
    }
    case Kind::kUint64: {
      const unsigned long long x = strtoull(v.c_str(), &end, 10);
      ok = ok && *end == '\0' && errno == 0 && v[0] != '-';
      if (ok) *static_cast<uint64_t*>(base) = x;
      break;
    }
    case Kind::kDouble: {
      const double x = strtod(v.c_str(), &end);
      ok = ok && *end == '\0' && errno == 0;
      if (ok) *static_cast<double*>(base) = x;
      break;
    }
    case Kind::kString:
      *static_cast<std::string*>(base) = v;
      ok = true;
      break;
  }
  if (!ok) *error = "invalid value \"" + v + "\" for --" + d.name;
  return ok;
}

std::string Current(const FlagDef& d) {
  const void* base = d.field;
  char buf[64];
  switch (d.kind) {
    case Kind::kBool:
      return *static_cast<const bool*>(base) ? "true" : "false";
    case Kind::kInt32:
      snprintf(buf, sizeof(buf), "%" PRId32,
               *static_cast<const int32_t*>(base));
      return buf;
    case Kind::kInt64:
      snprintf(buf, sizeof(buf), "%" PRId64,
               *static_cast<const int64_t*>(base));
      return buf;
    case Kind::kUint64:
      snprintf(buf, sizeof(buf), "%" PRIu64,
               *static_cast<const uint64_t*>(base));
      return buf;
    case Kind::kDouble:
      snprintf(buf, sizeof(buf), "%g", *static_cast<const double*>(base));
      return buf;
    case Kind::kString:
      return "\"" + *static_cast<const std::string*>(base) + "\"";
  }
  return "";
}

const char* KindName(Kind k) {
  switch (k) {
    case Kind::kBool:
      return "bool";
    case Kind::kInt32:
      return "int32";
    case Kind::kInt64:
      return "int64";
    case Kind::kUint64:
      return "uint64";
    case Kind::kDouble:
      return "double";
    case Kind::kString:
      return "string";
  }
  return "";
}

}  // namespace

bool ParseFlags(int argc, char** argv, Flags* flags, bool* help,
                std::string* error) {
  *help = false;
  const std::vector<FlagDef> defs = Defs(flags);
  for (int i = 1; i < argc; i++) {
    std::string arg = argv[i];
    if (arg.size() < 2 || arg[0] != '-') {
      *error = "unexpected argument \"" + arg + "\" (flags are --name=value)";
      return false;
    }
    arg = arg.substr(arg[1] == '-' ? 2 : 1);
    std::string name = arg, value;
    bool has_value = false;
    if (size_t eq = arg.find('='); eq != std::string::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      has_value = true;
    }
    if (name == "help" || name == "helpfull") {
      *help = true;
      continue;
    }
    const FlagDef* d = Find(defs, name);
    if (d == nullptr && !has_value && name.rfind("no", 0) == 0) {
      d = Find(defs, name.substr(2));
      if (d != nullptr && d->kind == Kind::kBool) {
        value = "false";
        has_value = true;
      } else {
        d = nullptr;
      }
    }
    if (d == nullptr) {
      *error = "unknown flag --" + name + " (see --help)";
      return false;
    }
    if (!has_value) {
      if (d->kind == Kind::kBool) {
        value = "true";
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        *error = "flag --" + name + " needs a value";
        return false;
      }
    }
    if (!SetValue(*d, value, error)) return false;
  }
  return true;
}

std::string FlagsHelp() {
  Flags defaults;
  std::string r =
      "db_bench: the Shale engine's benchmark tool; flags and output lines "
      "follow RocksDB 7.8.3's db_bench.\n\nFlags:\n";
  for (const FlagDef& d : Defs(&defaults)) {
    r += "  --";
    r += d.name;
    r += " (";
    r += d.help;
    r += ") type: ";
    r += KindName(d.kind);
    r += " default: ";
    r += Current(d);
    r += "\n";
  }
  return r;
}

}  // namespace bench
}  // namespace shale
