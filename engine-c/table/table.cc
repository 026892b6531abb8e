// Reading an SST: Open, iteration, point and batched lookups.

#include "table/table.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>

#include "table/block.h"
#include "table/filter_policy.h"
#include "table/format.h"
#include "table/table_properties.h"
#include "util/cache.h"
#include "util/coding.h"
#include "util/comparator.h"
#include "util/env.h"
#include "util/statistics.h"

namespace shale {

namespace {

// Block-cache keys: the table's cache ID, then the block's offset.
constexpr size_t kCacheKeySize = 16;
// Bytes the cache spends per entry besides the value (its handle with the
// key), charged with the entry so that the capacity bounds real memory.
constexpr size_t kCacheEntryOverhead = 64 + kCacheKeySize;

// A filter kept 64-byte aligned so that each of its lines is one cache line.
struct FilterData {
  static constexpr size_t kAlignment = 64;

  explicit FilterData(const Slice& contents) : size(contents.size()) {
    const size_t rounded = (size + kAlignment - 1) / kAlignment * kAlignment;
    bytes = static_cast<char*>(std::aligned_alloc(kAlignment, rounded));
    if (bytes == nullptr) throw std::bad_alloc();
    memcpy(bytes, contents.data(), size);
  }
  FilterData(const FilterData&) = delete;
  FilterData& operator=(const FilterData&) = delete;
  ~FilterData() { std::free(bytes); }

  Slice slice() const { return Slice(bytes, size); }
  // What the filter costs in the block cache, bookkeeping included.
  size_t Charge() const {
    return size + sizeof(FilterData) + kCacheEntryOverhead;
  }

  char* bytes;
  size_t size;
};

size_t BlockCharge(const Block& block) {
  return block.size() + sizeof(Block) + kCacheEntryOverhead;
}

void DeleteCachedBlock(const Slice& /*key*/, void* value) {
  delete static_cast<Block*>(value);
}

void DeleteCachedFilter(const Slice& /*key*/, void* value) {
  delete static_cast<FilterData*>(value);
}

void ReleaseCacheHandle(void* cache, void* handle) {
  static_cast<Cache*>(cache)->Release(static_cast<Cache::Handle*>(handle));
}

void DeleteBlock(void* block, void* /*unused*/) {
  delete static_cast<Block*>(block);
}

// A block pinned for as long as a lookup uses it: either a block-cache
// handle or a block the lookup owns. Lives on the stack: no allocation.
class BlockRef {
 public:
  BlockRef() = default;
  BlockRef(const BlockRef&) = delete;
  BlockRef& operator=(const BlockRef&) = delete;
  ~BlockRef() { Reset(); }

  void Reset() {
    if (handle_ != nullptr) cache_->Release(handle_);
    delete owned_;
    cache_ = nullptr;
    handle_ = nullptr;
    owned_ = nullptr;
    block_ = nullptr;
  }
  void SetCached(Cache* cache, Cache::Handle* handle) {
    Reset();
    cache_ = cache;
    handle_ = handle;
    block_ = static_cast<const Block*>(cache->Value(handle));
  }
  void SetOwned(Block* block) {
    Reset();
    owned_ = block;
    block_ = block;
  }
  // A block owned by someone else that outlives this reference.
  void SetBorrowed(const Block* block) {
    Reset();
    block_ = block;
  }

  const Block* block() const { return block_; }

  // Hands the pin to iter: it is released when iter is destroyed.
  void TransferTo(Iterator* iter) {
    if (handle_ != nullptr) {
      iter->RegisterCleanup(&ReleaseCacheHandle, cache_, handle_);
    } else if (owned_ != nullptr) {
      iter->RegisterCleanup(&DeleteBlock, owned_, nullptr);
    }
    cache_ = nullptr;
    handle_ = nullptr;
    owned_ = nullptr;
    block_ = nullptr;
  }

 private:
  Cache* cache_ = nullptr;
  Cache::Handle* handle_ = nullptr;
  Block* owned_ = nullptr;
  const Block* block_ = nullptr;
};

// A filter pinned for a lookup (see BlockRef).
class FilterRef {
 public:
  FilterRef() = default;
  FilterRef(const FilterRef&) = delete;
  FilterRef& operator=(const FilterRef&) = delete;
  ~FilterRef() {
    if (handle_ != nullptr) cache_->Release(handle_);
  }

  void SetCached(Cache* cache, Cache::Handle* handle) {
    cache_ = cache;
    handle_ = handle;
    filter_ = static_cast<const FilterData*>(cache->Value(handle))->slice();
  }
  void SetBorrowed(const Slice& filter) { filter_ = filter; }

  const Slice& filter() const { return filter_; }

 private:
  Cache* cache_ = nullptr;
  Cache::Handle* handle_ = nullptr;
  Slice filter_;
};

enum class BlockKind { kData, kIndex };

inline void Record(Statistics* stats, Ticker t, uint64_t n = 1) {
  if (stats != nullptr) stats->Record(t, n);
}

}  // namespace

class Readahead;  // below: serves an iterator's sequential reads

struct Table::Rep {
  TableOptions options;
  std::unique_ptr<RandomAccessFile> file;
  uint64_t file_size = 0;
  uint64_t file_number = 0;
  uint64_t global_seqno = 0;
  std::string file_name;
  uint64_t cache_id = 0;  // block-cache key prefix (when block_cache)

  TableProperties props;
  BlockHandle index_handle;
  // Index and filter held by the table (not cache_index_blocks), or null.
  std::unique_ptr<Block> index_block;
  std::unique_ptr<FilterData> filter;
  bool has_filter = false;
  BlockHandle filter_handle;
  std::unique_ptr<Block> range_del_block;  // null when the file has none
  uint64_t range_del_offset = 0;
  // True: index and filter go through options.block_cache.
  bool cache_index_and_filter = false;
  // End of the data blocks (they start at offset 0 and are contiguous).
  uint64_t data_end = 0;

  void CacheKey(uint64_t offset, char* buf) const {
    EncodeFixed64(buf, cache_id);
    EncodeFixed64(buf + 8, offset);
  }

  // Reads a block from the file (no cache).
  Status ReadBlockFromFile(const TableReadOptions& ro,
                           const BlockHandle& handle,
                           BlockContents* contents) const {
    Status s =
        ReadBlock(file.get(), file_size, file_name, ro, handle, contents);
    if (s.ok()) {
      Record(options.statistics, kSstBytesRead,
             handle.size() + kBlockTrailerSize);
      Record(options.statistics, kSstBlocksRead);
    }
    return s;
  }

  // Reads [offset, offset + size) in one go into *range (*buf holds the
  // bytes unless the file is memory-mapped).
  Status ReadRange(uint64_t offset, uint64_t size, std::unique_ptr<char[]>* buf,
                   FileRange* range) const {
    if (offset > file_size || size > file_size - offset) {
      return Status::Corruption("block handle past end of file",
                                BlockErrorContext(file_name, offset));
    }
    buf->reset(new char[size]);
    Slice data;
    Status s = file->Read(offset, size, &data, buf->get());
    if (!s.ok()) {
      return Status::IOError(
          "reading table",
          BlockErrorContext(file_name, offset) + ": " + s.message());
    }
    if (data.size() != size) {
      return Status::Corruption("truncated read",
                                BlockErrorContext(file_name, offset));
    }
    range->offset = offset;
    range->data = data;
    range->file_owned = data.data() != buf->get();
    if (range->file_owned) buf->reset();
    Record(options.statistics, kSstBytesRead, size);
    return Status::OK();
  }

  // Reads a block from range if it lies there, else from the file.
  Status ReadMetaBlock(const TableReadOptions& ro, const FileRange& range,
                       const BlockHandle& handle,
                       BlockContents* contents) const {
    if (range.Contains(handle)) {
      return ReadBlockFromRange(range, file_name, ro, handle, contents);
    }
    return ReadBlockFromFile(ro, handle, contents);
  }

  // Pins the data or index block at handle into *ref, through the block
  // cache when there is one. readahead (may be null) follows the access
  // pattern of an iterator and serves sequential reads from larger ones.
  Status GetBlock(const TableReadOptions& ro, const BlockHandle& handle,
                  BlockKind kind, BlockRef* ref,
                  Readahead* readahead = nullptr) const;

  Status GetIndexBlock(const TableReadOptions& ro, BlockRef* ref) const {
    if (index_block != nullptr) {
      ref->SetBorrowed(index_block.get());
      return Status::OK();
    }
    return GetBlock(ro, index_handle, BlockKind::kIndex, ref);
  }

  // Reads the filter block (from range if it lies there) into a
  // FilterData.
  Status LoadFilter(const TableReadOptions& ro, const FileRange* range,
                    std::unique_ptr<FilterData>* result) const {
    BlockContents contents;
    Status s = range != nullptr
                   ? ReadMetaBlock(ro, *range, filter_handle, &contents)
                   : ReadBlockFromFile(ro, filter_handle, &contents);
    if (!s.ok()) return s;
    *result = std::make_unique<FilterData>(contents.data);
    if (contents.heap_allocated) delete[] contents.data.data();
    return Status::OK();
  }

  // Pins the filter into *ref. REQUIRES: has_filter.
  Status GetFilter(const TableReadOptions& ro, FilterRef* ref) const {
    if (filter != nullptr) {
      ref->SetBorrowed(filter->slice());
      return Status::OK();
    }
    Cache* cache = options.block_cache;
    char key_buf[kCacheKeySize];
    CacheKey(filter_handle.offset(), key_buf);
    const Slice key(key_buf, kCacheKeySize);
    Cache::Handle* h = cache->Lookup(key);
    if (h != nullptr) {
      Record(options.statistics, kBlockCacheHit);
      Record(options.statistics, kBlockCacheFilterHit);
      ref->SetCached(cache, h);
      return Status::OK();
    }
    Record(options.statistics, kBlockCacheMiss);
    Record(options.statistics, kBlockCacheFilterMiss);
    std::unique_ptr<FilterData> loaded;
    Status s = LoadFilter(ro, nullptr, &loaded);
    if (!s.ok()) return s;
    const size_t charge = loaded->Charge();
    h = cache->Insert(key, loaded.release(), charge, &DeleteCachedFilter);
    Record(options.statistics, kBlockCacheAdd);
    ref->SetCached(cache, h);
    return Status::OK();
  }

  Status CorruptHandle(uint64_t index_offset) const {
    return Status::Corruption("bad block handle in index block",
                              BlockErrorContext(file_name, index_offset));
  }
};

// Readahead for an iterator's forward scans. After two data blocks loaded
// back to back (each starting where the previous ended), block reads that
// miss the cache are served from one larger read, 8 KiB at first and
// doubling up to 256 KiB: a scan of a cold table (or a compaction input)
// then makes one read per 256 KiB instead of one per block. Any other
// pattern (seeks, Prev) reads single blocks.
class Readahead {
 public:
  // Follows the pattern: called for every data block loaded, cached or not.
  void Observe(const BlockHandle& handle) {
    if (handle.offset() == next_offset_) {
      sequential_++;
    } else {
      sequential_ = 0;
      size_ = kInitialSize;
    }
    next_offset_ = handle.offset() + handle.size() + kBlockTrailerSize;
  }

  // Sets *range to bytes holding the block at handle - already read, or read
  // now if the pattern is sequential - or to nullptr (read the block alone).
  // REQUIRES: Observe(handle) was called.
  Status RangeFor(const Table::Rep& rep, const BlockHandle& handle,
                  const FileRange** range) {
    *range = nullptr;
    if (valid_ && range_.Contains(handle)) {
      *range = &range_;
      return Status::OK();
    }
    if (sequential_ < 2) return Status::OK();
    // Read no further than the data blocks (the meta blocks after them are
    // read at open).
    const uint64_t end = handle.offset() + handle.size() + kBlockTrailerSize;
    const uint64_t limit = std::max(rep.data_end, end);
    if (end > rep.file_size) return Status::OK();  // ReadBlock will say why
    const uint64_t want =
        std::min<uint64_t>(std::max<uint64_t>(size_, end - handle.offset()),
                           limit - handle.offset());
    valid_ = false;
    Status s = rep.ReadRange(handle.offset(), want, &buf_, &range_);
    if (!s.ok()) return s;
    valid_ = true;
    size_ = std::min(size_ * 2, kMaxSize);
    *range = &range_;
    return Status::OK();
  }

 private:
  static constexpr size_t kInitialSize = 8 << 10;
  static constexpr size_t kMaxSize = 256 << 10;

  uint64_t next_offset_ = ~uint64_t{0};  // where a sequential read goes next
  int sequential_ = 0;                   // blocks loaded back to back
  size_t size_ = kInitialSize;           // of the next readahead
  std::unique_ptr<char[]> buf_;
  FileRange range_;
  bool valid_ = false;  // range_ holds bytes read by the last readahead
};

Status Table::Rep::GetBlock(const TableReadOptions& ro,
                            const BlockHandle& handle, BlockKind kind,
                            BlockRef* ref, Readahead* readahead) const {
  Cache* cache = options.block_cache;
  Statistics* stats = options.statistics;
  if (readahead != nullptr) readahead->Observe(handle);
  char key_buf[kCacheKeySize];
  if (cache != nullptr) {
    CacheKey(handle.offset(), key_buf);
    Cache::Handle* h = cache->Lookup(Slice(key_buf, kCacheKeySize));
    if (h != nullptr) {
      Record(stats, kBlockCacheHit);
      Record(stats, kind == BlockKind::kData ? kBlockCacheDataHit
                                             : kBlockCacheIndexHit);
      ref->SetCached(cache, h);
      return Status::OK();
    }
    Record(stats, kBlockCacheMiss);
    Record(stats, kind == BlockKind::kData ? kBlockCacheDataMiss
                                           : kBlockCacheIndexMiss);
  }
  BlockContents contents;
  const FileRange* range = nullptr;
  Status s;
  if (readahead != nullptr) s = readahead->RangeFor(*this, handle, &range);
  if (!s.ok()) return s;
  if (range != nullptr) {
    s = ReadBlockFromRange(*range, file_name, ro, handle, &contents);
    if (s.ok()) Record(stats, kSstBlocksRead);
  } else {
    s = ReadBlockFromFile(ro, handle, &contents);
  }
  if (!s.ok()) return s;
  Block* block = new Block(contents);
  if (cache != nullptr && contents.cachable && block->ok() &&
      (ro.fill_cache || kind == BlockKind::kIndex)) {
    Cache::Handle* h = cache->Insert(Slice(key_buf, kCacheKeySize), block,
                                     BlockCharge(*block), &DeleteCachedBlock);
    Record(stats, kBlockCacheAdd);
    ref->SetCached(cache, h);
  } else {
    ref->SetOwned(block);
  }
  return Status::OK();
}

Table::Table(std::unique_ptr<Rep> rep) : rep_(std::move(rep)) {}

Table::~Table() {
  // Index and filter blocks in the cache are of no use to anyone once the
  // table is closed (their keys carry this table's cache ID): free them now
  // rather than when eviction reaches them. Data blocks are left to
  // eviction; there are too many to look up one by one.
  const Rep* r = rep_.get();
  if (r->cache_index_and_filter) {
    char key_buf[kCacheKeySize];
    r->CacheKey(r->index_handle.offset(), key_buf);
    r->options.block_cache->Erase(Slice(key_buf, kCacheKeySize));
    if (r->has_filter) {
      r->CacheKey(r->filter_handle.offset(), key_buf);
      r->options.block_cache->Erase(Slice(key_buf, kCacheKeySize));
    }
  }
}

Status Table::Open(const TableOptions& options,
                   std::unique_ptr<RandomAccessFile> file, uint64_t file_size,
                   uint64_t file_number, uint64_t global_seqno,
                   const std::string& file_name,
                   std::unique_ptr<Table>* table) {
  table->reset();
  auto rep = std::make_unique<Rep>();
  rep->options = options;
  if (rep->options.comparator == nullptr) {
    rep->options.comparator = BytewiseComparator();
  }
  rep->file = std::move(file);
  rep->file_size = file_size;
  rep->file_number = file_number;
  rep->global_seqno = global_seqno;
  rep->file_name = file_name;
  Cache* cache = rep->options.block_cache;
  rep->cache_index_and_filter =
      cache != nullptr && rep->options.cache_index_and_filter_blocks;
  if (cache != nullptr) rep->cache_id = cache->NewId();

  // Footer.
  if (file_size < Footer::kEncodedLength) {
    return Status::Corruption(
        "file too short to be an SST",
        file_name + " (" + std::to_string(file_size) + " bytes)");
  }
  const uint64_t footer_offset = file_size - Footer::kEncodedLength;
  char footer_space[Footer::kEncodedLength];
  Slice footer_input;
  Status s = rep->file->Read(footer_offset, Footer::kEncodedLength,
                             &footer_input, footer_space);
  if (!s.ok()) {
    return Status::IOError(
        "reading footer",
        BlockErrorContext(file_name, footer_offset) + ": " + s.message());
  }
  if (footer_input.size() != Footer::kEncodedLength) {
    return Status::Corruption("truncated footer read",
                              BlockErrorContext(file_name, footer_offset));
  }
  Footer footer;
  s = footer.DecodeFrom(footer_input);
  if (!s.ok()) {
    const std::string where = BlockErrorContext(file_name, footer_offset);
    return s.IsNotSupported() ? Status::NotSupported(s.message(), where)
                              : Status::Corruption(s.message(), where);
  }
  rep->index_handle = footer.index_handle();

  // The index, properties and metaindex blocks sit together at the end of
  // the file, and the filter and range-deletion blocks right before them:
  // two reads fetch all of them.
  const TableReadOptions verify;  // checksums on
  std::unique_ptr<char[]> tail_buf;
  FileRange tail;
  if (rep->index_handle.offset() < footer_offset) {
    s = rep->ReadRange(rep->index_handle.offset(),
                       footer_offset - rep->index_handle.offset(), &tail_buf,
                       &tail);
    if (!s.ok()) return s;
  }

  // Metaindex: where the meta blocks are.
  std::map<std::string, BlockHandle> meta;
  {
    BlockContents contents;
    s = rep->ReadMetaBlock(verify, tail, footer.metaindex_handle(), &contents);
    if (!s.ok()) return s;
    Block block(contents);
    BlockIter it;
    block.InitIter(BytewiseComparator(), 0, &rep->file_name,
                   footer.metaindex_handle().offset(), &it);
    for (it.SeekToFirst(); it.Valid(); it.Next()) {
      Slice v = it.value();
      BlockHandle h;
      if (!h.DecodeFrom(&v).ok()) {
        return Status::Corruption(
            "bad block handle in metaindex block",
            BlockErrorContext(file_name, footer.metaindex_handle().offset()));
      }
      meta[it.key().ToString()] = h;
    }
    if (!it.status().ok()) return it.status();
  }

  // Properties.
  auto props_it = meta.find(kPropertiesBlockName);
  if (props_it == meta.end()) {
    return Status::Corruption(
        "no properties block",
        BlockErrorContext(file_name, footer.metaindex_handle().offset()));
  }
  {
    BlockContents contents;
    s = rep->ReadMetaBlock(verify, tail, props_it->second, &contents);
    if (!s.ok()) return s;
    Block block(contents);  // frees contents
    s = DecodeTableProperties(Slice(block.data(), block.size()), file_name,
                              props_it->second.offset(), &rep->props);
    if (!s.ok()) return s;
  }
  const char* comparator_name = rep->options.comparator->Name();
  if (rep->props.comparator_name != comparator_name) {
    return Status::InvalidArgument(
        file_name + ": written with comparator " + rep->props.comparator_name,
        std::string("opened with ") + comparator_name);
  }
  rep->data_end = rep->props.data_bytes;

  // Index block: kept by the table, or put in the cache now so that the
  // first lookups do not all miss.
  {
    BlockContents contents;
    s = rep->ReadMetaBlock(verify, tail, rep->index_handle, &contents);
    if (!s.ok()) return s;
    auto index = std::make_unique<Block>(contents);
    if (!index->ok()) {
      return Status::Corruption(
          "bad index block",
          BlockErrorContext(file_name, rep->index_handle.offset()));
    }
    if (rep->cache_index_and_filter) {
      char key_buf[kCacheKeySize];
      rep->CacheKey(rep->index_handle.offset(), key_buf);
      const size_t charge = BlockCharge(*index);
      cache->Release(cache->Insert(Slice(key_buf, kCacheKeySize),
                                   index.release(), charge,
                                   &DeleteCachedBlock));
      Record(rep->options.statistics, kBlockCacheAdd);
    } else {
      rep->index_block = std::move(index);
    }
  }
  tail_buf.reset();

  // Filter and range-deletion blocks: between the data and the index.
  const FilterPolicy* policy = rep->options.filter_policy;
  auto filter_it = meta.end();
  if (policy != nullptr) {
    filter_it = meta.find(std::string(kFilterBlockPrefix) + policy->Name());
  }
  auto rd = meta.find(kRangeDelBlockName);
  FileRange middle;
  std::unique_ptr<char[]> middle_buf;
  if ((filter_it != meta.end() || rd != meta.end()) &&
      rep->data_end < rep->index_handle.offset()) {
    s = rep->ReadRange(rep->data_end,
                       rep->index_handle.offset() - rep->data_end, &middle_buf,
                       &middle);
    if (!s.ok()) return s;
  }

  // Filter: only if it was built by the policy we were given.
  if (filter_it != meta.end()) {
    rep->has_filter = true;
    rep->filter_handle = filter_it->second;
    std::unique_ptr<FilterData> filter;
    s = rep->LoadFilter(verify, &middle, &filter);
    if (!s.ok()) return s;
    if (rep->cache_index_and_filter) {
      char key_buf[kCacheKeySize];
      rep->CacheKey(rep->filter_handle.offset(), key_buf);
      const size_t charge = filter->Charge();
      cache->Release(cache->Insert(Slice(key_buf, kCacheKeySize),
                                   filter.release(), charge,
                                   &DeleteCachedFilter));
      Record(rep->options.statistics, kBlockCacheAdd);
    } else {
      rep->filter = std::move(filter);
    }
  }

  // Range tombstones are few; the table keeps them.
  if (rd != meta.end()) {
    BlockContents contents;
    s = rep->ReadMetaBlock(verify, middle, rd->second, &contents);
    if (!s.ok()) return s;
    rep->range_del_block = std::make_unique<Block>(contents);
    rep->range_del_offset = rd->second.offset();
    if (!rep->range_del_block->ok()) {
      return Status::Corruption(
          "bad range deletion block",
          BlockErrorContext(file_name, rd->second.offset()));
    }
  }

  table->reset(new Table(std::move(rep)));
  return Status::OK();
}

// The table's iterator: a two-level walk (index block -> data blocks)
// specialized for tables. Both levels are BlockIters held by value and
// re-pointed block after block, so moving from one data block to the next
// costs a cache lookup and no allocation, and every step is a direct (not
// virtual) call. Errors stop the iteration (see two_level_iterator.h).
class TableIterator final : public Iterator {
 public:
  TableIterator(const Table::Rep* rep, const TableReadOptions& options)
      : rep_(rep), options_(options) {}

  // Pins the index block. Must succeed before the iterator is used.
  Status Init() {
    Status s = rep_->GetIndexBlock(options_, &index_ref_);
    if (s.ok()) {
      index_ref_.block()->InitIter(rep_->options.comparator, rep_->global_seqno,
                                   &rep_->file_name,
                                   rep_->index_handle.offset(), &index_iter_);
    }
    return s;
  }

  bool Valid() const override { return has_data_ && data_iter_.Valid(); }
  Slice key() const override { return data_iter_.key(); }
  Slice value() const override { return data_iter_.value(); }
  Status status() const override { return status_; }

  void Seek(const Slice& target) override {
    status_ = Status::OK();
    index_iter_.Seek(target);
    if (LoadDataBlock()) data_iter_.Seek(target);
    SkipEmptyBlocksForward();
  }

  void SeekToFirst() override {
    status_ = Status::OK();
    index_iter_.SeekToFirst();
    if (LoadDataBlock()) data_iter_.SeekToFirst();
    SkipEmptyBlocksForward();
  }

  void SeekToLast() override {
    status_ = Status::OK();
    index_iter_.SeekToLast();
    if (LoadDataBlock()) data_iter_.SeekToLast();
    SkipEmptyBlocksBackward();
  }

  void Next() override {
    assert(Valid());
    data_iter_.Next();
    if (!data_iter_.Valid()) SkipEmptyBlocksForward();
  }

  void Prev() override {
    assert(Valid());
    data_iter_.Prev();
    if (!data_iter_.Valid()) SkipEmptyBlocksBackward();
  }

 private:
  static constexpr uint64_t kNoBlock = ~uint64_t{0};

  // Points data_iter_ at the block the index entry names (keeping it if it
  // is already there). False, with has_data_ cleared, at the end of the
  // index or on an error (then status_ is set).
  bool LoadDataBlock() {
    if (!index_iter_.Valid()) {
      if (!index_iter_.status().ok()) status_ = index_iter_.status();
      DropDataBlock();
      return false;
    }
    BlockHandle handle;
    Slice v = index_iter_.value();
    if (!handle.DecodeFrom(&v).ok()) {
      status_ = rep_->CorruptHandle(rep_->index_handle.offset());
      DropDataBlock();
      return false;
    }
    if (has_data_ && handle.offset() == data_offset_) return true;
    DropDataBlock();
    Status s = rep_->GetBlock(options_, handle, BlockKind::kData, &data_ref_,
                              &readahead_);
    if (!s.ok()) {
      status_ = s;
      return false;
    }
    data_ref_.block()->InitIter(rep_->options.comparator, rep_->global_seqno,
                                &rep_->file_name, handle.offset(), &data_iter_);
    data_offset_ = handle.offset();
    has_data_ = true;
    return true;
  }

  void DropDataBlock() {
    data_ref_.Reset();
    data_offset_ = kNoBlock;
    has_data_ = false;
  }

  // True (after dropping the block) if the current data block failed.
  bool DataBlockFailed() {
    if (has_data_ && !data_iter_.status().ok()) {
      status_ = data_iter_.status();
      DropDataBlock();
      return true;
    }
    return false;
  }

  void SkipEmptyBlocksForward() {
    while (!has_data_ || !data_iter_.Valid()) {
      if (!status_.ok() || DataBlockFailed() || !index_iter_.Valid()) {
        DropDataBlock();
        return;
      }
      index_iter_.Next();
      if (LoadDataBlock()) data_iter_.SeekToFirst();
    }
  }

  void SkipEmptyBlocksBackward() {
    while (!has_data_ || !data_iter_.Valid()) {
      if (!status_.ok() || DataBlockFailed() || !index_iter_.Valid()) {
        DropDataBlock();
        return;
      }
      index_iter_.Prev();
      if (LoadDataBlock()) data_iter_.SeekToLast();
    }
  }

  const Table::Rep* const rep_;
  const TableReadOptions options_;
  Readahead readahead_;
  BlockRef index_ref_;
  BlockIter index_iter_;
  BlockRef data_ref_;
  BlockIter data_iter_;
  bool has_data_ = false;  // data_iter_ is on the block at data_offset_
  uint64_t data_offset_ = kNoBlock;
  Status status_;  // the first error since the last Seek*
};

Iterator* Table::NewIterator(const TableReadOptions& options) const {
  auto* iter = new TableIterator(rep_.get(), options);
  Status s = iter->Init();
  if (!s.ok()) {
    delete iter;
    return NewErrorIterator(s);
  }
  return iter;
}

Iterator* Table::NewRangeTombstoneIterator(
    const TableReadOptions& /*options*/) const {
  const Rep* r = rep_.get();
  if (r->range_del_block == nullptr) return NewEmptyIterator();
  return r->range_del_block->NewIterator(r->options.comparator, r->global_seqno,
                                         &r->file_name, r->range_del_offset);
}

Status Table::Get(const TableReadOptions& options, const Slice& key, void* arg,
                  TableGetCallback callback) const {
  const Rep* r = rep_.get();
  if (r->has_filter) {
    FilterRef filter;
    Status s = r->GetFilter(options, &filter);
    if (!s.ok()) return s;
    Record(r->options.statistics, kBloomFilterChecked);
    const FilterPolicy* policy = r->options.filter_policy;
    if (!policy->KeyMayMatch(policy->FilterKey(key), filter.filter())) {
      Record(r->options.statistics, kBloomFilterUseful);
      return Status::OK();
    }
  }

  BlockRef index;
  Status s = r->GetIndexBlock(options, &index);
  if (!s.ok()) return s;
  BlockIter index_iter;
  index.block()->InitIter(r->options.comparator, r->global_seqno, &r->file_name,
                          r->index_handle.offset(), &index_iter);
  BlockRef data;
  BlockIter data_iter;
  for (index_iter.Seek(key); index_iter.Valid(); index_iter.Next()) {
    BlockHandle handle;
    Slice v = index_iter.value();
    if (!handle.DecodeFrom(&v).ok()) {
      return r->CorruptHandle(r->index_handle.offset());
    }
    s = r->GetBlock(options, handle, BlockKind::kData, &data);
    if (!s.ok()) return s;
    data.block()->InitIter(r->options.comparator, r->global_seqno,
                           &r->file_name, handle.offset(), &data_iter);
    data_iter.Seek(key);
    if (data_iter.Valid()) {
      (*callback)(arg, 0, data_iter.key(), data_iter.value());
      return Status::OK();
    }
    if (!data_iter.status().ok()) return data_iter.status();
    // key is after the block's last key but not after its separator: the
    // first entry at or after key starts the next block.
  }
  return index_iter.status();
}

Status Table::MultiGet(const TableReadOptions& options, size_t n,
                       const Slice* keys, void* arg, TableGetCallback callback,
                       Status* statuses) const {
  const Rep* r = rep_.get();
  const Comparator* cmp = r->options.comparator;
  for (size_t i = 0; i < n; i++) statuses[i] = Status::OK();
  if (n == 0) return Status::OK();

  auto fail_all = [&](const Status& s) {
    for (size_t i = 0; i < n; i++) statuses[i] = s;
    return s;
  };

  FilterRef filter;
  if (r->has_filter) {
    Status s = r->GetFilter(options, &filter);
    if (!s.ok()) return fail_all(s);
  }
  BlockRef index;
  Status s = r->GetIndexBlock(options, &index);
  if (!s.ok()) return fail_all(s);

  BlockIter index_iter;
  index.block()->InitIter(cmp, r->global_seqno, &r->file_name,
                          r->index_handle.offset(), &index_iter);
  BlockRef data;
  BlockIter data_iter;
  uint64_t data_offset = ~uint64_t{0};  // offset of the block in data
  Status first_error;

  // Keys are filtered in chunks: all of a chunk's filter lines are fetched
  // together (prefetched) before any data block is touched.
  constexpr size_t kChunk = 32;
  Slice filter_keys[kChunk];
  bool may_match[kChunk];
  const FilterPolicy* policy = r->options.filter_policy;
  for (size_t base = 0; base < n; base += kChunk) {
    const size_t m = std::min(kChunk, n - base);
    if (r->has_filter) {
      for (size_t i = 0; i < m; i++) {
        filter_keys[i] = policy->FilterKey(keys[base + i]);
      }
      policy->KeysMayMatch(filter_keys, static_cast<int>(m), filter.filter(),
                           may_match);
      size_t useful = 0;
      for (size_t i = 0; i < m; i++) useful += may_match[i] ? 0 : 1;
      Record(r->options.statistics, kBloomFilterChecked, m);
      Record(r->options.statistics, kBloomFilterUseful, useful);
    } else {
      std::fill(may_match, may_match + m, true);
    }

    for (size_t i = 0; i < m; i++) {
      if (!may_match[i]) continue;
      const size_t k = base + i;
      const Slice& key = keys[k];
      // Keys are sorted: every block before the index position holds only
      // entries < the previous key <= key, so the index needs re-seeking
      // only when key is past the current separator.
      if (!index_iter.Valid() || cmp->Compare(key, index_iter.key()) > 0) {
        if (!index_iter.status().ok()) break;
        index_iter.Seek(key);
      }
      Status ks;
      for (; index_iter.Valid(); index_iter.Next()) {
        BlockHandle handle;
        Slice v = index_iter.value();
        if (!handle.DecodeFrom(&v).ok()) {
          ks = r->CorruptHandle(r->index_handle.offset());
          break;
        }
        if (handle.offset() != data_offset) {
          // One read per data block for all the keys that fall in it.
          data_offset = ~uint64_t{0};
          ks = r->GetBlock(options, handle, BlockKind::kData, &data);
          if (!ks.ok()) break;
          data_offset = handle.offset();
          data.block()->InitIter(cmp, r->global_seqno, &r->file_name,
                                 handle.offset(), &data_iter);
        }
        data_iter.Seek(key);
        if (data_iter.Valid()) {
          (*callback)(arg, k, data_iter.key(), data_iter.value());
          break;
        }
        if (!data_iter.status().ok()) {
          ks = data_iter.status();
          data_offset = ~uint64_t{0};
          break;
        }
      }
      if (ks.ok() && !index_iter.status().ok()) ks = index_iter.status();
      if (!ks.ok()) {
        statuses[k] = ks;
        if (first_error.ok()) first_error = ks;
      }
    }
    if (!index_iter.status().ok()) {
      // The index itself is bad: nothing after this can be answered.
      for (size_t k = base; k < n; k++) {
        if (statuses[k].ok()) statuses[k] = index_iter.status();
      }
      if (first_error.ok()) first_error = index_iter.status();
      break;
    }
  }
  return first_error;
}

uint64_t Table::ApproximateOffsetOf(const Slice& key) const {
  const Rep* r = rep_.get();
  BlockRef index;
  if (!r->GetIndexBlock(TableReadOptions(), &index).ok()) return r->data_end;
  BlockIter it;
  index.block()->InitIter(r->options.comparator, r->global_seqno, &r->file_name,
                          r->index_handle.offset(), &it);
  it.Seek(key);
  if (it.Valid()) {
    BlockHandle handle;
    Slice v = it.value();
    if (handle.DecodeFrom(&v).ok()) return handle.offset();
  }
  // Past the last key (or a damaged index): the end of the data.
  return r->data_end;
}

const TableProperties& Table::properties() const { return rep_->props; }

size_t Table::ApproximateMemoryUsage() const {
  const Rep* r = rep_.get();
  size_t usage = sizeof(Rep) + r->file_name.size();
  if (r->index_block != nullptr) usage += r->index_block->size();
  if (r->filter != nullptr) usage += r->filter->size;
  if (r->range_del_block != nullptr) usage += r->range_del_block->size();
  return usage;
}

}  // namespace shale
