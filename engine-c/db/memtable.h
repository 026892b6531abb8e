// MemTable: the in-memory, sorted buffer of recent writes.
//
// Point entries (Put, Delete) live in one skiplist and range tombstones in
// another, both in one arena. An entry is stored inline in its skiplist
// node as
//
//   entry := varint32(internal_key_len) internal_key varint32(value_len) value
//
// (for a range tombstone the internal key is the begin key and the value the
// end key). When the memtable is full the DB makes it immutable and a
// background job writes it to an L0 SST.
//
// Thread safety: Add() needs external synchronization (one writer: the
// DB's write leader); everything else may be called by any thread at any
// time, concurrently with Add(). A MemTable is reference counted: it lives
// until the last Unref().

#ifndef SHALE_DB_MEMTABLE_H_
#define SHALE_DB_MEMTABLE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "db/dbformat.h"
#include "db/memtable_filter.h"
#include "db/range_tombstone.h"
#include "db/skiplist.h"
#include "util/arena.h"
#include "util/iterator.h"
#include "util/mutex.h"
#include "util/thread_annotations.h"

namespace shale {

class GetContext;

class MemTable {
 public:
  // The comparator must outlive the memtable. Starts with one reference.
  // id orders memtables (higher is newer); log_number is the WAL that
  // holds the memtable's first writes (the DB's bookkeeping).
  // write_buffer_size (0: default) sizes the arena's blocks at 1/8 of it,
  // so that memory use tracks the data closely even for small buffers.
  // versioned_key_prefix, if not null, gives the memtable a filter on the
  // unversioned part of the keys under it (a database opened with
  // split_version_suffix): MayHoldUnversioned.
  explicit MemTable(const InternalKeyComparator& cmp, uint64_t id = 0,
                    uint64_t log_number = 0, uint64_t write_buffer_size = 0,
                    const std::string* versioned_key_prefix = nullptr);
  MemTable(const MemTable&) = delete;
  MemTable& operator=(const MemTable&) = delete;

  void Ref() { refs_.fetch_add(1, std::memory_order_relaxed); }
  // Deletes the memtable when the last reference goes.
  void Unref() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  // Bytes of memory in use (the arena and the filter), a proxy for the size
  // of the data.
  size_t ApproximateMemoryUsage() const {
    return arena_.MemoryUsage() +
           (filter_ != nullptr ? filter_->ApproximateMemoryUsage() : 0);
  }

  // Bytes of the arena filled so far: what decides that the memtable is
  // full (RocksDB likewise lets the last arena block fill before it
  // flushes, rather than counting a fresh, empty block as used).
  // REQUIRES: the same external synchronization as Add().
  size_t ApproximateDataSize() const { return arena_.UsedBytes(); }

  // Adds an entry: a value (kTypeValue), a point tombstone (kTypeDeletion,
  // value ignored) or a range tombstone [key, value) (kTypeRangeDeletion).
  // REQUIRES: external synchronization; (key, seq) not already present.
  void Add(SequenceNumber seq, ValueType type, const Slice& key,
           const Slice& value);

  // Looks key up at ctx's read sequence. Folds this memtable's range
  // tombstones into ctx's covering-tombstone sequence, then finds the
  // newest visible point entry. Returns true when ctx is decided (found,
  // deleted, or failed) and older sources need not be consulted.
  bool Get(const LookupKey& key, GetContext* ctx) const;

  // The first point entry at or after key's internal key, whatever its
  // user key: false if there is none. ikey and value point into the
  // memtable (valid while the caller holds a reference).
  bool FirstAtOrAfter(const LookupKey& key, Slice* ikey, Slice* value) const;

  // False only if the memtable holds no point entry whose key, without its
  // version suffix, is unversioned (StripVersionSuffix under the
  // versioned_key_prefix the memtable was made with): a versioned read of
  // that key can pass the memtable over. Always true without a filter.
  // Sees every entry whose sequence a reader may read at (the DB publishes
  // a sequence after its entries are added).
  bool MayHoldUnversioned(const Slice& unversioned) const {
    return filter_ == nullptr || filter_->MayContain(unversioned);
  }

  // An iterator over the point entries; key() is the internal key. The
  // caller must keep a reference to the memtable while the iterator lives.
  Iterator* NewIterator() const;

  // An iterator over the range tombstones: key() is the internal begin key,
  // value() the end key. Same lifetime rule as NewIterator().
  Iterator* NewRangeTombstoneIterator() const;

  // The range tombstones cut into fragments, or nullptr when there are
  // none. Cached, and rebuilt only when tombstones were added since.
  std::shared_ptr<const FragmentedRangeTombstoneList> GetFragmentedTombstones()
      const;

  uint64_t num_entries() const {
    return num_entries_.load(std::memory_order_relaxed);
  }
  uint64_t num_deletes() const {
    return num_deletes_.load(std::memory_order_relaxed);
  }
  uint64_t num_range_deletes() const {
    return num_range_deletes_.load(std::memory_order_acquire);
  }
  bool empty() const { return num_entries() == 0; }

  // The smallest sequence number added (0 while empty).
  SequenceNumber first_sequence() const {
    return first_seq_.load(std::memory_order_relaxed);
  }

  uint64_t id() const { return id_; }
  uint64_t log_number() const { return log_number_; }

  // Compares two stored entries by their internal keys.
  struct KeyComparator {
    const InternalKeyComparator* cmp;
    int operator()(const char* a, const char* b) const;
  };

 private:
  using Table = InlineSkipList<KeyComparator>;
  class MemTableIterator;

  ~MemTable();  // only Unref() deletes

  const InternalKeyComparator& comparator_;
  const uint64_t id_;
  const uint64_t log_number_;
  std::atomic<int> refs_{1};
  Arena arena_;
  // The filter on unversioned keys and the prefix they are under; null
  // without versioned keys.
  const std::unique_ptr<MemTableFilter> filter_;
  const std::string versioned_key_prefix_;
  Table table_;
  Table range_del_table_;
  std::atomic<uint64_t> num_entries_{0};
  std::atomic<uint64_t> num_deletes_{0};
  // Release-stored after the tombstone is linked (see
  // GetFragmentedTombstones).
  std::atomic<uint64_t> num_range_deletes_{0};
  std::atomic<SequenceNumber> first_seq_{0};

  mutable Mutex fragments_mu_;
  mutable std::shared_ptr<const FragmentedRangeTombstoneList> fragments_
      GUARDED_BY(fragments_mu_);
  // num_range_deletes_ when fragments_ was built.
  mutable uint64_t fragments_count_ GUARDED_BY(fragments_mu_) = 0;
};

// Decodes a varint32 length prefix and returns the bytes after it.
// REQUIRES: p points at a well-formed prefix (memtable entries are).
inline Slice GetLengthPrefixedSliceUnchecked(const char* p) {
  uint32_t len;
  p = GetVarint32Ptr(p, p + 5, &len);
  return Slice(p, len);
}

}  // namespace shale

#endif  // SHALE_DB_MEMTABLE_H_
