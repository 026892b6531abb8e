// Reading an SST: Open, point and batched lookups, and the entry points
// of iteration (the iterator itself is in table_iterator.h).

#include "table/table.h"

#include <algorithm>
#include <map>

#include "table/block.h"
#include "table/filter_policy.h"
#include "table/format.h"
#include "table/pinned_block.h"
#include "table/table_iterator.h"
#include "table/table_properties.h"
#include "table/table_rep.h"
#include "util/cache.h"
#include "util/comparator.h"
#include "util/env.h"
#include "util/statistics.h"

namespace shale {

Table::Table(std::unique_ptr<Rep> rep) : rep_(std::move(rep)) {
  has_filter_ = rep_->has_filter;
  if (rep_->filter != nullptr) {
    held_policy_ = rep_->options.filter_policy;
    held_filter_ = rep_->filter->slice();
    if (held_policy_->ProbesCacheLineBloom()) {
      held_bloom_ = bloom::ParseFilter(held_filter_);
    }
  }
  stats_ = rep_->options.statistics;
  if (rep_->index_block != nullptr) {
    index_windows_.Build(*rep_->index_block, rep_->options.comparator);
  }
}

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
    rep->file_is_mapped = tail.file_owned;
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
  rep->compressed = rep->props.compression_name != "none" &&
                    !rep->props.compression_name.empty();

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

Status Table::KeyMayMatch(const TableReadOptions& options, const Slice& key,
                          bool* may_match) const {
  const Rep* r = rep_.get();
  *may_match = true;
  if (!r->has_filter) return Status::OK();
  FilterRef filter;
  Status s = r->GetFilter(options, &filter);
  if (!s.ok()) return s;
  Record(r->options.statistics, kBloomFilterChecked);
  const FilterPolicy* policy = r->options.filter_policy;
  if (!policy->KeyMayMatch(policy->FilterKey(key), filter.filter())) {
    Record(r->options.statistics, kBloomFilterUseful);
    *may_match = false;
  }
  return Status::OK();
}

Status Table::Get(const TableReadOptions& options, const Slice& key, void* arg,
                  TableGetCallback callback, FilterProbe* probe) const {
  const Rep* r = rep_.get();
  if (r->has_filter) {
    FilterRef filter;
    if (r->filter != nullptr) {
      filter.SetBorrowed(r->filter->slice());  // GetFilter without the call
    } else {
      Status fs = r->GetFilter(options, &filter);
      if (!fs.ok()) return fs;
    }
    Record(r->options.statistics, kBloomFilterChecked);
    const FilterPolicy* policy = r->options.filter_policy;
    FilterProbe local;
    if (probe == nullptr) probe = &local;
    if (probe->policy != policy) {
      probe->policy = policy;
      probe->by_hash =
          policy->PrepareProbe(policy->FilterKey(key), &probe->hash);
    }
    const bool may_match =
        probe->by_hash
            ? policy->ProbeMayMatch(probe->hash, filter.filter())
            : policy->KeyMayMatch(policy->FilterKey(key), filter.filter());
    if (!may_match) {
      Record(r->options.statistics, kBloomFilterUseful);
      return Status::OK();
    }
  }
  return GetPastFilter(options, key, arg, callback);
}

Status Table::GetPastFilter(const TableReadOptions& options, const Slice& key,
                            void* arg, TableGetCallback callback) const {
  const Rep* r = rep_.get();
  BlockRef index;
  Status s = r->GetIndexBlock(options, &index);
  if (!s.ok()) return s;
  BlockIter index_iter;
  index.block()->InitIter(r->options.comparator, r->global_seqno, &r->file_name,
                          r->index_handle.offset(), &index_iter);
  BlockRef data;
  BlockIter data_iter;
  index_windows_.Seek(&index_iter, key);
  for (; index_iter.Valid(); index_iter.Next()) {
    BlockHandle handle;
    Slice v = index_iter.value();
    if (!handle.Decode(&v)) {
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
                       Status* statuses, FilterProbe* const* probes,
                       bool filter_tested) const {
  const Rep* r = rep_.get();
  const Comparator* cmp = r->options.comparator;
  for (size_t i = 0; i < n; i++) statuses[i] = Status::OK();
  if (n == 0) return Status::OK();

  auto fail_all = [&](const Status& s) {
    for (size_t i = 0; i < n; i++) statuses[i] = s;
    return s;
  };

  const bool use_filter = r->has_filter && !filter_tested;
  FilterRef filter;
  if (!use_filter) {
    // No filter, or the caller tested it (TestFilters).
  } else if (r->filter != nullptr) {
    filter.SetBorrowed(r->filter->slice());
  } else {
    Status s = r->GetFilter(options, &filter);
    if (!s.ok()) return fail_all(s);
  }
  // The index is set up for the first key the filter lets through: most
  // batches a table sees from a MultiGet of random keys are one or two keys
  // that its filter rules out.
  BlockRef index;
  BlockIter index_iter;
  bool have_index = false;
  BlockRef data;
  BlockIter data_iter;
  uint64_t data_offset = ~uint64_t{0};  // offset of the block in data
  Status first_error;

  // Keys are filtered in chunks: all of a chunk's filter lines are fetched
  // together (prefetched) before any data block is touched.
  constexpr size_t kChunk = 32;
  Slice filter_keys[kChunk];
  uint64_t hashes[kChunk];
  bool may_match[kChunk];
  const FilterPolicy* policy = r->options.filter_policy;
  for (size_t base = 0; base < n; base += kChunk) {
    const size_t m = std::min(kChunk, n - base);
    if (use_filter) {
      // By hash when every key's probe is (or can be) prepared by this
      // table's policy: keys carried over from another table are not hashed
      // again.
      bool by_hash = probes != nullptr;
      for (size_t i = 0; by_hash && i < m; i++) {
        FilterProbe* p = probes[base + i];
        if (p->policy != policy) {
          p->policy = policy;
          p->by_hash =
              policy->PrepareProbe(policy->FilterKey(keys[base + i]), &p->hash);
        }
        by_hash = p->by_hash;
        hashes[i] = p->hash;
      }
      if (by_hash) {
        policy->ProbesMayMatch(hashes, static_cast<int>(m), filter.filter(),
                               may_match);
      } else {
        for (size_t i = 0; i < m; i++) {
          filter_keys[i] = policy->FilterKey(keys[base + i]);
        }
        policy->KeysMayMatch(filter_keys, static_cast<int>(m), filter.filter(),
                             may_match);
      }
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
      if (!have_index) {
        // No key has been answered yet: an error fails them all.
        Status s = r->GetIndexBlock(options, &index);
        if (!s.ok()) return fail_all(s);
        index.block()->InitIter(cmp, r->global_seqno, &r->file_name,
                                r->index_handle.offset(), &index_iter);
        have_index = true;
      }
      // Keys are sorted: every block before the index position holds only
      // entries < the previous key <= key, so the index needs re-seeking
      // only when key is past the current separator.
      if (!index_iter.Valid() ||
          CompareInline(cmp, key, index_iter.key()) > 0) {
        if (!index_iter.status().ok()) break;
        index_windows_.Seek(&index_iter, key);
      }
      Status ks;
      for (; index_iter.Valid(); index_iter.Next()) {
        BlockHandle handle;
        Slice v = index_iter.value();
        if (!handle.Decode(&v)) {
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

bool Table::TestFilters(size_t n, const Slice* keys, FilterProbe* const* probes,
                        bool* may_match) const {
  if (!has_filter_) {
    std::fill(may_match, may_match + n, true);
    return true;
  }
  if (held_policy_ == nullptr) return false;
  const FilterPolicy* policy = held_policy_;
  constexpr size_t kChunk = 32;
  uint64_t hashes[kChunk];
  for (size_t base = 0; base < n; base += kChunk) {
    const size_t m = std::min(kChunk, n - base);
    for (size_t i = 0; i < m; i++) {
      FilterProbe* p = probes[base + i];
      if (p->policy != policy) {
        p->policy = policy;
        p->by_hash =
            policy->PrepareProbe(policy->FilterKey(keys[base + i]), &p->hash);
      }
      // One policy: by_hash is the same for every key.
      if (!p->by_hash) return false;
      hashes[i] = p->hash;
    }
    if (held_bloom_.usable && held_bloom_.num_lines > 0) {
      // Inline, as the policy would: every line prefetched, then tested.
      for (size_t i = 0; i < m; i++) {
        __builtin_prefetch(bloom::ProbeLine(held_bloom_, hashes[i]));
      }
      for (size_t i = 0; i < m; i++) {
        may_match[base + i] = bloom::ProbeMayMatch(held_bloom_, hashes[i]);
      }
    } else {
      policy->ProbesMayMatch(hashes, static_cast<int>(m), held_filter_,
                             may_match + base);
    }
    size_t useful = 0;
    for (size_t i = 0; i < m; i++) useful += may_match[base + i] ? 0 : 1;
    Record(stats_, kBloomFilterChecked, m);
    Record(stats_, kBloomFilterUseful, useful);
  }
  return true;
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
  usage += index_windows_.MemoryUsage();
  if (r->filter != nullptr) usage += r->filter->size;
  if (r->range_del_block != nullptr) usage += r->range_del_block->size();
  return usage;
}

}  // namespace shale
