// Writes the layout described in table/format.h: data blocks as keys
// arrive, then the filter, range-deletion, index, properties and metaindex
// blocks, then the footer.

#include "table/table_builder.h"

#include <snappy.h>

#include <algorithm>
#include <cassert>
#include <utility>
#include <vector>

#include "table/block_builder.h"
#include "table/filter_policy.h"
#include "table/format.h"
#include "table/table.h"
#include "table/table_properties.h"
#include "util/coding.h"
#include "util/comparator.h"
#include "util/crc32c.h"
#include "util/env.h"

namespace shale {

struct TableBuilder::Rep {
  Rep(const TableOptions& opt, WritableFile* f)
      : options(opt),
        file(f),
        data_block(std::max(1, opt.block_restart_interval)),
        index_block(1) {}

  TableOptions options;
  WritableFile* file;
  uint64_t offset = 0;
  Status status;
  BlockBuilder data_block;
  BlockBuilder index_block;
  std::string last_key;
  bool closed = false;  // Finish() or Abandon() called

  // The index entry for a data block is added only once the next block's
  // first key is known, so that the separator can be as short as possible:
  // for a block ending in "the quick brown fox" followed by one starting
  // with "the who", "the r" separates them. pending_handle is the last
  // flushed block's handle while pending_index_entry.
  bool pending_index_entry = false;
  BlockHandle pending_handle;

  std::string compressed;  // scratch for snappy output

  // Filter keys of the whole file, concatenated (the filter is built at
  // Finish; consecutive duplicates - one user key, many versions - are
  // stored once).
  std::string filter_keys;
  std::vector<size_t> filter_key_starts;

  std::vector<std::pair<std::string, std::string>> tombstones;
  TableProperties props;
};

TableBuilder::TableBuilder(const TableOptions& options, WritableFile* file)
    : rep_(std::make_unique<Rep>(options, file)) {
  if (rep_->options.comparator == nullptr) {
    rep_->options.comparator = BytewiseComparator();
  }
  if (options.block_restart_interval < 1) {
    rep_->status = Status::InvalidArgument(
        "TableOptions::block_restart_interval must be >= 1");
  }
}

TableBuilder::~TableBuilder() {
  assert(rep_->closed);  // catch a caller that forgot Finish() or Abandon()
}

namespace {

// Blocks address their entries with 32-bit offsets, and a block holds its
// entries up to block_size plus one more: one entry of at most 2 GiB keeps
// every block under 4 GiB whatever the block size.
constexpr uint64_t kMaxEntrySize = uint64_t{1} << 31;

}  // namespace

void TableBuilder::Add(const Slice& key, const Slice& value) {
  Rep* r = rep_.get();
  assert(!r->closed);
  if (!r->status.ok()) return;
  if (key.size() + value.size() > kMaxEntrySize ||
      r->options.block_size > kMaxEntrySize) {
    r->status = Status::InvalidArgument(
        "TableBuilder::Add: key plus value (or block_size) over 2 GiB");
    return;
  }
  if (r->props.num_entries > 0 &&
      r->options.comparator->Compare(key, r->last_key) <= 0) {
    // A caller bug that would make a file no reader can search.
    r->status = Status::InvalidArgument(
        "TableBuilder::Add: keys out of order or repeated");
    return;
  }

  if (r->pending_index_entry) {
    assert(r->data_block.empty());
    r->options.comparator->FindShortestSeparator(&r->last_key, key);
    std::string handle_encoding;
    r->pending_handle.EncodeTo(&handle_encoding);
    r->index_block.Add(r->last_key, handle_encoding);
    r->pending_index_entry = false;
  }

  if (r->options.filter_policy != nullptr) {
    const Slice fkey = r->options.filter_policy->FilterKey(key);
    const bool repeat =
        !r->filter_key_starts.empty() &&
        Slice(r->filter_keys.data() + r->filter_key_starts.back(),
              r->filter_keys.size() - r->filter_key_starts.back()) == fkey;
    if (!repeat) {
      r->filter_key_starts.push_back(r->filter_keys.size());
      r->filter_keys.append(fkey.data(), fkey.size());
    }
  }

  r->last_key.assign(key.data(), key.size());
  r->props.num_entries++;
  r->props.raw_key_bytes += key.size();
  r->props.raw_value_bytes += value.size();
  r->data_block.Add(key, value);

  if (r->data_block.CurrentSizeEstimate() >= r->options.block_size) {
    Flush();
  }
}

void TableBuilder::Flush() {
  Rep* r = rep_.get();
  if (!r->status.ok() || r->data_block.empty()) return;
  assert(!r->pending_index_entry);
  const uint64_t before = r->offset;
  WriteBlock(&r->data_block, &r->pending_handle);
  if (r->status.ok()) {
    r->pending_index_entry = true;
    r->props.num_data_blocks++;
    r->props.data_bytes += r->offset - before;
  }
}

void TableBuilder::WriteBlock(BlockBuilder* block, BlockHandle* handle) {
  Rep* r = rep_.get();
  const Slice raw = block->Finish();
  Slice contents = raw;
  CompressionType type = kNoCompression;
  if (r->options.compression == kSnappyCompression) {
    r->compressed.resize(snappy::MaxCompressedLength(raw.size()));
    size_t length = 0;
    snappy::RawCompress(raw.data(), raw.size(), r->compressed.data(), &length);
    // Keep the compressed form only if it saves at least 1/8: below that,
    // decompressing on every read costs more than the bytes saved.
    if (length < raw.size() - raw.size() / 8) {
      contents = Slice(r->compressed.data(), length);
      type = kSnappyCompression;
    }
  }
  WriteRawBlock(contents, type, handle);
  block->Reset();
}

void TableBuilder::WriteRawBlock(const Slice& contents, CompressionType type,
                                 BlockHandle* handle) {
  Rep* r = rep_.get();
  handle->set_offset(r->offset);
  handle->set_size(contents.size());
  r->status = r->file->Append(contents);
  if (!r->status.ok()) return;
  char trailer[kBlockTrailerSize];
  trailer[0] = static_cast<char>(type);
  uint32_t crc = crc32c::Value(contents.data(), contents.size());
  crc = crc32c::Extend(crc, trailer, 1);  // cover the type byte too
  EncodeFixed32(trailer + 1, crc32c::Mask(crc));
  r->status = r->file->Append(Slice(trailer, kBlockTrailerSize));
  if (r->status.ok()) r->offset += contents.size() + kBlockTrailerSize;
}

void TableBuilder::AddRangeTombstone(const Slice& start, const Slice& end) {
  Rep* r = rep_.get();
  assert(!r->closed);
  if (!r->status.ok()) return;
  if (start.size() + end.size() > kMaxEntrySize) {
    r->status = Status::InvalidArgument(
        "TableBuilder::AddRangeTombstone: keys over 2 GiB");
    return;
  }
  r->tombstones.emplace_back(start.ToString(), end.ToString());
}

void TableBuilder::SetUserProperty(const std::string& name,
                                   const std::string& value) {
  rep_->props.user_properties[name] = value;
}

Status TableBuilder::Finish() {
  Rep* r = rep_.get();
  assert(!r->closed);
  Flush();
  r->closed = true;
  if (!r->status.ok()) return r->status;

  std::map<std::string, std::string> meta;  // name -> encoded handle
  auto add_meta = [&meta](const std::string& name, const BlockHandle& h) {
    std::string encoding;
    h.EncodeTo(&encoding);
    meta[name] = std::move(encoding);
  };

  // Filter block: never compressed (a Bloom filter is random bits).
  if (r->options.filter_policy != nullptr) {
    std::vector<Slice> keys;
    keys.reserve(r->filter_key_starts.size());
    for (size_t i = 0; i < r->filter_key_starts.size(); i++) {
      const size_t start = r->filter_key_starts[i];
      const size_t limit = i + 1 < r->filter_key_starts.size()
                               ? r->filter_key_starts[i + 1]
                               : r->filter_keys.size();
      keys.emplace_back(r->filter_keys.data() + start, limit - start);
    }
    std::string filter;
    r->options.filter_policy->CreateFilter(
        keys.data(), static_cast<int>(keys.size()), &filter);
    std::string().swap(r->filter_keys);  // free memory early
    BlockHandle handle;
    WriteRawBlock(filter, kNoCompression, &handle);
    if (!r->status.ok()) return r->status;
    r->props.filter_bytes = filter.size();
    r->props.filter_policy_name = r->options.filter_policy->Name();
    add_meta(kFilterBlockPrefix + r->props.filter_policy_name, handle);
  }

  // Range-deletion block, sorted by start key (stable, so equal starts keep
  // the order they were added in).
  if (!r->tombstones.empty()) {
    const Comparator* cmp = r->options.comparator;
    std::stable_sort(r->tombstones.begin(), r->tombstones.end(),
                     [cmp](const auto& a, const auto& b) {
                       return cmp->Compare(a.first, b.first) < 0;
                     });
    BlockBuilder block(1);
    for (const auto& [start, end] : r->tombstones) block.Add(start, end);
    BlockHandle handle;
    WriteBlock(&block, &handle);
    if (!r->status.ok()) return r->status;
    r->props.num_range_tombstones = r->tombstones.size();
    add_meta(kRangeDelBlockName, handle);
  }

  // Index block: the last data block's entry uses a short successor of its
  // last key as separator.
  if (r->pending_index_entry) {
    r->options.comparator->FindShortSuccessor(&r->last_key);
    std::string handle_encoding;
    r->pending_handle.EncodeTo(&handle_encoding);
    r->index_block.Add(r->last_key, handle_encoding);
    r->pending_index_entry = false;
  }
  BlockHandle index_handle;
  const uint64_t index_start = r->offset;
  WriteBlock(&r->index_block, &index_handle);
  if (!r->status.ok()) return r->status;
  r->props.index_bytes = r->offset - index_start;

  // Properties block.
  r->props.comparator_name = r->options.comparator->Name();
  r->props.compression_name = CompressionTypeName(r->options.compression);
  {
    std::string encoded;
    EncodeTableProperties(r->props, &encoded);
    BlockHandle handle;
    WriteRawBlock(encoded, kNoCompression, &handle);
    if (!r->status.ok()) return r->status;
    add_meta(kPropertiesBlockName, handle);
  }

  // Metaindex block: meta block name -> handle, in name order.
  BlockHandle metaindex_handle;
  {
    BlockBuilder block(1);
    for (const auto& [name, handle] : meta) block.Add(name, handle);
    WriteRawBlock(block.Finish(), kNoCompression, &metaindex_handle);
    if (!r->status.ok()) return r->status;
  }

  Footer footer;
  footer.set_metaindex_handle(metaindex_handle);
  footer.set_index_handle(index_handle);
  std::string encoded;
  footer.EncodeTo(&encoded);
  r->status = r->file->Append(encoded);
  if (r->status.ok()) r->offset += encoded.size();
  return r->status;
}

void TableBuilder::Abandon() {
  assert(!rep_->closed);
  rep_->closed = true;
}

Status TableBuilder::status() const { return rep_->status; }

uint64_t TableBuilder::NumEntries() const { return rep_->props.num_entries; }

uint64_t TableBuilder::NumRangeTombstones() const {
  return rep_->tombstones.size();
}

uint64_t TableBuilder::FileSize() const { return rep_->offset; }

}  // namespace shale
