// log::Reader reads the records of a WAL (log/log_format.h) back, checking
// every physical record, and reports damage with the file name and offset.
//
// Damage is anything the writer cannot have produced whole: a checksum
// mismatch, a length running past its block, an unknown type, a record
// piece out of order, zero-filled space, or a record cut short by the end
// of the file (a torn tail: the writer was interrupted). The reader drops
// the damaged bytes, reports them, and carries on with the next record it
// can read, so that its caller can tell damage at the tail (nothing valid
// after it) from damage in the middle, and apply its recovery policy.
//
// Thread safety: one thread at a time.

#ifndef SHALE_LOG_LOG_READER_H_
#define SHALE_LOG_LOG_READER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "log/log_format.h"
#include "util/slice.h"
#include "util/status.h"

namespace shale {

class SequentialFile;

namespace log {

class Reader {
 public:
  // Receives reports of dropped bytes.
  class Reporter {
   public:
    virtual ~Reporter() = default;
    // bytes bytes starting at file offset were dropped. reason is
    // Corruption (with a message naming the file and offset), or the I/O
    // error that stopped the read.
    virtual void Corruption(uint64_t offset, size_t bytes,
                            const Status& reason) = 0;
  };

  // Reads from *file, named file_name in messages. reporter may be nullptr.
  // With checksum false, checksums are not verified. file and reporter
  // must outlive the reader.
  Reader(SequentialFile* file, std::string file_name, Reporter* reporter,
         bool checksum);
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;
  ~Reader();

  // Reads the next record into *record, which stays valid until the next
  // call or until *scratch changes. Returns false at the end of the file.
  bool ReadRecord(Slice* record, std::string* scratch);

  // File offset of the first byte of the last record returned.
  uint64_t LastRecordOffset() const { return last_record_offset_; }
  // File offset just past the last record returned (0 before any): the
  // length to keep if everything after it is to be dropped.
  uint64_t LastRecordEnd() const { return last_record_end_; }

  // True while every damage reported so far is of the kind an interrupted
  // append leaves: a record or header cut off by the end of the file, or
  // zero-filled space. False once anything else (a checksum mismatch, a
  // bad length, an unknown type...) was reported: bytes that were written
  // whole and changed since. Files written with sync before they are
  // relied on (the MANIFEST) may drop the former at their end, never the
  // latter.
  bool OnlyCutShort() const { return only_cut_short_; }

 private:
  // Outcomes of ReadPhysicalRecord besides a record type.
  enum : unsigned int {
    kEof = kMaxRecordType + 1,
    // A damaged physical record, already reported and dropped.
    kBadRecord = kMaxRecordType + 2,
  };

  unsigned int ReadPhysicalRecord(Slice* result, uint64_t* offset);
  // cut_short: the damage is an append cut off (see OnlyCutShort).
  void Report(uint64_t offset, size_t bytes, const std::string& what,
              bool cut_short = false);
  // Offset of the first byte still in buffer_.
  uint64_t BufferOffset() const {
    return end_of_buffer_offset_ - buffer_.size();
  }

  SequentialFile* const file_;
  const std::string file_name_;
  Reporter* const reporter_;
  const bool checksum_;
  std::unique_ptr<char[]> backing_store_;
  Slice buffer_;      // unread bytes of the current block
  bool eof_ = false;  // the last read returned less than a block
  uint64_t end_of_buffer_offset_ = 0;  // file offset just past buffer_
  uint64_t last_record_offset_ = 0;
  uint64_t last_record_end_ = 0;
  bool only_cut_short_ = true;
  bool last_report_cut_short_ = false;
};

}  // namespace log
}  // namespace shale

#endif  // SHALE_LOG_LOG_READER_H_
