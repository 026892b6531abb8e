// DBImpl: the read path - super versions, Get, MultiGet, iterators and
// snapshots.
//
// A read takes its sequence number first and then a reference to the
// current SuperVersion: every write at or below that sequence is then in
// the SuperVersion's memtables or files (a memtable leaves the
// SuperVersion only after its flushed file has joined the Version).

#include <algorithm>
#include <cassert>
#include <cstring>
#include <new>
#include <numeric>

#include "db/db_impl.h"
#include "db/db_impl_internal.h"
#include "db/db_iter.h"
#include "db/get_context.h"
#include "db/memtable.h"
#include "db/range_tombstone.h"
#include "db/version_set.h"
#include "table/merging_iterator.h"
#include "table/version_suffix_filter.h"

namespace shale {

SequenceNumber DBImpl::ReadSequence(const ReadOptions& options) const {
  return options.snapshot != nullptr ? options.snapshot->sequence()
                                     : LastSequence();
}

TableReadOptions DBImpl::ToTableReadOptions(const ReadOptions& options) const {
  TableReadOptions ro;
  ro.verify_checksums = options.verify_checksums || options_.paranoid_checks;
  ro.fill_cache = options.fill_cache;
  return ro;
}

void DBImpl::InstallSuperVersion() {
  mutex_.AssertHeld();
  SuperVersion* sv = new SuperVersion;
  sv->mem = mem_;
  sv->mem->Ref();
  for (auto it = imm_.rbegin(); it != imm_.rend(); ++it) {
    (*it)->Ref();
    sv->imm.push_back(*it);
  }
  sv->current = versions_->current();
  sv->current->Ref();
  sv->number = super_version_number_.load(std::memory_order_relaxed) + 1;
  SuperVersion* old = super_version_;
  super_version_ = sv;
  // A point read that finds the old one in its slot after this store sees
  // the numbers differ and takes the new one; those that took it before
  // read what was current when they took their sequence number.
  super_version_number_.store(sv->number, std::memory_order_seq_cst);
  ScrapeLocalSuperVersions();
  if (old != nullptr) ReleaseSuperVersionLocked(old);
}

namespace {

// A slot's value while its thread reads with the SuperVersion it held.
char super_version_in_use;
void* const kSuperVersionInUse = &super_version_in_use;

// Each thread's slots for the last few DBs it read, by DB id (ids are
// never reused, so an entry of a closed DB is never matched again).
struct LocalSlotCache {
  static constexpr int kEntries = 4;
  uint64_t ids[kEntries] = {};
  std::atomic<void*>* slots[kEntries] = {};
  unsigned next = 0;  // the entry to replace on a miss
};
thread_local LocalSlotCache local_slot_cache;

}  // namespace

std::atomic<void*>* DBImpl::LocalSuperVersionSlot() {
  LocalSlotCache& c = local_slot_cache;
  for (int i = 0; i < LocalSlotCache::kEntries; i++) {
    if (c.ids[i] == id_) return c.slots[i];
  }
  std::atomic<void*>* slot;
  {
    MutexLock l(&mutex_);
    auto& p = local_svs_[std::this_thread::get_id()];
    if (p == nullptr) p = std::make_unique<std::atomic<void*>>(nullptr);
    slot = p.get();
  }
  const unsigned i = c.next++ % LocalSlotCache::kEntries;
  c.ids[i] = id_;
  c.slots[i] = slot;
  return slot;
}

void DBImpl::ScrapeLocalSuperVersions() {
  mutex_.AssertHeld();
  for (auto& [tid, slot] : local_svs_) {
    void* p = slot->exchange(nullptr, std::memory_order_acq_rel);
    // A slot in use is left to its thread: its compare-and-swap back
    // fails on the null, and it drops the reference itself.
    if (p != nullptr && p != kSuperVersionInUse) {
      ReleaseSuperVersionLocked(static_cast<SuperVersion*>(p));
    }
  }
}

DBImpl::SuperVersion* DBImpl::GetLocalSuperVersion(std::atomic<void*>** slot) {
  std::atomic<void*>* s = LocalSuperVersionSlot();
  void* p = s->exchange(kSuperVersionInUse, std::memory_order_acquire);
  if (p == kSuperVersionInUse) {
    // A read inside a read of this thread (a callback that reads): the
    // slot is the outer read's.
    *slot = nullptr;
    return AcquireSuperVersion();
  }
  *slot = s;
  SuperVersion* sv = static_cast<SuperVersion*>(p);
  if (sv != nullptr &&
      sv->number == super_version_number_.load(std::memory_order_seq_cst)) {
    return sv;
  }
  // Empty or stale (replaced, and not yet scraped): the slot takes a
  // reference to the current one.
  MutexLock l(&mutex_);
  if (sv != nullptr) ReleaseSuperVersionLocked(sv);
  sv = super_version_;
  sv->refs.fetch_add(1, std::memory_order_relaxed);
  return sv;
}

void DBImpl::ReturnLocalSuperVersion(SuperVersion* sv,
                                     std::atomic<void*>* slot) {
  if (slot != nullptr) {
    void* expected = kSuperVersionInUse;
    if (slot->compare_exchange_strong(expected, sv, std::memory_order_release,
                                      std::memory_order_relaxed)) {
      return;
    }
    // Scraped while in use: sv was replaced, and the slot's reference is
    // dropped here.
  }
  ReleaseSuperVersion(sv);
}

DBImpl::SuperVersion* DBImpl::AcquireSuperVersion() {
  MutexLock l(&mutex_);
  SuperVersion* sv = super_version_;
  sv->refs.fetch_add(1, std::memory_order_relaxed);
  return sv;
}

void DBImpl::ReleaseSuperVersionLocked(SuperVersion* sv) {
  mutex_.AssertHeld();
  if (sv->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  sv->mem->Unref();
  for (MemTable* m : sv->imm) m->Unref();
  sv->current->Unref();  // Version refs need mutex_
  delete sv;
}

void DBImpl::ReleaseSuperVersion(SuperVersion* sv) {
  if (sv->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  // The last reference: undo the decrement under the mutex and release.
  sv->refs.store(1, std::memory_order_relaxed);
  MutexLock l(&mutex_);
  ReleaseSuperVersionLocked(sv);
}

Status DBImpl::GetFromSources(const ReadOptions& options, SuperVersion* sv,
                              const Slice& key, GetContext* ctx) {
  // The sequence goes into the lookup key; the newest visible version of
  // the key is then the first entry at or after it.
  LookupKey lkey(key, ctx->read_seq());
  if (sv->mem->Get(lkey, ctx)) return Status::OK();
  for (MemTable* m : sv->imm) {
    if (m->Get(lkey, ctx)) return Status::OK();
  }
  return sv->current->Get(ToTableReadOptions(options), lkey, ctx);
}

Status DBImpl::Get(const ReadOptions& options, const Slice& key, char* buf,
                   size_t cap, size_t* value_len) {
  const SequenceNumber seq = ReadSequence(options);
  std::atomic<void*>* slot;
  SuperVersion* sv = GetLocalSuperVersion(&slot);
  GetContext ctx(&icmp_, key, seq, nullptr, buf, cap);
  Status s = GetFromSources(options, sv, key, &ctx);
  ReturnLocalSuperVersion(sv, slot);
  *value_len = 0;
  if (!s.ok()) return s;
  switch (ctx.state()) {
    case GetContext::kFound:
      *value_len = ctx.value_size();
      if (!ctx.value_fits()) {
        return Status::BufferTooSmall(
            "get: the value of " + std::to_string(ctx.value_size()) +
            " bytes does not fit in a buffer of " + std::to_string(cap));
      }
      stats_.Record(kKeysRead);
      stats_.Record(kBytesRead, key.size() + ctx.value_size());
      return Status::OK();
    case GetContext::kCorrupt:
      return ctx.status();
    case GetContext::kNotFound:
    case GetContext::kDeleted:
      break;
  }
  return Status::NotFound(Slice());
}

Status DBImpl::Get(const ReadOptions& options, const Slice& key,
                   std::string* value) {
  const SequenceNumber seq = ReadSequence(options);
  std::atomic<void*>* slot;
  SuperVersion* sv = GetLocalSuperVersion(&slot);
  GetContext ctx(&icmp_, key, seq, value, nullptr, 0);
  Status s = GetFromSources(options, sv, key, &ctx);
  ReturnLocalSuperVersion(sv, slot);
  if (!s.ok()) return s;
  switch (ctx.state()) {
    case GetContext::kFound:
      stats_.Record(kKeysRead);
      stats_.Record(kBytesRead, key.size() + ctx.value_size());
      return Status::OK();
    case GetContext::kCorrupt:
      return ctx.status();
    case GetContext::kNotFound:
    case GetContext::kDeleted:
      break;
  }
  value->clear();
  return Status::NotFound(Slice());
}

namespace {

// The whole state of one key of a MultiGet: its lookup key, its GetContext
// and its place in Version::MultiGet. A batch keeps all of them in one
// allocation, so a key costs no heap allocation of its own.
struct MultiGetSlot {
  MultiGetSlot(const InternalKeyComparator* icmp, const Slice& key,
               SequenceNumber seq, std::string* value)
      : lookup(key, seq), ctx(icmp, key, seq, value, nullptr, 0) {
    mkey.lookup = &lookup;
    mkey.ctx = &ctx;
  }
  LookupKey lookup;
  GetContext ctx;
  MultiGetKey mkey;
};

// n MultiGetSlots, constructed in place and destroyed together.
class MultiGetSlots {
 public:
  explicit MultiGetSlots(size_t n)
      : slots_(static_cast<MultiGetSlot*>(
            ::operator new(n * sizeof(MultiGetSlot)))) {}
  MultiGetSlots(const MultiGetSlots&) = delete;
  MultiGetSlots& operator=(const MultiGetSlots&) = delete;
  ~MultiGetSlots() {
    for (size_t i = 0; i < constructed_; i++) slots_[i].~MultiGetSlot();
    ::operator delete(slots_);
  }

  // Constructs slot i; slots are constructed in index order.
  MultiGetSlot* Construct(size_t i, const InternalKeyComparator* icmp,
                          const Slice& key, SequenceNumber seq,
                          std::string* value) {
    assert(i == constructed_);
    MultiGetSlot* slot = new (&slots_[i]) MultiGetSlot(icmp, key, seq, value);
    constructed_++;
    return slot;
  }
  MultiGetSlot& operator[](size_t i) { return slots_[i]; }

 private:
  MultiGetSlot* slots_;
  size_t constructed_ = 0;
};

}  // namespace

void DBImpl::MultiGet(const ReadOptions& options, size_t n, const Slice* keys,
                      std::string* values, Status* statuses) {
  if (n == 0) return;
  const SequenceNumber seq = ReadSequence(options);

  // Keys in sorted order, so each file sees its keys in order. Sorting
  // comes before the SuperVersion is taken: it needs none.
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  if (icmp_.kind() == Comparator::Kind::kInternalBytewise) {
    // Bytewise user keys: compared inline, not by a call per comparison.
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return keys[a].compare(keys[b]) < 0; });
  } else {
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return icmp_.CompareUserKeys(keys[a], keys[b]) < 0;
    });
  }
  MultiGetSlots slots(n);
  for (size_t i = 0; i < n; i++) {
    slots.Construct(i, &icmp_, keys[i], seq, &values[i]);
  }
  std::vector<MultiGetKey*> pending;
  pending.reserve(n);

  // One SuperVersion (memtables and Version) for the whole batch.
  std::atomic<void*>* slot;
  SuperVersion* sv = GetLocalSuperVersion(&slot);
  for (size_t j = 0; j < n; j++) {
    MultiGetSlot& slot = slots[order[j]];
    bool done = sv->mem->Get(slot.lookup, &slot.ctx);
    for (size_t m = 0; !done && m < sv->imm.size(); m++) {
      done = sv->imm[m]->Get(slot.lookup, &slot.ctx);
    }
    slot.mkey.done = done;
    if (!done) pending.push_back(&slot.mkey);
  }
  if (!pending.empty()) {
    sv->current->MultiGet(ToTableReadOptions(options), &pending);
  }
  ReturnLocalSuperVersion(sv, slot);

  uint64_t found = 0, bytes = 0;
  for (size_t i = 0; i < n; i++) {
    const GetContext& ctx = slots[i].ctx;
    const MultiGetKey& mkey = slots[i].mkey;
    if (!mkey.status.ok()) {
      statuses[i] = mkey.status;
      values[i].clear();
      continue;
    }
    switch (ctx.state()) {
      case GetContext::kFound:
        statuses[i] = Status::OK();
        found++;
        bytes += keys[i].size() + ctx.value_size();
        break;
      case GetContext::kCorrupt:
        statuses[i] = ctx.status();
        values[i].clear();
        break;
      case GetContext::kNotFound:
      case GetContext::kDeleted:
        statuses[i] = Status::NotFound(Slice());
        values[i].clear();
        break;
    }
  }
  stats_.Record(kKeysRead, found);
  stats_.Record(kBytesRead, bytes);
}

void DBImpl::SeekPrefix(const ReadOptions& options, size_t n,
                        const Slice* targets, Status* statuses, void* arg,
                        SeekPrefixCallback callback) {
  if (!options_.split_version_suffix) {
    for (size_t i = 0; i < n; i++) {
      statuses[i] = Status::NotSupported(
          "seek_prefix: the database was not opened with "
          "split_version_suffix");
    }
    return;
  }
  const SequenceNumber seq = ReadSequence(options);
  std::atomic<void*>* slot;
  SuperVersion* sv = GetLocalSuperVersion(&slot);
  const TableReadOptions tro = ToTableReadOptions(options);
  const Slice vprefix(options_.versioned_key_prefix);
  // The upper bound of a read is built here: on the stack for the usual
  // key (a read per put: no allocation).
  char upper_short[64];
  std::string upper_long;
  for (size_t i = 0; i < n; i++) {
    const Slice& target = targets[i];
    const Slice prefix = StripVersionSuffix(target, vprefix);
    if (prefix.size() == target.size()) {
      statuses[i] = Status::InvalidArgument(
          "seek_prefix: not a versioned key (no version suffix under the "
          "versioned key prefix)",
          EscapeKey(target));
      continue;
    }
    // Every key whose unversioned part is prefix starts with prefix, so
    // none is at or above prefix's successor: the end of the read.
    size_t len = prefix.size();
    while (len > 0 && static_cast<uint8_t>(prefix[len - 1]) == 0xff) len--;
    char* upper = upper_short;
    if (len > sizeof(upper_short)) {
      upper_long.resize(len);
      upper = upper_long.data();
    }
    if (len > 0) {
      memcpy(upper, prefix.data(), len);
      upper[len - 1] =
          static_cast<char>(static_cast<uint8_t>(upper[len - 1]) + 1);
    }
    const Slice upper_slice(upper, len);
    statuses[i] =
        SeekPrefixOne(sv, seq, tro, target, prefix,
                      len == 0 ? nullptr : &upper_slice, arg, i, callback);
  }
  ReturnLocalSuperVersion(sv, slot);
}

namespace {

// The state of SeekPrefixPoint: the smallest user key offered so far in
// [target, upper) and, among the sources that offered it, its newest
// entry. Each source holds a key's versions from the lookup key on in
// order, so a source whose first entry is past that key holds nothing of
// it, and the answer is that key's newest entry over the sources.
class PrefixPointSearch {
 public:
  PrefixPointSearch(const InternalKeyComparator* icmp, const Slice& vprefix,
                    const Slice& prefix, const Slice* upper, SequenceNumber seq)
      : icmp_(icmp),
        vprefix_(vprefix),
        prefix_(prefix),
        upper_(upper),
        seq_(seq) {}

  static void OfferFromTable(void* arg, size_t, const Slice& ikey,
                             const Slice& value) {
    // A table's block may leave the cache after the call: copy.
    static_cast<PrefixPointSearch*>(arg)->Offer(ikey, value, /*copy=*/true);
  }

  // Offers a source's first entry at or after the lookup key; copy says
  // whether its slices must be copied to outlive the call (a memtable's
  // entries live as long as the read's reference to it).
  void Offer(const Slice& ikey, const Slice& value, bool copy) {
    if (undecided_) return;
    ParsedInternalKey p;
    if (!ParseInternalKey(ikey, &p)) {
      undecided_ = true;  // the iterator reports the corruption
      return;
    }
    if (upper_ != nullptr && icmp_->CompareUserKeys(p.user_key, *upper_) >= 0) {
      return;  // the source holds nothing of the prefix at or after target
    }
    // Another unversioned part sorting among the prefix's versions, or a
    // newer entry than the read's (the iterator skips it and reads on).
    if (p.sequence > seq_ ||
        StripVersionSuffix(p.user_key, vprefix_) != prefix_) {
      undecided_ = true;
      return;
    }
    if (found_) {
      const int c = icmp_->CompareUserKeys(p.user_key, user_key());
      if (c > 0 || (c == 0 && p.sequence < seq_found_)) return;
    }
    found_ = true;
    seq_found_ = p.sequence;
    type_ = p.type;
    if (copy) {
      entry_.assign(p.user_key.data(), p.user_key.size());
      entry_.append(value.data(), value.size());
      user_key_ = Slice(entry_.data(), p.user_key.size());
      value_ = Slice(entry_.data() + p.user_key.size(), value.size());
    } else {
      user_key_ = p.user_key;
      value_ = value;
    }
  }

  bool undecided() const { return undecided_; }
  bool found() const { return found_; }
  SequenceNumber sequence() const { return seq_found_; }
  ValueType type() const { return type_; }
  const Slice& user_key() const { return user_key_; }
  const Slice& value() const { return value_; }

 private:
  const InternalKeyComparator* const icmp_;
  const Slice vprefix_;
  const Slice prefix_;
  const Slice* const upper_;
  const SequenceNumber seq_;
  bool undecided_ = false;
  bool found_ = false;
  SequenceNumber seq_found_ = 0;
  ValueType type_ = kTypeValue;
  Slice user_key_, value_;  // the entry found: a memtable's, or entry_'s
  std::string entry_;       // a table entry's user key, then its value
};

}  // namespace

bool DBImpl::SeekPrefixPoint(SuperVersion* sv, SequenceNumber seq,
                             const TableReadOptions& tro, const Slice& target,
                             const Slice& prefix, const Slice* upper, void* arg,
                             size_t i, SeekPrefixCallback callback,
                             Status* status) {
  const LookupKey lookup(target, seq);
  PrefixPointSearch search(&icmp_, Slice(options_.versioned_key_prefix), prefix,
                           upper, seq);
  RangeDelAggregator range_del(&icmp_, seq);
  Slice ikey, value;
  // A memtable whose filter has no version of the key is passed over: most
  // puts write new keys, and each reads its key's newest version first
  // (docs/put-cost.md).
  auto offer = [&](const MemTable* m) {
    if (m->MayHoldUnversioned(prefix) &&
        m->FirstAtOrAfter(lookup, &ikey, &value)) {
      search.Offer(ikey, value, /*copy=*/false);
    }
  };
  offer(sv->mem);
  for (const MemTable* m : sv->imm) offer(m);
  if (search.undecided()) return false;
  Status s = sv->current->PrefixFirstEntries(tro, lookup, upper, &search,
                                             &PrefixPointSearch::OfferFromTable,
                                             &range_del);
  if (!s.ok() || search.undecided()) return false;
  if (!search.found()) {
    *status = Status::NotFound(Slice());
    return true;
  }
  // A deleted newest entry, or one under a range tombstone, leaves the
  // read to the iterator, which passes on to the next version. Tombstones
  // only hide entries, so the memtables' are gathered only now, with an
  // entry to judge (the tables' came with their entries).
  if (search.type() != kTypeValue) return false;
  if (sv->mem->num_range_deletes() > 0) {
    range_del.AddTombstones(sv->mem->GetFragmentedTombstones());
  }
  for (const MemTable* m : sv->imm) {
    if (m->num_range_deletes() > 0) {
      range_del.AddTombstones(m->GetFragmentedTombstones());
    }
  }
  if (range_del.MaxCoveringSeq(search.user_key()) > search.sequence()) {
    return false;
  }
  const Slice k = search.user_key();
  const Slice v = search.value();
  (*callback)(arg, i, k, v);
  stats_.Record(kKeysRead);
  stats_.Record(kBytesRead, k.size() + v.size());
  *status = Status::OK();
  return true;
}

Status DBImpl::SeekPrefixOne(SuperVersion* sv, SequenceNumber seq,
                             const TableReadOptions& tro, const Slice& target,
                             const Slice& prefix, const Slice* upper, void* arg,
                             size_t i, SeekPrefixCallback callback) {
  Status point;
  if (SeekPrefixPoint(sv, seq, tro, target, prefix, upper, arg, i, callback,
                      &point)) {
    return point;
  }
  std::vector<Iterator*> children;
  auto range_del = std::make_unique<RangeDelAggregator>(&icmp_, seq);
  children.push_back(sv->mem->NewIterator());
  range_del->AddTombstones(sv->mem->GetFragmentedTombstones());
  for (MemTable* m : sv->imm) {
    children.push_back(m->NewIterator());
    range_del->AddTombstones(m->GetFragmentedTombstones());
  }
  Status s = sv->current->AddPrefixIterators(tro, target, upper, &children,
                                             range_del.get());
  if (!s.ok()) children.push_back(NewErrorIterator(s));
  Iterator* internal = NewMergingIterator(&icmp_, children.data(),
                                          static_cast<int>(children.size()));
  DBIter iter(&icmp_, internal, std::move(range_del), seq, nullptr, upper);
  const Slice vprefix(options_.versioned_key_prefix);
  for (iter.Seek(target); iter.Valid(); iter.Next()) {
    const Slice k = iter.key();
    if (StripVersionSuffix(k, vprefix) != prefix) continue;
    const Slice v = iter.value();
    (*callback)(arg, i, k, v);
    stats_.Record(kKeysRead);
    stats_.Record(kBytesRead, k.size() + v.size());
    return Status::OK();
  }
  s = iter.status();
  return s.ok() ? Status::NotFound(Slice()) : s;
}

DBIter* DBImpl::NewIterator(const ReadOptions& options, const Slice* lower,
                            const Slice* upper) {
  const SequenceNumber seq = ReadSequence(options);
  SuperVersion* sv = AcquireSuperVersion();
  std::vector<Iterator*> children;
  auto range_del = std::make_unique<RangeDelAggregator>(&icmp_, seq);
  children.push_back(sv->mem->NewIterator());
  range_del->AddTombstones(sv->mem->GetFragmentedTombstones());
  for (MemTable* m : sv->imm) {
    children.push_back(m->NewIterator());
    range_del->AddTombstones(m->GetFragmentedTombstones());
  }
  Status s = sv->current->AddIterators(ToTableReadOptions(options), lower,
                                       upper, &children, range_del.get());
  if (!s.ok()) children.push_back(NewErrorIterator(s));
  Iterator* internal = NewMergingIterator(&icmp_, children.data(),
                                          static_cast<int>(children.size()));
  DBIter* iter =
      new DBIter(&icmp_, internal, std::move(range_del), seq, lower, upper);
  live_iterators_.fetch_add(1, std::memory_order_relaxed);
  iter->RegisterCleanup(&DBImpl::CleanupIterator, this, sv);
  return iter;
}

void DBImpl::CleanupIterator(void* db, void* sv) {
  DBImpl* self = static_cast<DBImpl*>(db);
  self->ReleaseSuperVersion(static_cast<SuperVersion*>(sv));
  self->live_iterators_.fetch_sub(1, std::memory_order_release);
}

const Snapshot* DBImpl::GetSnapshot() {
  MutexLock l(&mutex_);
  return snapshots_.New(LastSequence());
}

void DBImpl::ReleaseSnapshot(const Snapshot* snapshot) {
  MutexLock l(&mutex_);
  snapshots_.Delete(snapshot);
}

Status DBImpl::ApproximateSize(const Slice& begin, const Slice* end,
                               uint64_t* bytes, uint64_t* keys) {
  *bytes = 0;
  *keys = 0;
  if (end != nullptr && icmp_.CompareUserKeys(begin, *end) >= 0) {
    return Status::OK();
  }
  SuperVersion* sv = AcquireSuperVersion();
  sv->current->ApproximateSize(begin, end, bytes, keys);
  ReleaseSuperVersion(sv);
  return Status::OK();
}

}  // namespace shale
