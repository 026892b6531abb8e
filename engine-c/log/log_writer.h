// log::Writer appends records to a WAL in the format of log/log_format.h.
//
// Thread safety: one thread at a time (the DB's write leader).

#ifndef SHALE_LOG_LOG_WRITER_H_
#define SHALE_LOG_LOG_WRITER_H_

#include <cstdint>

#include "log/log_format.h"
#include "util/slice.h"
#include "util/status.h"

namespace shale {

class WritableFile;

namespace log {

class Writer {
 public:
  // Appends to *dest, which is dest_length bytes long already (0 for a new
  // file). dest must outlive the writer; the writer does not close it.
  explicit Writer(WritableFile* dest, uint64_t dest_length = 0);
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  // Appends one record and hands it to the OS (WritableFile::Flush); it is
  // durable once Sync() returns. After a failed append the writer must not
  // be used again: the file holds a partial record (the DB moves to a new
  // WAL, see good_length()).
  Status AddRecord(const Slice& record) { return AddRecordParts(&record, 1); }

  // Appends the concatenation of parts[0, n) as one record, without first
  // copying the parts together (the DB's group commit writes a header and
  // several callers' batches this way).
  Status AddRecordParts(const Slice* parts, size_t n);

  // fsyncs the file.
  Status Sync();

  // File length after the last record that was appended successfully: a
  // failed append leaves bytes past it that a reader reports as damage.
  uint64_t good_length() const { return good_length_; }

  WritableFile* file() const { return dest_; }

 private:
  // Writes one physical record of type t whose payload is the next len
  // bytes of the parts, starting at the cursor.
  Status EmitPhysicalRecord(RecordType t, size_t len);

  WritableFile* const dest_;
  size_t block_offset_;  // current offset within the block
  uint64_t good_length_;

  // The record being written, as a cursor over its parts.
  const Slice* parts_ = nullptr;
  size_t num_parts_ = 0;
  size_t part_index_ = 0;
  size_t part_offset_ = 0;

  // crc32c of each type byte, to extend over the payload.
  uint32_t type_crc_[kMaxRecordType + 1];
};

}  // namespace log
}  // namespace shale

#endif  // SHALE_LOG_LOG_WRITER_H_
