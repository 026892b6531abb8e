// Cache: a byte-bounded map from keys to pinned values, with LRU eviction
// (NewLRUCache approximates LRU with lazy promotion; see util/cache.cc).
//
// Used for data/index/filter blocks (the block cache) and open table readers
// (the table cache). NewLRUCache shards the key space so that concurrent
// lookups rarely contend on one mutex.
//
// Thread safety: every method may be called concurrently.

#ifndef SHALE_UTIL_CACHE_H_
#define SHALE_UTIL_CACHE_H_

#include <cstddef>
#include <cstdint>

#include "util/slice.h"

namespace shale {

class Cache {
 public:
  Cache() = default;
  Cache(const Cache&) = delete;
  Cache& operator=(const Cache&) = delete;
  // Destroys every entry by calling its deleter. REQUIRES: no handle is
  // outstanding.
  virtual ~Cache() = default;

  // An opaque pinned entry.
  struct Handle {};

  using Deleter = void (*)(const Slice& key, void* value);

  // Inserts key -> value with the given charge against capacity, replacing
  // an existing entry with the same key, and returns it pinned. The caller
  // must Release() the handle. deleter(key, value) runs once the entry is
  // neither in the cache nor pinned. An insert may push usage past capacity
  // while entries are pinned.
  virtual Handle* Insert(const Slice& key, void* value, size_t charge,
                         Deleter deleter) = 0;

  // Returns the entry for key pinned, or nullptr. The caller must Release()
  // a non-null result.
  virtual Handle* Lookup(const Slice& key) = 0;

  // Unpins an entry. REQUIRES: handle came from this cache, not yet
  // released.
  virtual void Release(Handle* handle) = 0;

  // The value of a pinned entry. REQUIRES: handle not yet released.
  virtual void* Value(Handle* handle) = 0;

  // Drops key's entry, if present; it is destroyed once unpinned.
  virtual void Erase(const Slice& key) = 0;

  // A new ID, unique in this cache, so that clients sharing a cache can
  // partition its key space (e.g. one ID per open table file).
  virtual uint64_t NewId() = 0;

  // Drops every unpinned entry.
  virtual void Prune() = 0;

  // Sum of the charges of all entries (pinned or not).
  virtual size_t TotalCharge() const = 0;
  virtual size_t Capacity() const = 0;
};

// An LRU cache of the given capacity in bytes, split into 2^num_shard_bits
// shards (-1 picks a count from the capacity).
Cache* NewLRUCache(size_t capacity, int num_shard_bits = -1);

}  // namespace shale

#endif  // SHALE_UTIL_CACHE_H_
