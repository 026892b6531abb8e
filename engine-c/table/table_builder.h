// TableBuilder writes one immutable SST file (block-based table; the layout
// is in table/format.h and docs/sst-format.md).
//
// Keys are added in strictly increasing comparator order. Range tombstones
// are kept in their own meta block and may be added in any order.
//
// Thread safety: one thread at a time.

#ifndef SHALE_TABLE_TABLE_BUILDER_H_
#define SHALE_TABLE_TABLE_BUILDER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "table/options.h"
#include "util/slice.h"
#include "util/status.h"

namespace shale {

class BlockBuilder;
class BlockHandle;
class WritableFile;

class TableBuilder {
 public:
  // Writes to *file, which must stay open until Finish() or Abandon(). The
  // builder does not close or sync it.
  TableBuilder(const TableOptions& options, WritableFile* file);
  TableBuilder(const TableBuilder&) = delete;
  TableBuilder& operator=(const TableBuilder&) = delete;
  // REQUIRES: Finish() or Abandon() has been called.
  ~TableBuilder();

  // REQUIRES: key is after every key added so far; Finish/Abandon not called.
  // A key that is not (or a key plus value over 2 GiB) is not added: it
  // sets status() to InvalidArgument, and the builder adds nothing more.
  void Add(const Slice& key, const Slice& value);

  // Records a range tombstone: start is a table key (for the engine, an
  // internal key carrying the tombstone's sequence number), end an
  // exclusive user key bound. Stored in the range-deletion meta block,
  // sorted by start.
  void AddRangeTombstone(const Slice& start, const Slice& end);

  // Adds a string property stored in the properties block (the engine's
  // own metadata, e.g. sequence-number bounds). Later values win.
  void SetUserProperty(const std::string& name, const std::string& value);

  // Writes the filter, range-deletion, properties and index blocks and the
  // footer. Returns the first error met while building, if any.
  Status Finish();

  // Stops building; whatever was written is to be deleted by the caller.
  void Abandon();

  // The first error met so far.
  Status status() const;

  uint64_t NumEntries() const;
  uint64_t NumRangeTombstones() const;
  // File size so far (after Finish: the final size).
  uint64_t FileSize() const;

 private:
  struct Rep;

  // Writes the pending data block, if any.
  void Flush();
  // Finishes *block, compresses it if that pays, writes it, resets *block.
  void WriteBlock(BlockBuilder* block, BlockHandle* handle);
  // Writes contents plus the block trailer.
  void WriteRawBlock(const Slice& contents, CompressionType type,
                     BlockHandle* handle);

  std::unique_ptr<Rep> rep_;
};

}  // namespace shale

#endif  // SHALE_TABLE_TABLE_BUILDER_H_
