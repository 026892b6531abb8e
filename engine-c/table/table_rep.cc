#include "table/table_rep.h"

#include <algorithm>

#include "util/cache.h"
#include "util/statistics.h"

namespace shale {

Status Table::Rep::ReadBlockFromFile(const TableReadOptions& ro,
                                     const BlockHandle& handle,
                                     BlockContents* contents) const {
  // A compressed block is decompressed into a new buffer: its stored bytes
  // are read onto the stack, not into a buffer of their own.
  constexpr size_t kScratchSize = 8 << 10;
  char scratch[kScratchSize];
  Status s = compressed ? ReadBlock(file.get(), file_size, file_name, ro,
                                    handle, contents, scratch, kScratchSize)
                        : ReadBlock(file.get(), file_size, file_name, ro,
                                    handle, contents);
  if (s.ok()) {
    Record(options.statistics, kSstBytesRead,
           handle.size() + kBlockTrailerSize);
    Record(options.statistics, kSstBlocksRead);
  }
  return s;
}

Status Table::Rep::ReadRange(uint64_t offset, uint64_t size,
                             std::unique_ptr<char[]>* buf,
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

Status Table::Rep::ReadMetaBlock(const TableReadOptions& ro,
                                 const FileRange& range,
                                 const BlockHandle& handle,
                                 BlockContents* contents) const {
  if (range.Contains(handle)) {
    return ReadBlockFromRange(range, file_name, ro, handle, contents);
  }
  return ReadBlockFromFile(ro, handle, contents);
}

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

Status Table::Rep::GetIndexBlock(const TableReadOptions& ro,
                                 BlockRef* ref) const {
  if (index_block != nullptr) {
    ref->SetBorrowed(index_block.get());
    return Status::OK();
  }
  return GetBlock(ro, index_handle, BlockKind::kIndex, ref);
}

Status Table::Rep::LoadFilter(const TableReadOptions& ro,
                              const FileRange* range,
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

Status Table::Rep::GetFilter(const TableReadOptions& ro, FilterRef* ref) const {
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

Status Readahead::RangeFor(const Table::Rep& rep, const BlockHandle& handle,
                           const FileRange** range) {
  *range = nullptr;
  if (rep.file_is_mapped) return Status::OK();
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

}  // namespace shale
