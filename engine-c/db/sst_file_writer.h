// SstFileWriter: builds an SST outside any database, for ingestion
// (DBImpl::Ingest) - the fast path for Raft snapshots and bulk loads.
//
// Entries are user keys added in strictly increasing order; each is stored
// as the internal key (key, 0, kTypeValue) and range tombstones as
// (begin, 0, kTypeRangeDeletion) -> end. Ingestion gives the whole file one
// new sequence number (Table::Open's global_seqno), so the file reads as
// one write newer than everything before it, and its tombstones hide older
// data in their spans but not the file's own entries (equal sequence
// numbers do not cover each other). The property "shale.external.sst" = "1"
// marks such files; DO NOT CHANGE its name or value.
//
// Thread safety: one thread at a time.

#ifndef SHALE_DB_SST_FILE_WRITER_H_
#define SHALE_DB_SST_FILE_WRITER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "db/dbformat.h"
#include "db/options.h"
#include "table/options.h"
#include "util/status.h"

namespace shale {

class FilterPolicy;
class TableBuilder;
class WritableFile;

constexpr const char* kExternalSstProperty = "shale.external.sst";
constexpr const char* kExternalSstVersion = "1";

class SstFileWriter {
 public:
  // Creates the file at path (replacing any file there), with options'
  // block, filter and compression settings.
  static Status Open(const Options& options, const std::string& path,
                     std::unique_ptr<SstFileWriter>* writer);
  SstFileWriter(const SstFileWriter&) = delete;
  SstFileWriter& operator=(const SstFileWriter&) = delete;
  // Deletes the file unless Finish() succeeded.
  ~SstFileWriter();

  // REQUIRES: key sorts after every key added so far (else InvalidArgument,
  // and nothing is added).
  Status Put(const Slice& key, const Slice& value);
  // Deletes [begin, end) among older data when the file is ingested.
  // begin > end is InvalidArgument; begin == end deletes nothing.
  Status DeleteRange(const Slice& begin, const Slice& end);
  // Writes the index, filter and footer, syncs and closes the file.
  Status Finish(uint64_t* file_size);

 private:
  SstFileWriter(Env* env, std::string path);

  Env* const env_;
  const std::string path_;
  const InternalKeyComparator icmp_;
  std::unique_ptr<const FilterPolicy> filter_policy_;
  TableOptions table_options_;
  std::unique_ptr<WritableFile> file_;
  std::unique_ptr<TableBuilder> builder_;
  std::string last_key_;
  bool has_last_key_ = false;
  bool finished_ = false;          // Finish() succeeded
  bool builder_finished_ = false;  // Finish() was called on builder_
  std::string scratch_;
};

}  // namespace shale

#endif  // SHALE_DB_SST_FILE_WRITER_H_
