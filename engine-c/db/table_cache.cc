#include "db/table_cache.h"

#include "db/filename.h"
#include "util/coding.h"
#include "util/env.h"

namespace shale {

// What the cache holds for one open file.
struct TableCache::Entry {
  std::unique_ptr<Table> table;
  std::shared_ptr<const FragmentedRangeTombstoneList> tombstones;
};

// A pin on an Entry: either the file's permanent pin (nothing to release)
// or a cache handle released on destruction.
class TableCache::Ref {
 public:
  Ref() = default;
  Ref(const Ref&) = delete;
  Ref& operator=(const Ref&) = delete;
  ~Ref() {
    if (handle_ != nullptr) cache_->Release(handle_);
  }

  void Set(Cache* cache, Cache::Handle* handle, bool owned) {
    cache_ = cache;
    entry_ = static_cast<Entry*>(cache->Value(handle));
    handle_ = owned ? handle : nullptr;
  }
  Entry* entry() const { return entry_; }
  // Transfers the release duty to the caller.
  Cache::Handle* Release() {
    Cache::Handle* h = handle_;
    handle_ = nullptr;
    return h;
  }

 private:
  Cache* cache_ = nullptr;
  Entry* entry_ = nullptr;
  Cache::Handle* handle_ = nullptr;  // released on destruction
};

namespace {

void DeleteEntry(const Slice& key, void* value) {
  delete static_cast<TableCache::Entry*>(value);
}

void ReleaseHandle(void* cache, void* handle) {
  static_cast<Cache*>(cache)->Release(static_cast<Cache::Handle*>(handle));
}

}  // namespace

TableCache::TableCache(const std::string& dbname, Env* env,
                       const TableOptions& table_options, int max_open_files,
                       bool use_mmap_reads)
    : env_(env),
      dbname_(dbname),
      table_options_(table_options),
      pin_tables_(max_open_files < 0),
      use_mmap_reads_(use_mmap_reads),
      // Each open table is charged 1: capacity counts files. A few
      // descriptors stay free for WALs, the MANIFEST and new tables.
      cache_(NewLRUCache(max_open_files < 0 ? (size_t{1} << 40)
                                            : static_cast<size_t>(std::max(
                                                  max_open_files - 10, 16)),
                         4)) {}

TableCache::~TableCache() = default;

Status TableCache::OpenTable(FileMetaData* f, std::unique_ptr<Entry>* entry) {
  const std::string fname = TableFileName(dbname_, f->number);
  std::unique_ptr<RandomAccessFile> file;
  Status s = env_->NewRandomAccessFile(fname, &file, use_mmap_reads_);
  if (!s.ok()) return s;
  auto e = std::make_unique<Entry>();
  s = Table::Open(table_options_, std::move(file), f->file_size, f->number,
                  f->global_seqno, fname, &e->table);
  if (!s.ok()) return s;
  if (e->table->properties().num_range_tombstones > 0) {
    std::unique_ptr<Iterator> it(
        e->table->NewRangeTombstoneIterator(TableReadOptions()));
    const auto* icmp =
        static_cast<const InternalKeyComparator*>(table_options_.comparator);
    auto list = std::make_shared<const FragmentedRangeTombstoneList>(it.get(),
                                                                     *icmp, &s);
    if (!s.ok()) return Status::Corruption(fname, s.message());
    if (!list->empty()) e->tombstones = std::move(list);
  }
  *entry = std::move(e);
  return Status::OK();
}

Status TableCache::FindTable(FileMetaData* f, Ref* ref, bool allow_pin) {
  const bool pin = pin_tables_ && allow_pin;
  if (pin) {
    void* pinned = f->pinned.load(std::memory_order_acquire);
    if (pinned != nullptr) {
      ref->Set(cache_.get(), static_cast<Cache::Handle*>(pinned), false);
      return Status::OK();
    }
  }
  char buf[8];
  EncodeFixed64(buf, f->number);
  const Slice key(buf, sizeof(buf));
  Cache::Handle* handle = cache_->Lookup(key);
  if (handle == nullptr) {
    std::unique_ptr<Entry> entry;
    Status s = OpenTable(f, &entry);
    if (!s.ok()) return s;  // not cached: a later read retries
    handle = cache_->Insert(key, entry.release(), 1, &DeleteEntry);
  }
  if (pin) {
    // Keep this handle as the file's pin, unless another thread won.
    void* expected = nullptr;
    if (f->pinned.compare_exchange_strong(expected, handle,
                                          std::memory_order_acq_rel)) {
      ref->Set(cache_.get(), handle, false);
      f->pinned_table.store(ref->entry()->table.get(),
                            std::memory_order_release);
      return Status::OK();
    }
    cache_->Release(handle);
    ref->Set(cache_.get(), static_cast<Cache::Handle*>(expected), false);
    return Status::OK();
  }
  ref->Set(cache_.get(), handle, true);
  return Status::OK();
}

void TableCache::Preload(FileMetaData* f) {
  if (!pin_tables_) return;
  Ref ref;
  Status s = FindTable(f, &ref);
  (void)s;  // the first read retries and reports it
}

Iterator* TableCache::NewIterator(const TableReadOptions& options,
                                  FileMetaData* f) {
  Ref ref;
  Status s = FindTable(f, &ref);
  if (!s.ok()) return NewErrorIterator(s);
  Iterator* it = ref.entry()->table->NewIterator(options);
  Cache::Handle* h = ref.Release();
  if (h != nullptr) it->RegisterCleanup(&ReleaseHandle, cache_.get(), h);
  return it;
}

Status TableCache::Get(const TableReadOptions& options, FileMetaData* f,
                       const Slice& internal_key, void* arg,
                       TableGetCallback callback, FilterProbe* probe) {
  Ref ref;
  Status s = FindTable(f, &ref);
  if (!s.ok()) return s;
  return ref.entry()->table->Get(options, internal_key, arg, callback, probe);
}

Status TableCache::KeyMayMatch(const TableReadOptions& options, FileMetaData* f,
                               const Slice& internal_key, bool* may_match) {
  *may_match = true;
  Ref ref;
  Status s = FindTable(f, &ref);
  if (!s.ok()) return s;
  return ref.entry()->table->KeyMayMatch(options, internal_key, may_match);
}

Status TableCache::MultiGet(const TableReadOptions& options, FileMetaData* f,
                            size_t n, const Slice* keys, void* arg,
                            TableGetCallback callback, Status* statuses,
                            FilterProbe* const* probes) {
  Ref ref;
  Status s = FindTable(f, &ref);
  if (!s.ok()) {
    for (size_t i = 0; i < n; i++) statuses[i] = s;
    return s;
  }
  return ref.entry()->table->MultiGet(options, n, keys, arg, callback, statuses,
                                      probes);
}

Status TableCache::GetRangeTombstones(
    FileMetaData* f,
    std::shared_ptr<const FragmentedRangeTombstoneList>* tombstones) {
  tombstones->reset();
  if (f->num_range_deletions == 0) return Status::OK();
  Ref ref;
  Status s = FindTable(f, &ref);
  if (s.ok()) *tombstones = ref.entry()->tombstones;
  return s;
}

Status TableCache::ApproximateOffsetOf(FileMetaData* f,
                                       const Slice& internal_key,
                                       uint64_t* offset) {
  Ref ref;
  Status s = FindTable(f, &ref);
  if (s.ok()) *offset = ref.entry()->table->ApproximateOffsetOf(internal_key);
  return s;
}

Status TableCache::Verify(FileMetaData* f) {
  Ref ref;
  return FindTable(f, &ref, /*allow_pin=*/false);
}

void TableCache::Evict(uint64_t file_number) {
  char buf[8];
  EncodeFixed64(buf, file_number);
  cache_->Erase(Slice(buf, sizeof(buf)));
}

void TableCache::Unpin(FileMetaData* f) {
  f->pinned_table.store(nullptr, std::memory_order_relaxed);
  void* pinned = f->pinned.exchange(nullptr, std::memory_order_acq_rel);
  if (pinned != nullptr) cache_->Release(static_cast<Cache::Handle*>(pinned));
}

}  // namespace shale
