#include "db/memtable.h"

#include "db/get_context.h"
#include "db/options.h"
#include "table/version_suffix_filter.h"
#include "util/coding.h"

namespace shale {

namespace {

// Reads the internal key at the front of a stored entry.
inline Slice EntryKey(const char* entry) {
  return GetLengthPrefixedSliceUnchecked(entry);
}

// Reads the value after the internal key of a stored entry.
inline Slice EntryValue(const Slice& key) {
  return GetLengthPrefixedSliceUnchecked(key.data() + key.size());
}

}  // namespace

int MemTable::KeyComparator::operator()(const char* a, const char* b) const {
  return cmp->Compare(EntryKey(a), EntryKey(b));
}

namespace {

size_t ArenaBlockSize(uint64_t write_buffer_size) {
  if (write_buffer_size == 0) return 256 << 10;
  uint64_t block = write_buffer_size / 8;
  if (block > (1 << 20)) block = 1 << 20;
  return static_cast<size_t>((block + 4095) / 4096 * 4096);
}

// The filter's share of the write buffer: 1/64 (1 MiB of a 64 MiB
// memtable), about 8 bits a key at the smallest entries a memtable of
// versions holds (a version key and a small value, with the skiplist node),
// more at larger ones. RocksDB suggests a ratio of 1/50 to 1/10 for its
// memtable prefix Bloom filter.
std::unique_ptr<MemTableFilter> NewFilter(
    uint64_t write_buffer_size, const std::string* versioned_key_prefix) {
  if (versioned_key_prefix == nullptr) return nullptr;
  if (write_buffer_size == 0) write_buffer_size = Options().write_buffer_size;
  return std::make_unique<MemTableFilter>(
      static_cast<size_t>(write_buffer_size / 64));
}

}  // namespace

MemTable::MemTable(const InternalKeyComparator& cmp, uint64_t id,
                   uint64_t log_number, uint64_t write_buffer_size,
                   const std::string* versioned_key_prefix)
    : comparator_(cmp),
      id_(id),
      log_number_(log_number),
      arena_(ArenaBlockSize(write_buffer_size)),
      filter_(NewFilter(write_buffer_size, versioned_key_prefix)),
      versioned_key_prefix_(
          versioned_key_prefix != nullptr ? *versioned_key_prefix : ""),
      table_(KeyComparator{&comparator_}, &arena_),
      range_del_table_(KeyComparator{&comparator_}, &arena_) {}

MemTable::~MemTable() { assert(refs_.load() == 0); }

void MemTable::Add(SequenceNumber seq, ValueType type, const Slice& key,
                   const Slice& value) {
  const size_t key_size = key.size();
  const size_t val_size = type == kTypeDeletion ? 0 : value.size();
  const size_t internal_key_size = key_size + 8;
  const size_t encoded_len = VarintLength(internal_key_size) +
                             internal_key_size + VarintLength(val_size) +
                             val_size;
  Table* table = type == kTypeRangeDeletion ? &range_del_table_ : &table_;
  char* buf = table->AllocateKey(encoded_len);
  char* p = EncodeVarint32(buf, static_cast<uint32_t>(internal_key_size));
  if (key_size > 0) memcpy(p, key.data(), key_size);
  p += key_size;
  EncodeFixed64(p, PackSequenceAndType(seq, type));
  p += 8;
  p = EncodeVarint32(p, static_cast<uint32_t>(val_size));
  if (val_size > 0) memcpy(p, value.data(), val_size);
  assert(p + val_size == buf + encoded_len);
  // Into the filter before the entry is linked (MayHoldUnversioned).
  if (filter_ != nullptr && type != kTypeRangeDeletion &&
      key.starts_with(versioned_key_prefix_)) {
    filter_->Add(StripVersionSuffix(key, versioned_key_prefix_));
  }
  table->Insert(buf);

  if (first_seq_.load(std::memory_order_relaxed) == 0) {
    first_seq_.store(seq, std::memory_order_relaxed);
  }
  num_entries_.store(num_entries_.load(std::memory_order_relaxed) + 1,
                     std::memory_order_relaxed);
  if (type == kTypeDeletion) {
    num_deletes_.store(num_deletes_.load(std::memory_order_relaxed) + 1,
                       std::memory_order_relaxed);
  } else if (type == kTypeRangeDeletion) {
    // Release: a reader that sees the new count also sees the tombstone
    // linked into range_del_table_.
    num_range_deletes_.store(
        num_range_deletes_.load(std::memory_order_relaxed) + 1,
        std::memory_order_release);
  }
}

bool MemTable::Get(const LookupKey& key, GetContext* ctx) const {
  if (num_range_deletes() > 0) {
    std::shared_ptr<const FragmentedRangeTombstoneList> tombstones =
        GetFragmentedTombstones();
    if (tombstones != nullptr) {
      ctx->AddCoveringTombstone(
          tombstones->MaxCoveringSeq(key.user_key(), ctx->read_seq()));
    }
  }
  Table::Iterator iter(&table_);
  iter.Seek(key.memtable_key().data());
  if (iter.Valid()) {
    const Slice ikey = EntryKey(iter.key());
    ParsedInternalKey parsed;
    if (!ParseInternalKey(ikey, &parsed)) {
      ctx->MarkCorrupt(Status::Corruption("memtable holds a malformed key",
                                          EscapeKey(ikey)));
      return true;
    }
    if (ctx->SaveValue(parsed, EntryValue(ikey))) return true;
  }
  return ctx->DecidedByTombstone();
}

bool MemTable::FirstAtOrAfter(const LookupKey& key, Slice* ikey,
                              Slice* value) const {
  Table::Iterator iter(&table_);
  iter.Seek(key.memtable_key().data());
  if (!iter.Valid()) return false;
  *ikey = EntryKey(iter.key());
  *value = EntryValue(*ikey);
  return true;
}

// Iterates one of the memtable's skiplists. key() is the internal key.
class MemTable::MemTableIterator final : public Iterator {
 public:
  explicit MemTableIterator(const Table* table) : iter_(table) {}

  bool Valid() const override { return iter_.Valid(); }
  void Seek(const Slice& k) override { iter_.Seek(EncodeSeekKey(k)); }
  void SeekToFirst() override { iter_.SeekToFirst(); }
  void SeekToLast() override { iter_.SeekToLast(); }
  void Next() override { iter_.Next(); }
  void Prev() override { iter_.Prev(); }
  Slice key() const override { return EntryKey(iter_.key()); }
  Slice value() const override { return EntryValue(key()); }
  Status status() const override { return Status::OK(); }

 private:
  // Seek takes an internal key; the skiplist compares stored entries,
  // whose keys are length-prefixed.
  const char* EncodeSeekKey(const Slice& target) {
    scratch_.clear();
    PutVarint32(&scratch_, static_cast<uint32_t>(target.size()));
    scratch_.append(target.data(), target.size());
    return scratch_.data();
  }

  Table::Iterator iter_;
  std::string scratch_;
};

Iterator* MemTable::NewIterator() const {
  return new MemTableIterator(&table_);
}

Iterator* MemTable::NewRangeTombstoneIterator() const {
  return new MemTableIterator(&range_del_table_);
}

std::shared_ptr<const FragmentedRangeTombstoneList>
MemTable::GetFragmentedTombstones() const {
  // Read the count first: everything it counts is linked (see Add), and a
  // tombstone added while the list is built makes the count stale, which
  // only causes a rebuild next time.
  const uint64_t count = num_range_deletes();
  if (count == 0) return nullptr;
  MutexLock l(&fragments_mu_);
  if (fragments_ == nullptr || fragments_count_ != count) {
    std::unique_ptr<Iterator> iter(NewRangeTombstoneIterator());
    Status s;
    auto list = std::make_shared<const FragmentedRangeTombstoneList>(
        iter.get(), comparator_, &s);
    // The memtable's own keys are well formed, so s is OK.
    assert(s.ok());
    fragments_ = std::move(list);
    fragments_count_ = count;
  }
  return fragments_;
}

}  // namespace shale
