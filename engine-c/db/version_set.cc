#include "db/version_set.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <memory>

#include "db/filename.h"
#include "db/get_context.h"
#include "db/range_tombstone.h"
#include "db/table_cache.h"
#include "log/log_reader.h"
#include "table/two_level_iterator.h"
#include "util/coding.h"
#include "util/env.h"

namespace shale {

namespace {

// A new MANIFEST (holding just a snapshot of the file set) is started once
// the current one passes this size, so recovery never replays long logs.
constexpr uint64_t kMaxManifestSize = 16 << 20;

// icmp.CompareUserKeys, inline for bytewise user keys (the point reads
// compare each key with the bounds of every L0 file).
inline int CompareUser(const InternalKeyComparator& icmp, const Slice& a,
                       const Slice& b) {
  return icmp.kind() == Comparator::Kind::kInternalBytewise
             ? a.compare(b)
             : icmp.CompareUserKeys(a, b);
}

bool AfterFile(const InternalKeyComparator& icmp, const Slice* user_key,
               const FileMetaData* f) {
  // nullptr user_key occurs before all keys.
  return user_key != nullptr &&
         icmp.CompareUserKeys(*user_key, f->largest.user_key()) > 0;
}

bool BeforeFile(const InternalKeyComparator& icmp, const Slice* user_key,
                const FileMetaData* f) {
  // nullptr user_key occurs after all keys.
  return user_key != nullptr &&
         icmp.CompareUserKeys(*user_key, f->smallest.user_key()) < 0;
}

// L0 is searched newest first.
bool NewestFirst(const FileMetaData* a, const FileMetaData* b) {
  if (a->largest_seqno != b->largest_seqno) {
    return a->largest_seqno > b->largest_seqno;
  }
  return a->number > b->number;
}

// An index over a level's files: key() is a file's largest key and value()
// the FileMetaData pointer, for the two-level iterator of a level.
class LevelFileIterator final : public Iterator {
 public:
  LevelFileIterator(const InternalKeyComparator* icmp,
                    const std::vector<FileMetaData*>* files)
      : icmp_(icmp), files_(files), index_(files->size()) {}

  bool Valid() const override { return index_ < files_->size(); }
  void Seek(const Slice& target) override {
    index_ = FindFile(*icmp_, *files_, target);
  }
  void SeekToFirst() override { index_ = 0; }
  void SeekToLast() override {
    index_ = files_->empty() ? 0 : files_->size() - 1;
  }
  void Next() override { index_++; }
  void Prev() override {
    index_ = index_ == 0 ? files_->size() : index_ - 1;  // size(): invalid
  }
  Slice key() const override { return (*files_)[index_]->largest.Encode(); }
  Slice value() const override {
    EncodeFixed64(value_buf_, reinterpret_cast<uintptr_t>((*files_)[index_]));
    return Slice(value_buf_, sizeof(value_buf_));
  }
  Status status() const override { return Status::OK(); }

 private:
  const InternalKeyComparator* const icmp_;
  const std::vector<FileMetaData*>* const files_;
  size_t index_;
  mutable char value_buf_[8];
};

Iterator* OpenFileIterator(void* arg, const TableReadOptions& options,
                           const Slice& file_value) {
  auto* f = reinterpret_cast<FileMetaData*>(
      static_cast<uintptr_t>(DecodeFixed64(file_value.data())));
  return static_cast<TableCache*>(arg)->NewIterator(options, f);
}

// Receives Table::Get's entry for a point lookup.
struct Saver {
  GetContext* ctx;
  bool decided = false;
};

void SaveEntry(void* arg, size_t index, const Slice& found_key,
               const Slice& found_value) {
  Saver* s = static_cast<Saver*>(arg) + index;
  ParsedInternalKey parsed;
  if (!ParseInternalKey(found_key, &parsed)) {
    s->ctx->MarkCorrupt(
        Status::Corruption("SST holds a malformed key", EscapeKey(found_key)));
    s->decided = true;
    return;
  }
  s->decided = s->ctx->SaveValue(parsed, found_value);
}

}  // namespace

size_t FindFile(const InternalKeyComparator& icmp,
                const std::vector<FileMetaData*>& files, const Slice& key) {
  size_t left = 0, right = files.size();
  while (left < right) {
    const size_t mid = (left + right) / 2;
    if (CompareInline(&icmp, files[mid]->largest.Encode(), key) < 0) {
      left = mid + 1;  // everything at or before mid is < key
    } else {
      right = mid;
    }
  }
  return right;
}

Iterator* NewConcatenatingIterator(const InternalKeyComparator* icmp,
                                   const std::vector<FileMetaData*>* files,
                                   TableCache* table_cache,
                                   const TableReadOptions& options) {
  return NewTwoLevelIterator(new LevelFileIterator(icmp, files),
                             &OpenFileIterator, table_cache, options);
}

// ---------------------------------------------------------------- Version

Version::~Version() {
  assert(refs_ == 0);
  prev_->next_ = next_;
  next_->prev_ = prev_;
  for (auto& level_files : files_) {
    for (FileMetaData* f : level_files) {
      assert(f->refs > 0);
      if (--f->refs <= 0) {
        vset_->table_cache_->Unpin(f);
        delete f;
      }
    }
  }
}

void Version::Ref() { ++refs_; }

void Version::Unref() {
  assert(this != &vset_->dummy_versions_);
  assert(refs_ >= 1);
  if (--refs_ == 0) delete this;
}

int Version::num_levels() const { return vset_->options_->num_levels; }

uint64_t Version::NumLevelBytes(int level) const {
  uint64_t sum = 0;
  for (const FileMetaData* f : files_[level]) sum += f->file_size;
  return sum;
}

bool Version::GetFromFile(const TableReadOptions& options, FileMetaData* f,
                          const LookupKey& key, FilterProbe* probe,
                          GetContext* ctx, Status* s) {
  TableCache* tc = vset_->table_cache_;
  if (f->num_range_deletions > 0) {
    std::shared_ptr<const FragmentedRangeTombstoneList> tombstones;
    *s = tc->GetRangeTombstones(f, &tombstones);
    if (!s->ok()) return true;
    if (tombstones != nullptr) {
      ctx->AddCoveringTombstone(
          tombstones->MaxCoveringSeq(key.user_key(), ctx->read_seq()));
    }
  }
  Saver saver{ctx};
  // A pinned table is read straight, without the table cache, and its
  // filter is tested here: most tables a read visits are passed over on
  // that alone.
  if (const Table* t = f->pinned_table.load(std::memory_order_acquire)) {
    switch (t->TestFilter(key.internal_key(), probe)) {
      case Table::FilterAnswer::kNo:
        return ctx->DecidedByTombstone();
      case Table::FilterAnswer::kMaybe:
        *s = t->GetPastFilter(options, key.internal_key(), &saver, &SaveEntry);
        break;
      case Table::FilterAnswer::kNotTested:
        *s = t->Get(options, key.internal_key(), &saver, &SaveEntry, probe);
        break;
    }
  } else {
    *s = tc->Get(options, f, key.internal_key(), &saver, &SaveEntry, probe);
  }
  if (!s->ok() || saver.decided) return true;
  return ctx->DecidedByTombstone();
}

Status Version::Get(const TableReadOptions& options, const LookupKey& key,
                    GetContext* ctx) {
  const InternalKeyComparator& icmp = *vset_->icmp_;
  const Slice user_key = key.user_key();
  const Slice ikey = key.internal_key();
  Status s;
  FilterProbe probe;  // the key is hashed for the first filter only
  // L0: every file that may hold the key, newest first.
  for (FileMetaData* f : files_[0]) {
    if (CompareUser(icmp, user_key, f->smallest.user_key()) < 0 ||
        CompareUser(icmp, user_key, f->largest.user_key()) > 0) {
      continue;
    }
    if (GetFromFile(options, f, key, &probe, ctx, &s)) return s;
  }
  // Below: at most one file per level.
  const int levels = num_levels();
  for (int level = 1; level < levels; level++) {
    const std::vector<FileMetaData*>& files = files_[level];
    if (files.empty()) continue;
    const size_t i = FindFile(icmp, files, ikey);
    if (i == files.size()) continue;
    FileMetaData* f = files[i];
    if (CompareUser(icmp, user_key, f->smallest.user_key()) < 0) continue;
    if (GetFromFile(options, f, key, &probe, ctx, &s)) return s;
  }
  return s;
}

void Version::MultiGet(const TableReadOptions& options,
                       std::vector<MultiGetKey*>* keys) {
  const InternalKeyComparator& icmp = *vset_->icmp_;
  TableCache* tc = vset_->table_cache_;
  // The keys still undecided, in order: *keys, compacted in place after
  // each L0 file and each level, so no level walks keys already answered.
  MultiGetKey** pending = keys->data();
  size_t num_pending = keys->size();
  auto compact_pending = [&] {
    size_t kept = 0;
    for (size_t i = 0; i < num_pending; i++) {
      if (!pending[i]->done) pending[kept++] = pending[i];
    }
    num_pending = kept;
  };

  // Scratch for one file's keys, on the stack for the usual batch.
  constexpr size_t kInline = 64;
  Slice ikeys_inline[kInline];
  FilterProbe* probes_inline[kInline];
  bool may_match_inline[kInline];
  std::unique_ptr<Slice[]> ikeys_heap;
  std::unique_ptr<FilterProbe*[]> probes_heap;
  std::unique_ptr<bool[]> may_match_heap;
  Slice* ikeys = ikeys_inline;
  FilterProbe** probes = probes_inline;
  bool* may_match = may_match_inline;
  if (num_pending > kInline) {
    ikeys_heap.reset(new Slice[num_pending]);
    probes_heap.reset(new FilterProbe*[num_pending]);
    may_match_heap.reset(new bool[num_pending]);
    ikeys = ikeys_heap.get();
    probes = probes_heap.get();
    may_match = may_match_heap.get();
  }
  std::vector<Saver> savers;
  std::vector<Status> statuses;

  // Looks batch[0, n) (sorted, undecided keys that f may hold) up in f.
  // A single key goes the way of a Get (GetFromFile): random keys spread
  // over a level's files, so most files see one key of a batch.
  auto probe = [&](FileMetaData* f, MultiGetKey** batch, size_t n) {
    if (n == 1) {
      MultiGetKey* k = batch[0];
      Status s;
      if (GetFromFile(options, f, *k->lookup, &k->probe, k->ctx, &s)) {
        k->status = s;
        k->done = true;
      }
      return;
    }
    if (f->num_range_deletions > 0) {
      std::shared_ptr<const FragmentedRangeTombstoneList> tombstones;
      Status s = tc->GetRangeTombstones(f, &tombstones);
      if (!s.ok()) {
        for (size_t i = 0; i < n; i++) {
          batch[i]->status = s;
          batch[i]->done = true;
        }
        return;
      }
      if (tombstones != nullptr) {
        for (size_t i = 0; i < n; i++) {
          MultiGetKey* k = batch[i];
          k->ctx->AddCoveringTombstone(tombstones->MaxCoveringSeq(
              k->lookup->user_key(), k->ctx->read_seq()));
        }
      }
    }
    for (size_t i = 0; i < n; i++) {
      ikeys[i] = batch[i]->lookup->internal_key();
      probes[i] = &batch[i]->probe;
    }
    // A pinned table is read straight, without the table cache, and its
    // filter is tested here first: a key it rules out costs no more than
    // the test. The keys that pass are moved to the front of batch.
    const Table* t = f->pinned_table.load(std::memory_order_acquire);
    bool filter_tested = false;
    if (t != nullptr && t->TestFilters(n, ikeys, probes, may_match)) {
      filter_tested = true;
      size_t kept = 0;
      for (size_t i = 0; i < n; i++) {
        MultiGetKey* k = batch[i];
        if (!may_match[i]) {
          if (k->ctx->DecidedByTombstone()) k->done = true;
          continue;
        }
        batch[kept] = k;
        ikeys[kept] = ikeys[i];
        probes[kept] = probes[i];
        kept++;
      }
      n = kept;
      if (n == 0) return;
      if (n == 1) {
        MultiGetKey* k = batch[0];
        Saver saver{k->ctx};
        Status s = t->GetPastFilter(options, ikeys[0], &saver, &SaveEntry);
        if (!s.ok()) {
          k->status = s;
          k->done = true;
        } else if (saver.decided || k->ctx->DecidedByTombstone()) {
          k->done = true;
        }
        return;
      }
    }
    savers.clear();
    statuses.resize(n);
    for (size_t i = 0; i < n; i++) savers.push_back(Saver{batch[i]->ctx});
    if (t != nullptr) {
      t->MultiGet(options, n, ikeys, savers.data(), &SaveEntry, statuses.data(),
                  probes, filter_tested);
    } else {
      tc->MultiGet(options, f, n, ikeys, savers.data(), &SaveEntry,
                   statuses.data(), probes);
    }
    for (size_t i = 0; i < n; i++) {
      MultiGetKey* k = batch[i];
      if (!statuses[i].ok()) {
        k->status = statuses[i];
        k->done = true;
      } else if (savers[i].decided || k->ctx->DecidedByTombstone()) {
        k->done = true;
      }
    }
  };

  // L0: each file's keys are a run of pending (files overlap, so each is
  // looked up on its own). batch gathers them; probe may reorder it.
  std::unique_ptr<MultiGetKey*[]> batch_heap;
  MultiGetKey* batch_inline[kInline];
  MultiGetKey** batch = batch_inline;
  if (num_pending > kInline) {
    batch_heap.reset(new MultiGetKey*[num_pending]);
    batch = batch_heap.get();
  }
  for (FileMetaData* f : files_[0]) {
    if (num_pending == 0) return;
    size_t n = 0;
    for (size_t i = 0; i < num_pending; i++) {
      MultiGetKey* k = pending[i];
      const Slice uk = k->lookup->user_key();
      if (CompareUser(icmp, uk, f->smallest.user_key()) >= 0 &&
          CompareUser(icmp, uk, f->largest.user_key()) <= 0) {
        batch[n++] = k;
      }
    }
    if (n > 0) {
      probe(f, batch, n);
      compact_pending();
    }
  }
  const int levels = num_levels();
  for (int level = 1; level < levels && num_pending > 0; level++) {
    const std::vector<FileMetaData*>& files = files_[level];
    if (files.empty()) continue;
    // Keys are sorted, so the files they land in are too: runs of pending
    // keys that land in one file go to it together. probe only reorders
    // within its run, which holds keys of one file, so the runs after it
    // stay sorted.
    FileMetaData* current = nullptr;
    size_t run_start = 0;
    size_t last = files.size();  // FindFile's answer for the previous key
    size_t i = 0;
    for (; i < num_pending; i++) {
      MultiGetKey* k = pending[i];
      const Slice ikey = k->lookup->internal_key();
      // Files before last end before the previous key, so before this one:
      // if last's file does not end before this key either, it is
      // FindFile's answer, without the search.
      if (last == files.size() ||
          CompareInline(&icmp, files[last]->largest.Encode(), ikey) < 0) {
        last = FindFile(icmp, files, ikey);
      }
      FileMetaData* f = last < files.size() ? files[last] : nullptr;
      if (f != nullptr && CompareUser(icmp, k->lookup->user_key(),
                                      f->smallest.user_key()) < 0) {
        f = nullptr;
      }
      if (f != current) {
        if (current != nullptr) {
          std::copy(pending + run_start, pending + i, batch);
          probe(current, batch, i - run_start);
        }
        current = f;
        run_start = i;
      }
    }
    if (current != nullptr) {
      std::copy(pending + run_start, pending + i, batch);
      probe(current, batch, i - run_start);
    }
    compact_pending();
  }
}

Status Version::AddIterators(const TableReadOptions& options,
                             const Slice* lower, const Slice* upper,
                             std::vector<Iterator*>* iters,
                             RangeDelAggregator* range_del) {
  const InternalKeyComparator& icmp = *vset_->icmp_;
  TableCache* tc = vset_->table_cache_;
  // True if f may hold keys in [lower, upper).
  auto in_bounds = [&](const FileMetaData* f) {
    if (lower != nullptr &&
        icmp.CompareUserKeys(f->largest.user_key(), *lower) < 0) {
      return false;
    }
    if (upper != nullptr &&
        icmp.CompareUserKeys(f->smallest.user_key(), *upper) >= 0) {
      return false;
    }
    return true;
  };
  auto add_tombstones = [&](FileMetaData* f) -> Status {
    if (range_del == nullptr || f->num_range_deletions == 0) {
      return Status::OK();
    }
    std::shared_ptr<const FragmentedRangeTombstoneList> tombstones;
    Status s = tc->GetRangeTombstones(f, &tombstones);
    if (s.ok()) range_del->AddTombstones(std::move(tombstones));
    return s;
  };
  for (FileMetaData* f : files_[0]) {
    if (!in_bounds(f)) continue;
    iters->push_back(tc->NewIterator(options, f));
    Status s = add_tombstones(f);
    if (!s.ok()) return s;
  }
  const int levels = num_levels();
  for (int level = 1; level < levels; level++) {
    bool any = false;
    for (FileMetaData* f : files_[level]) {
      if (!in_bounds(f)) continue;
      any = true;
      Status s = add_tombstones(f);
      if (!s.ok()) return s;
    }
    if (any) {
      iters->push_back(
          NewConcatenatingIterator(&icmp, &files_[level], tc, options));
    }
  }
  return Status::OK();
}

Status Version::AddPrefixIterators(const TableReadOptions& options,
                                   const Slice& target, const Slice* upper,
                                   std::vector<Iterator*>* iters,
                                   RangeDelAggregator* range_del) {
  const InternalKeyComparator& icmp = *vset_->icmp_;
  TableCache* tc = vset_->table_cache_;
  // The smallest internal key of target: every file holding target or
  // anything after it has a largest key at or above it.
  const InternalKey seek(target, kMaxSequenceNumber, kValueTypeForSeek);
  // Adds f's tombstones, and an iterator over f unless its filter rules
  // the prefix out.
  auto add = [&](FileMetaData* f) -> Status {
    if (range_del != nullptr && f->num_range_deletions > 0) {
      std::shared_ptr<const FragmentedRangeTombstoneList> tombstones;
      Status s = tc->GetRangeTombstones(f, &tombstones);
      if (!s.ok()) return s;
      range_del->AddTombstones(std::move(tombstones));
    }
    bool may_match;
    Status s = tc->KeyMayMatch(options, f, seek.Encode(), &may_match);
    if (!s.ok()) return s;
    if (may_match) iters->push_back(tc->NewIterator(options, f));
    return Status::OK();
  };
  auto before_upper = [&](const FileMetaData* f) {
    return upper == nullptr ||
           icmp.CompareUserKeys(f->smallest.user_key(), *upper) < 0;
  };
  for (FileMetaData* f : files_[0]) {
    if (icmp.CompareUserKeys(f->largest.user_key(), target) < 0 ||
        !before_upper(f)) {
      continue;
    }
    Status s = add(f);
    if (!s.ok()) return s;
  }
  const int levels = num_levels();
  for (int level = 1; level < levels; level++) {
    const std::vector<FileMetaData*>& files = files_[level];
    for (size_t i = FindFile(icmp, files, seek.Encode());
         i < files.size() && before_upper(files[i]); i++) {
      Status s = add(files[i]);
      if (!s.ok()) return s;
    }
  }
  return Status::OK();
}

Status Version::PrefixFirstEntries(const TableReadOptions& options,
                                   const LookupKey& lookup, const Slice* upper,
                                   void* arg,
                                   void (*callback)(void* arg, size_t index,
                                                    const Slice& key,
                                                    const Slice& value),
                                   RangeDelAggregator* range_del) {
  const InternalKeyComparator& icmp = *vset_->icmp_;
  TableCache* tc = vset_->table_cache_;
  const Slice target = lookup.user_key();
  const Slice ikey = lookup.internal_key();
  FilterProbe probe;  // the filter key is hashed for the first filter only
  // The same files as AddPrefixIterators, each read at its first entry at
  // or after the lookup key (Table::Get checks the filter first).
  auto get = [&](FileMetaData* f) -> Status {
    if (f->num_range_deletions > 0) {
      std::shared_ptr<const FragmentedRangeTombstoneList> tombstones;
      Status s = tc->GetRangeTombstones(f, &tombstones);
      if (!s.ok()) return s;
      range_del->AddTombstones(std::move(tombstones));
    }
    return tc->Get(options, f, ikey, arg, callback, &probe);
  };
  auto before_upper = [&](const FileMetaData* f) {
    return upper == nullptr ||
           icmp.CompareUserKeys(f->smallest.user_key(), *upper) < 0;
  };
  for (FileMetaData* f : files_[0]) {
    if (icmp.CompareUserKeys(f->largest.user_key(), target) < 0 ||
        !before_upper(f)) {
      continue;
    }
    Status s = get(f);
    if (!s.ok()) return s;
  }
  const int levels = num_levels();
  for (int level = 1; level < levels; level++) {
    const std::vector<FileMetaData*>& files = files_[level];
    if (files.empty()) continue;
    for (size_t i = FindFile(icmp, files, ikey);
         i < files.size() && before_upper(files[i]); i++) {
      Status s = get(files[i]);
      if (!s.ok()) return s;
    }
  }
  return Status::OK();
}

void Version::GetOverlappingInputs(int level, const Slice* begin,
                                   const Slice* end,
                                   std::vector<FileMetaData*>* inputs) const {
  const InternalKeyComparator& icmp = *vset_->icmp_;
  inputs->clear();
  std::string user_begin, user_end;
  if (begin != nullptr) user_begin = begin->ToString();
  if (end != nullptr) user_end = end->ToString();
  const std::vector<FileMetaData*>& files = files_[level];
  for (size_t i = 0; i < files.size();) {
    FileMetaData* f = files[i++];
    const Slice file_start = f->smallest.user_key();
    const Slice file_limit = f->largest.user_key();
    if (begin != nullptr && icmp.CompareUserKeys(file_limit, user_begin) < 0) {
      continue;  // entirely before the range
    }
    if (end != nullptr && icmp.CompareUserKeys(file_start, user_end) > 0) {
      continue;  // entirely after the range
    }
    inputs->push_back(f);
    if (level == 0) {
      // L0 files overlap each other: widen the range to cover this file
      // and start over, so the result is closed under overlap.
      if (begin != nullptr &&
          icmp.CompareUserKeys(file_start, user_begin) < 0) {
        user_begin = file_start.ToString();
        inputs->clear();
        i = 0;
      } else if (end != nullptr &&
                 icmp.CompareUserKeys(file_limit, user_end) > 0) {
        user_end = file_limit.ToString();
        inputs->clear();
        i = 0;
      }
    }
  }
}

bool Version::OverlapInLevel(int level, const Slice* smallest,
                             const Slice* largest) const {
  const InternalKeyComparator& icmp = *vset_->icmp_;
  const std::vector<FileMetaData*>& files = files_[level];
  if (level == 0) {
    for (const FileMetaData* f : files) {
      if (AfterFile(icmp, smallest, f) || BeforeFile(icmp, largest, f)) {
        continue;
      }
      return true;
    }
    return false;
  }
  size_t index = 0;
  if (smallest != nullptr) {
    // The first file whose largest key is >= smallest.
    InternalKey small_key(*smallest, kMaxSequenceNumber, kValueTypeForSeek);
    index = FindFile(icmp, files, small_key.Encode());
    // A file ending in a sentinel at smallest's user key still counts.
    while (index > 0 &&
           icmp.CompareUserKeys(files[index - 1]->largest.user_key(),
                                *smallest) >= 0) {
      index--;
    }
  }
  if (index >= files.size()) return false;
  return !BeforeFile(icmp, largest, files[index]);
}

void Version::ApproximateSize(const Slice& begin, const Slice* end,
                              uint64_t* bytes, uint64_t* keys) {
  const InternalKeyComparator& icmp = *vset_->icmp_;
  TableCache* tc = vset_->table_cache_;
  const InternalKey ibegin(begin, kMaxSequenceNumber, kValueTypeForSeek);
  const InternalKey iend(end != nullptr ? *end : Slice(), kMaxSequenceNumber,
                         kValueTypeForSeek);
  double total_bytes = 0, total_keys = 0;
  for (int level = 0; level < num_levels(); level++) {
    for (FileMetaData* f : files_[level]) {
      if (icmp.CompareUserKeys(f->largest.user_key(), begin) < 0 ||
          (end != nullptr &&
           icmp.CompareUserKeys(f->smallest.user_key(), *end) >= 0)) {
        continue;
      }
      uint64_t start = 0, limit = f->file_size;
      if (icmp.CompareUserKeys(f->smallest.user_key(), begin) < 0) {
        tc->ApproximateOffsetOf(f, ibegin.Encode(), &start);
      }
      if (end != nullptr &&
          icmp.CompareUserKeys(f->largest.user_key(), *end) >= 0) {
        tc->ApproximateOffsetOf(f, iend.Encode(), &limit);
      }
      if (limit <= start || f->file_size == 0) continue;
      const double part = static_cast<double>(limit - start);
      total_bytes += part;
      total_keys += part * f->num_entries / f->file_size;
    }
  }
  *bytes = static_cast<uint64_t>(total_bytes);
  *keys = static_cast<uint64_t>(total_keys);
}

std::string Version::DebugString() const {
  std::string r;
  for (int level = 0; level < num_levels(); level++) {
    r += "--- level " + std::to_string(level) + " ---\n";
    for (const FileMetaData* f : files_[level]) {
      char line[100];
      snprintf(line, sizeof(line), " %" PRIu64 ":%" PRIu64 "[", f->number,
               f->file_size);
      r += line;
      r +=
          f->smallest.DebugString() + " .. " + f->largest.DebugString() + "]\n";
    }
  }
  return r;
}

// --------------------------------------------------------- VersionBuilder

// Applies a sequence of edits to a base Version without building the
// intermediate ones.
class VersionBuilder {
 public:
  VersionBuilder(VersionSet* vset, Version* base)
      : vset_(vset), icmp_(*vset->icmp()), base_(base) {
    base_->Ref();
  }
  ~VersionBuilder() {
    for (auto& added : added_) {
      for (FileMetaData* f : added) {
        if (--f->refs <= 0) delete f;
      }
    }
    base_->Unref();
  }

  Status Apply(const VersionEdit& edit) {
    const int levels = vset_->options()->num_levels;
    for (const auto& [level, number] : edit.deleted_files()) {
      if (level >= levels) return LevelTooDeep(level);
      deleted_[level].insert(number);
    }
    for (const auto& [level, meta] : edit.new_files()) {
      if (level >= levels) return LevelTooDeep(level);
      FileMetaData* f = new FileMetaData(meta);
      f->refs = 1;
      f->being_compacted = false;
      deleted_[level].erase(f->number);
      added_[level].push_back(f);
    }
    return Status::OK();
  }

  // Fills v with the base's files plus the added, minus the deleted.
  Status SaveTo(Version* v) {
    const int levels = vset_->options()->num_levels;
    for (int level = 0; level < levels; level++) {
      const std::set<uint64_t>& deleted = deleted_[level];
      std::vector<FileMetaData*>& out = v->files_[level];
      for (FileMetaData* f : base_->files_[level]) {
        if (deleted.count(f->number) == 0) out.push_back(f);
      }
      for (FileMetaData* f : added_[level]) {
        if (deleted.count(f->number) == 0) out.push_back(f);
      }
      if (level == 0) {
        std::sort(out.begin(), out.end(), NewestFirst);
      } else {
        std::sort(out.begin(), out.end(),
                  [this](const FileMetaData* a, const FileMetaData* b) {
                    const int r = icmp_.Compare(a->smallest.Encode(),
                                                b->smallest.Encode());
                    return r != 0 ? r < 0 : a->number < b->number;
                  });
        for (size_t i = 1; i < out.size(); i++) {
          if (icmp_.Compare(out[i - 1]->largest.Encode(),
                            out[i]->smallest.Encode()) >= 0) {
            return Status::Corruption(
                "overlapping files in level " + std::to_string(level) + ": " +
                std::to_string(out[i - 1]->number) + " ends at " +
                out[i - 1]->largest.DebugString() + ", " +
                std::to_string(out[i]->number) + " starts at " +
                out[i]->smallest.DebugString());
          }
        }
      }
      for (FileMetaData* f : out) f->refs++;
    }
    return Status::OK();
  }

 private:
  static Status LevelTooDeep(int level) {
    return Status::Corruption("version edit names level " +
                              std::to_string(level) +
                              ", beyond the configured num_levels");
  }

  VersionSet* const vset_;
  const InternalKeyComparator& icmp_;
  Version* const base_;
  std::set<uint64_t> deleted_[kMaxLevels];
  std::vector<FileMetaData*> added_[kMaxLevels];
};

// ------------------------------------------------------------- VersionSet

VersionSet::VersionSet(const std::string& dbname, const Options* options,
                       Env* env, TableCache* table_cache,
                       const InternalKeyComparator* icmp, Mutex* mu)
    : env_(env),
      dbname_(dbname),
      options_(options),
      table_cache_(table_cache),
      icmp_(icmp),
      mu_(mu),
      manifest_cv_(mu),
      dummy_versions_(this) {
  AppendVersion(new Version(this));
}

VersionSet::~VersionSet() {
  current_->Unref();
  assert(dummy_versions_.next_ == &dummy_versions_);  // all versions gone
  descriptor_log_.reset();
  if (descriptor_file_ != nullptr) descriptor_file_->Close();
}

void VersionSet::AppendVersion(Version* v) {
  assert(v->refs_ == 0);
  assert(v != current_);
  if (current_ != nullptr) current_->Unref();
  current_ = v;
  v->Ref();
  v->prev_ = dummy_versions_.prev_;
  v->next_ = &dummy_versions_;
  v->prev_->next_ = v;
  v->next_->prev_ = v;
}

uint64_t VersionSet::ManifestFileSize() const {
  return descriptor_log_ != nullptr ? descriptor_log_->good_length() : 0;
}

void VersionSet::AddLiveFiles(std::set<uint64_t>* live) const {
  for (const Version* v = dummy_versions_.next_; v != &dummy_versions_;
       v = v->next_) {
    for (const auto& level_files : v->files_) {
      for (const FileMetaData* f : level_files) live->insert(f->number);
    }
  }
}

Status VersionSet::SetCurrentFile(uint64_t manifest_number) {
  // CURRENT := "MANIFEST-NNNNNN\n", replaced by an atomic rename.
  std::string manifest = DescriptorFileName(dbname_, manifest_number);
  Slice contents(manifest);
  contents.remove_prefix(dbname_.size() + 1);
  const std::string tmp = TempFileName(dbname_, manifest_number);
  Status s = WriteStringToFile(env_, contents.ToString() + "\n", tmp, true);
  if (s.ok()) s = env_->RenameFile(tmp, CurrentFileName(dbname_));
  if (s.ok()) s = env_->SyncDir(dbname_);
  if (!s.ok()) env_->RemoveFile(tmp);
  return s;
}

Status VersionSet::CreateNew() {
  VersionEdit edit;
  edit.SetFormatVersion(kManifestFormatVersion);
  edit.SetComparatorName(icmp_->user_comparator()->Name());
  edit.SetLogNumber(0);
  edit.SetNextFile(2);
  edit.SetLastSequence(0);
  const std::string manifest = DescriptorFileName(dbname_, 1);
  std::unique_ptr<WritableFile> file;
  Status s = env_->NewWritableFile(manifest, &file);
  if (!s.ok()) return s;
  {
    log::Writer log(file.get());
    std::string record;
    edit.EncodeTo(&record);
    s = log.AddRecord(record);
    if (s.ok()) s = file->Sync();
  }
  if (s.ok()) s = file->Close();
  if (s.ok()) s = SetCurrentFile(1);
  if (!s.ok()) env_->RemoveFile(manifest);
  next_file_number_ = 2;
  return s;
}

namespace {

// Collects damage while a MANIFEST is read.
class ManifestReporter : public log::Reader::Reporter {
 public:
  void Corruption(uint64_t offset, size_t bytes,
                  const Status& reason) override {
    if (first.ok()) first = reason;
  }
  Status first;
};

}  // namespace

Status VersionSet::ReadManifest(const std::string& fname, VersionEdit* summary,
                                Version* v) {
  std::unique_ptr<SequentialFile> file;
  Status s = env_->NewSequentialFile(fname, &file);
  if (!s.ok()) return s;
  ManifestReporter reporter;
  log::Reader reader(file.get(), fname, &reporter, /*checksum=*/true);
  VersionBuilder builder(this, current_);
  Slice record;
  std::string scratch;
  int edits = 0;
  while (reader.ReadRecord(&record, &scratch)) {
    if (!reporter.first.ok()) {
      // Damage followed by a good record: not a write cut short by a crash.
      return Status::Corruption(reporter.first.message(),
                                "valid MANIFEST records follow it");
    }
    VersionEdit edit;
    s = edit.DecodeFrom(record);
    if (!s.ok()) {
      return Status::Corruption(fname + ": record at offset " +
                                    std::to_string(reader.LastRecordOffset()),
                                s.message());
    }
    if (edit.has_comparator() &&
        edit.comparator() != icmp_->user_comparator()->Name()) {
      return Status::InvalidArgument(fname + ": written with comparator " +
                                     edit.comparator() + ", opened with " +
                                     icmp_->user_comparator()->Name());
    }
    s = builder.Apply(edit);
    if (!s.ok()) return Status::Corruption(fname, s.message());
    if (edit.has_log_number()) summary->SetLogNumber(edit.log_number());
    if (edit.has_next_file_number()) {
      summary->SetNextFile(edit.next_file_number());
    }
    if (edit.has_last_sequence()) {
      summary->SetLastSequence(edit.last_sequence());
    }
    edits++;
  }
  // Damage at the very end may be an edit whose write was cut short by a
  // crash: it was never acknowledged, and the next LogAndApply starts a
  // new MANIFEST. Anything else there (a checksum mismatch in a whole
  // record) is a synced edit gone bad: dropping it would silently forget
  // files it added and resurrect WALs it retired.
  if (!reporter.first.ok() && !reporter.first.IsCorruption()) {
    return reporter.first;  // an I/O error
  }
  if (!reporter.first.ok() && !reader.OnlyCutShort()) {
    return Status::Corruption(reporter.first.message(),
                              "the last MANIFEST record is damaged, not cut "
                              "short by a crash");
  }
  if (edits == 0) return Status::Corruption(fname, "holds no version edit");
  s = builder.SaveTo(v);
  if (!s.ok()) return Status::Corruption(fname, s.message());
  return Status::OK();
}

Status VersionSet::Recover() {
  std::string current;
  Status s = ReadFileToString(env_, CurrentFileName(dbname_), &current);
  if (!s.ok()) return s;
  if (current.empty() || current.back() != '\n') {
    return Status::Corruption(CurrentFileName(dbname_),
                              "does not end with a newline");
  }
  current.resize(current.size() - 1);
  uint64_t manifest_number;
  FileType type;
  if (!ParseFileName(current, &manifest_number, &type) ||
      type != FileType::kDescriptorFile) {
    return Status::Corruption(CurrentFileName(dbname_),
                              "names '" + current + "', not a MANIFEST");
  }
  const std::string fname = dbname_ + "/" + current;
  if (!env_->FileExists(fname)) {
    return Status::Corruption(CurrentFileName(dbname_),
                              "names " + current + ", which does not exist");
  }
  VersionEdit summary;
  Version* v = new Version(this);
  s = ReadManifest(fname, &summary, v);
  if (s.ok()) {
    if (!summary.has_next_file_number()) {
      s = Status::Corruption(fname, "no next-file-number entry");
    } else if (!summary.has_log_number()) {
      s = Status::Corruption(fname, "no log-number entry");
    } else if (!summary.has_last_sequence()) {
      s = Status::Corruption(fname, "no last-sequence entry");
    }
  }
  if (!s.ok()) {
    v->Ref();
    v->Unref();
    return s;
  }
  AppendVersion(v);
  manifest_file_number_ = manifest_number;
  next_file_number_ = summary.next_file_number();
  MarkFileNumberUsed(manifest_number);
  log_number_ = summary.log_number();
  MarkFileNumberUsed(log_number_);
  last_sequence_ = summary.last_sequence();
  return Status::OK();
}

Status VersionSet::WriteSnapshot(log::Writer* log) {
  VersionEdit edit;
  edit.SetFormatVersion(kManifestFormatVersion);
  edit.SetComparatorName(icmp_->user_comparator()->Name());
  for (int level = 0; level < options_->num_levels; level++) {
    for (const FileMetaData* f : current_->files_[level]) {
      edit.AddFile(level, *f);
    }
  }
  std::string record;
  edit.EncodeTo(&record);
  return log->AddRecord(record);
}

Status VersionSet::LogAndApply(VersionEdit* edit) {
  mu_->AssertHeld();
  while (manifest_writing_) manifest_cv_.Wait();
  manifest_writing_ = true;

  if (edit->has_log_number()) {
    assert(edit->log_number() >= log_number_);
    assert(edit->log_number() < next_file_number_);
  } else {
    edit->SetLogNumber(log_number_);
  }
  assert(edit->has_last_sequence());

  // A new MANIFEST when there is none yet (after open), after a failed
  // write (its tail may be a partial record), or when it has grown large.
  uint64_t new_manifest_number = 0;
  if (descriptor_log_ == nullptr ||
      descriptor_log_->good_length() > kMaxManifestSize) {
    new_manifest_number = NewFileNumber();
  }
  edit->SetNextFile(next_file_number_);

  Version* v = new Version(this);
  Status s;
  {
    VersionBuilder builder(this, current_);
    s = builder.Apply(*edit);
    if (s.ok()) s = builder.SaveTo(v);
  }

  std::unique_ptr<WritableFile> new_file;
  std::unique_ptr<log::Writer> new_log;
  if (s.ok()) {
    // current_ cannot change while manifest_writing_ is set, so the
    // snapshot below may read it without the mutex.
    mu_->Unlock();
    log::Writer* log = descriptor_log_.get();
    if (new_manifest_number != 0) {
      s = env_->NewWritableFile(
          DescriptorFileName(dbname_, new_manifest_number), &new_file);
      if (s.ok()) {
        new_log = std::make_unique<log::Writer>(new_file.get());
        s = WriteSnapshot(new_log.get());
        log = new_log.get();
      }
    }
    if (s.ok()) {
      std::string record;
      edit->EncodeTo(&record);
      s = log->AddRecord(record);
      if (s.ok()) s = log->Sync();
    }
    if (s.ok() && new_manifest_number != 0) {
      s = SetCurrentFile(new_manifest_number);
    }
    mu_->Lock();
  }

  if (s.ok()) {
    if (new_manifest_number != 0) {
      if (descriptor_file_ != nullptr) {
        descriptor_log_.reset();
        descriptor_file_->Close();
      }
      descriptor_file_ = std::move(new_file);
      descriptor_log_ = std::move(new_log);
      manifest_file_number_ = new_manifest_number;
    }
    AppendVersion(v);
    log_number_ = edit->log_number();
    last_sequence_ = edit->last_sequence();
  } else {
    v->Ref();
    v->Unref();
    if (new_manifest_number != 0) {
      new_log.reset();
      if (new_file != nullptr) new_file->Close();
      env_->RemoveFile(DescriptorFileName(dbname_, new_manifest_number));
    } else if (descriptor_log_ != nullptr) {
      // The MANIFEST may end in a partial record: never append to it again.
      descriptor_log_.reset();
      descriptor_file_->Close();
      descriptor_file_.reset();
    }
  }
  manifest_writing_ = false;
  manifest_cv_.SignalAll();
  return s;
}

}  // namespace shale
