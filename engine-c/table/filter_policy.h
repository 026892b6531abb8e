// FilterPolicy: builds and probes the per-file filter that lets a lookup skip
// an SST that cannot hold its key.
//
// The Bloom policy keeps every probe of one key inside one 64-byte cache line
// (a "blocked" Bloom filter), so a negative lookup costs one cache miss. Its
// encoding is stored in SSTs and identified by Name(): DO NOT CHANGE a
// policy's encoding without changing its name.
//
// Thread safety: policies are immutable and may be shared across threads.

#ifndef SHALE_TABLE_FILTER_POLICY_H_
#define SHALE_TABLE_FILTER_POLICY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "util/slice.h"

namespace shale {

class FilterPolicy {
 public:
  virtual ~FilterPolicy() = default;

  // Stored in the SST; a reader ignores a filter whose name it does not know
  // (and then reads data blocks as if the filter said "maybe").
  virtual const char* Name() const = 0;

  // Appends to *dst a filter summarizing keys[0, n).
  virtual void CreateFilter(const Slice* keys, int n,
                            std::string* dst) const = 0;

  // False means key was certainly not among the keys the filter was built
  // from; true means it may have been.
  virtual bool KeyMayMatch(const Slice& key, const Slice& filter) const = 0;

  // Batched probe: sets may_match[i] for keys[0, n). Implementations
  // compute every key's cache line first and prefetch them all before
  // testing any, so the misses overlap (cf. RocksDB's batched MultiGet).
  virtual void KeysMayMatch(const Slice* keys, int n, const Slice& filter,
                            bool* may_match) const;

  // The key the filter is built from and probed with, given a table key
  // (the identity by default; the engine passes a policy that strips the
  // internal-key trailer so filters are over user keys).
  virtual Slice FilterKey(const Slice& table_key) const { return table_key; }

  // Probing by hash, for a lookup that probes the filters of several tables
  // for one key: PrepareProbe hashes a filter key once into *probe, and
  // ProbeMayMatch(*probe, filter) then answers as KeyMayMatch(key, filter)
  // would. A policy that cannot probe by hash returns false from
  // PrepareProbe (the default); callers then probe by key.
  virtual bool PrepareProbe(const Slice& /*key*/, uint64_t* /*probe*/) const {
    return false;
  }
  virtual bool ProbeMayMatch(uint64_t /*probe*/,
                             const Slice& /*filter*/) const {
    return true;
  }
  // Batched ProbeMayMatch: sets may_match[i] for probes[0, n), prefetching
  // as KeysMayMatch does.
  virtual void ProbesMayMatch(const uint64_t* probes, int n,
                              const Slice& filter, bool* may_match) const;

  // True if this policy's filters are cache-line Bloom filters probed by
  // PrepareProbe's hash (table/cache_line_bloom.h): ProbeMayMatch(probe,
  // filter) is then bloom::ProbeMayMatch(bloom::ParseFilter(filter), probe),
  // which a table holding the filter tests inline, without a call.
  virtual bool ProbesCacheLineBloom() const { return false; }
};

// A cache-line-blocked Bloom filter with bits_per_key bits per key
// (10 gives about a 1% false-positive rate). The caller owns the result.
const FilterPolicy* NewBloomFilterPolicy(int bits_per_key);

}  // namespace shale

#endif  // SHALE_TABLE_FILTER_POLICY_H_
