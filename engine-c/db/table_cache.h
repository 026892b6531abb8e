// TableCache: the open SST readers, kept in an LRU cache (util/cache.h)
// keyed by file number, each with its range tombstones already cut into
// fragments.
//
// With max_open_files = -1 the cache is unbounded and each file's reader is
// also pinned in its FileMetaData, so a read finds its table without a
// cache lookup (and without the shard mutex that takes).
//
// Thread safety: every method may be called concurrently.

#ifndef SHALE_DB_TABLE_CACHE_H_
#define SHALE_DB_TABLE_CACHE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "db/range_tombstone.h"
#include "db/version_edit.h"
#include "table/options.h"
#include "table/table.h"
#include "util/cache.h"
#include "util/iterator.h"

namespace shale {

class Env;

class TableCache {
 public:
  // max_open_files: -1 for no limit. table_options (comparator, filter
  // policy, block cache, statistics) must outlive the cache.
  TableCache(const std::string& dbname, Env* env,
             const TableOptions& table_options, int max_open_files,
             bool use_mmap_reads);
  TableCache(const TableCache&) = delete;
  TableCache& operator=(const TableCache&) = delete;
  ~TableCache();

  // An iterator over the file's entries (internal keys). On failure
  // returns an error iterator.
  Iterator* NewIterator(const TableReadOptions& options, FileMetaData* f);

  // Opens and pins the file's table ahead of its first read when tables
  // are pinned (max_open_files = -1; else a no-op), as RocksDB opens every
  // table at DB open: reads then never pay for an open. An error is not
  // kept (the first read retries and reports it).
  void Preload(FileMetaData* f);

  // Table::Get on the file.
  Status Get(const TableReadOptions& options, FileMetaData* f,
             const Slice& internal_key, void* arg, TableGetCallback callback,
             FilterProbe* probe = nullptr);

  // Table::KeyMayMatch on the file: false only if its filter rules out
  // internal_key's filter key.
  Status KeyMayMatch(const TableReadOptions& options, FileMetaData* f,
                     const Slice& internal_key, bool* may_match);

  // Table::MultiGet on the file.
  Status MultiGet(const TableReadOptions& options, FileMetaData* f, size_t n,
                  const Slice* keys, void* arg, TableGetCallback callback,
                  Status* statuses, FilterProbe* const* probes = nullptr);

  // The file's range tombstones (nullptr when it has none).
  Status GetRangeTombstones(
      FileMetaData* f,
      std::shared_ptr<const FragmentedRangeTombstoneList>* tombstones);

  // Table::ApproximateOffsetOf on the file.
  Status ApproximateOffsetOf(FileMetaData* f, const Slice& internal_key,
                             uint64_t* offset);

  // Opens the file (if it is not open): footer, index, filter and range
  // tombstones read and check out. Used on every file just written, so a
  // bad file is caught before it is installed. f may be a temporary: the
  // reader stays in the cache but is not pinned into f.
  Status Verify(FileMetaData* f);

  // Drops the file's reader from the cache (the file is being deleted).
  void Evict(uint64_t file_number);

  // Releases f's pinned reader. REQUIRES: no one reads f any more.
  void Unpin(FileMetaData* f);

  // What the cache holds for one open file (public for its deleter).
  struct Entry;

 private:
  class Ref;

  // Finds f's open table, opening it if needed; *ref keeps it alive.
  // allow_pin false: never pin it into f (f may be a temporary copy).
  Status FindTable(FileMetaData* f, Ref* ref, bool allow_pin = true);
  Status OpenTable(FileMetaData* f, std::unique_ptr<Entry>* entry);

  Env* const env_;
  const std::string dbname_;
  const TableOptions table_options_;
  const bool pin_tables_;
  const bool use_mmap_reads_;
  std::unique_ptr<Cache> cache_;
};

}  // namespace shale

#endif  // SHALE_DB_TABLE_CACHE_H_
