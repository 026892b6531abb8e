// Table: a reader of one immutable SST file.
//
// Open() reads the footer, the index block and (unless they go through the
// block cache) the filter and properties; data blocks are read with pread on
// demand and cached in the shared block cache.
//
// Thread safety: a Table is immutable once open and may be used by many
// threads at once; each iterator it hands out is for one thread.

#ifndef SHALE_TABLE_TABLE_H_
#define SHALE_TABLE_TABLE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "table/cache_line_bloom.h"
#include "table/filter_policy.h"
#include "table/index_windows.h"
#include "table/options.h"
#include "util/iterator.h"
#include "util/slice.h"
#include "util/statistics.h"
#include "util/status.h"

namespace shale {

class RandomAccessFile;

// What a file says about itself (the properties block).
struct TableProperties {
  uint64_t num_entries = 0;
  uint64_t num_range_tombstones = 0;
  uint64_t num_data_blocks = 0;
  uint64_t raw_key_bytes = 0;
  uint64_t raw_value_bytes = 0;
  uint64_t data_bytes = 0;  // on disk, after compression
  uint64_t index_bytes = 0;
  uint64_t filter_bytes = 0;
  std::string comparator_name;
  std::string filter_policy_name;  // "" when the file has no filter
  std::string compression_name;
  std::map<std::string, std::string> user_properties;
};

// Called by Get/MultiGet with the first entry at or after a lookup key.
// index is the lookup's position in a MultiGet batch (0 for Get).
using TableGetCallback = void (*)(void* arg, size_t index,
                                  const Slice& found_key,
                                  const Slice& found_value);

// The filter probe of one point lookup, kept across the tables it visits
// so that its key is hashed once (the tables of a database share a filter
// policy; a table with another policy prepares the probe again).
struct FilterProbe {
  const FilterPolicy* policy = nullptr;  // the policy that prepared hash
  bool by_hash = false;                  // false: that policy probes by key
  uint64_t hash = 0;
};

class Table {
 public:
  // Opens the file (of file_size bytes). file_number makes block-cache keys
  // unique across files. global_seqno, when non-zero, overrides the sequence
  // number in the 8-byte internal-key trailer of every entry and range
  // tombstone read from the file (keeping the type byte): this is how an
  // ingested file becomes "one newer write" without being rewritten. Corrupt
  // or truncated files fail with Corruption naming the file and offset.
  static Status Open(const TableOptions& options,
                     std::unique_ptr<RandomAccessFile> file, uint64_t file_size,
                     uint64_t file_number, uint64_t global_seqno,
                     const std::string& file_name,
                     std::unique_ptr<Table>* table);

  Table(const Table&) = delete;
  Table& operator=(const Table&) = delete;
  ~Table();

  // An iterator over every entry (not the range tombstones).
  Iterator* NewIterator(const TableReadOptions& options) const;

  // An iterator over the range tombstones: key() is the start table key,
  // value() the exclusive end user key, ordered by start. Never nullptr
  // (empty when the file has none).
  Iterator* NewRangeTombstoneIterator(const TableReadOptions& options) const;

  // Point lookup. If the filter does not rule key out, finds the first entry
  // at or after key and calls callback(arg, 0, found_key, found_value) -
  // unless the file holds no such entry. The callback decides whether the
  // found key answers the lookup. probe (may be null) carries the key's
  // filter hash from table to table: pass the same one, for the same key,
  // to every table a lookup visits.
  Status Get(const TableReadOptions& options, const Slice& key, void* arg,
             TableGetCallback callback, FilterProbe* probe = nullptr) const;

  // Get's filter step, inline, for callers that test a table before
  // calling into it (Version's point reads pass over most tables on this
  // alone). kNo: the filter rules key out; kMaybe: it does not, or there is
  // no filter (then call GetPastFilter); kNotTested: the filter is in the
  // block cache or is not probed by hash (then call Get). Counts the check
  // as Get does. probe as for Get (not null).
  enum class FilterAnswer { kNo, kMaybe, kNotTested };
  FilterAnswer TestFilter(const Slice& key, FilterProbe* probe) const {
    if (!has_filter_) return FilterAnswer::kMaybe;
    if (held_policy_ == nullptr) return FilterAnswer::kNotTested;
    if (probe->policy != held_policy_) {
      probe->policy = held_policy_;
      probe->by_hash = held_policy_->PrepareProbe(held_policy_->FilterKey(key),
                                                  &probe->hash);
    }
    if (!probe->by_hash) return FilterAnswer::kNotTested;
    if (stats_ != nullptr) stats_->Record(kBloomFilterChecked);
    if (held_bloom_.usable
            ? bloom::ProbeMayMatch(held_bloom_, probe->hash)
            : held_policy_->ProbeMayMatch(probe->hash, held_filter_)) {
      return FilterAnswer::kMaybe;
    }
    if (stats_ != nullptr) stats_->Record(kBloomFilterUseful);
    return FilterAnswer::kNo;
  }

  // Get for a key TestFilter answered kMaybe: the index and data blocks
  // only, no filter.
  Status GetPastFilter(const TableReadOptions& options, const Slice& key,
                       void* arg, TableGetCallback callback) const;

  // Whether the file may hold entries whose filter key is that of key (an
  // internal key): false only when the file's filter rules it out; true
  // without a filter (or one built under other settings). Counts a filter
  // check, and a useful one when it answers false.
  Status KeyMayMatch(const TableReadOptions& options, const Slice& key,
                     bool* may_match) const;

  // Batched point lookups. keys[0, n) must be sorted by the comparator.
  // Behaves like n calls to Get(keys[i]) with index i, but probes the filter
  // for every key first (prefetching its cache lines) and reads each data
  // block at most once for all keys that fall in it. Errors are reported per
  // key in statuses[i] (which must have n entries); the result is the first
  // error, or OK. probes (may be null) holds a FilterProbe per key, carried
  // from table to table as Get's is, so a key is hashed for one filter only.
  Status MultiGet(const TableReadOptions& options, size_t n, const Slice* keys,
                  void* arg, TableGetCallback callback, Status* statuses,
                  FilterProbe* const* probes = nullptr,
                  bool filter_tested = false) const;

  // TestFilter for a batch, prefetching the filter lines as MultiGet does:
  // sets may_match[0, n) and returns true, or returns false (nothing set)
  // where TestFilter would answer kNotTested. A MultiGet of the keys left
  // then passes filter_tested = true and probes no filter.
  bool TestFilters(size_t n, const Slice* keys, FilterProbe* const* probes,
                   bool* may_match) const;

  // The approximate byte offset in the file of the data for key (for size
  // estimates of key spans).
  uint64_t ApproximateOffsetOf(const Slice& key) const;

  const TableProperties& properties() const;

  // Memory held by the open table outside the block cache (index, filter).
  size_t ApproximateMemoryUsage() const;

 private:
  struct Rep;
  explicit Table(std::unique_ptr<Rep> rep);
  friend class Readahead;
  friend class TableIterator;

  std::unique_ptr<Rep> rep_;
  // For TestFilter, from rep_: whether the file has a filter, and when the
  // table holds it (not the block cache), its policy and bytes.
  bool has_filter_ = false;
  const FilterPolicy* held_policy_ = nullptr;
  Slice held_filter_;
  // held_filter_ parsed, when held_policy_ ProbesCacheLineBloom and the
  // filter is well formed (usable): tested inline.
  bloom::FilterView held_bloom_;
  // Over the index block the table holds (empty when it is in the block
  // cache): point lookups search it instead of the block's restart keys.
  IndexWindows index_windows_;
  Statistics* stats_ = nullptr;
};

}  // namespace shale

#endif  // SHALE_TABLE_TABLE_H_
