#include "log/log_reader.h"

#include "util/coding.h"
#include "util/crc32c.h"
#include "util/env.h"

namespace shale::log {

Reader::Reader(SequentialFile* file, std::string file_name, Reporter* reporter,
               bool checksum)
    : file_(file),
      file_name_(std::move(file_name)),
      reporter_(reporter),
      checksum_(checksum),
      backing_store_(new char[kBlockSize]) {}

Reader::~Reader() = default;

void Reader::Report(uint64_t offset, size_t bytes, const std::string& what,
                    bool cut_short) {
  last_report_cut_short_ = cut_short;
  only_cut_short_ = only_cut_short_ && cut_short;
  if (reporter_ == nullptr) return;
  reporter_->Corruption(
      offset, bytes,
      Status::Corruption(file_name_ + ": " + what + " at offset " +
                         std::to_string(offset) + " (" + std::to_string(bytes) +
                         " bytes dropped)"));
}

bool Reader::ReadRecord(Slice* record, std::string* scratch) {
  scratch->clear();
  *record = Slice();
  bool in_fragmented_record = false;
  uint64_t prospective_offset = 0;  // where the record being assembled began

  Slice fragment;
  while (true) {
    uint64_t physical_offset = 0;
    const unsigned int type = ReadPhysicalRecord(&fragment, &physical_offset);
    switch (type) {
      case kFullType:
        if (in_fragmented_record) {
          Report(prospective_offset, scratch->size(),
                 "record missing its last piece");
        }
        scratch->clear();
        *record = fragment;
        last_record_offset_ = physical_offset;
        last_record_end_ = BufferOffset();
        return true;

      case kFirstType:
        if (in_fragmented_record) {
          Report(prospective_offset, scratch->size(),
                 "record missing its last piece");
        }
        prospective_offset = physical_offset;
        scratch->assign(fragment.data(), fragment.size());
        in_fragmented_record = true;
        break;

      case kMiddleType:
        if (!in_fragmented_record) {
          Report(physical_offset, kHeaderSize + fragment.size(),
                 "middle piece of a record without its first piece");
        } else {
          scratch->append(fragment.data(), fragment.size());
        }
        break;

      case kLastType:
        if (!in_fragmented_record) {
          Report(physical_offset, kHeaderSize + fragment.size(),
                 "last piece of a record without its first piece");
        } else {
          scratch->append(fragment.data(), fragment.size());
          *record = Slice(*scratch);
          last_record_offset_ = prospective_offset;
          last_record_end_ = BufferOffset();
          return true;
        }
        break;

      case kEof:
        if (in_fragmented_record) {
          Report(prospective_offset, scratch->size(),
                 "record truncated at end of file", /*cut_short=*/true);
          scratch->clear();
        }
        return false;

      case kBadRecord:
        if (in_fragmented_record) {
          // Cut short if the piece that failed was.
          Report(prospective_offset, scratch->size(),
                 "record missing its last piece", last_report_cut_short_);
          in_fragmented_record = false;
          scratch->clear();
        }
        break;

      default:
        Report(physical_offset, kHeaderSize + fragment.size(),
               "unknown record type " + std::to_string(type));
        in_fragmented_record = false;
        scratch->clear();
        break;
    }
  }
}

unsigned int Reader::ReadPhysicalRecord(Slice* result, uint64_t* offset) {
  while (true) {
    if (buffer_.size() < kHeaderSize) {
      if (!eof_) {
        // What is left of a full block is its zero trailer.
        for (size_t i = 0; i < buffer_.size(); i++) {
          if (buffer_[i] != 0) {
            Report(BufferOffset(), buffer_.size(), "non-zero block trailer");
            break;
          }
        }
        buffer_.clear();
        Status s = file_->Read(kBlockSize, &buffer_, backing_store_.get());
        end_of_buffer_offset_ += buffer_.size();
        if (!s.ok()) {
          buffer_.clear();
          eof_ = true;
          if (reporter_ != nullptr) {
            reporter_->Corruption(end_of_buffer_offset_, kBlockSize, s);
          }
          return kEof;
        }
        if (buffer_.size() < kBlockSize) eof_ = true;
        continue;
      }
      // End of file. Fewer bytes than a header left: the writer was cut
      // off while writing one.
      if (!buffer_.empty()) {
        Report(BufferOffset(), buffer_.size(),
               "record header truncated at end of file", /*cut_short=*/true);
        buffer_.clear();
      }
      return kEof;
    }

    const char* header = buffer_.data();
    const uint32_t length =
        static_cast<uint8_t>(header[4]) |
        (static_cast<uint32_t>(static_cast<uint8_t>(header[5])) << 8);
    const unsigned int type = static_cast<uint8_t>(header[6]);
    if (kHeaderSize + length > buffer_.size()) {
      const uint64_t off = BufferOffset();
      const size_t drop = buffer_.size();
      buffer_.clear();
      if (eof_) {
        Report(off, drop, "record truncated at end of file",
               /*cut_short=*/true);
      } else {
        Report(off, drop,
               "record length " + std::to_string(length) +
                   " runs past the end of its block");
      }
      return kBadRecord;
    }

    if (type == kZeroType && length == 0) {
      // Zeros where a header should be: space the file system allocated
      // but the writer never filled (typically after a crash). Nothing
      // after it in this block can be trusted.
      const uint64_t off = BufferOffset();
      const size_t drop = buffer_.size();
      buffer_.clear();
      Report(off, drop, "zero-filled space", /*cut_short=*/true);
      return kBadRecord;
    }

    if (checksum_) {
      const uint32_t expected = crc32c::Unmask(DecodeFixed32(header));
      const uint32_t actual = crc32c::Value(header + 6, 1 + length);
      if (actual != expected) {
        // Drop just this record: its length fits in the block (checked
        // above), so most likely only its payload is damaged, and a valid
        // record after it then shows that the damage is in the middle of
        // the log, not a torn tail. Were the length wrong, the next header
        // read from inside the payload fails its own checks in turn (a
        // false match needs a CRC32C collision).
        const uint64_t off = BufferOffset();
        const size_t drop = kHeaderSize + length;
        buffer_.remove_prefix(drop);
        Report(off, drop, "checksum mismatch");
        return kBadRecord;
      }
    }

    *offset = BufferOffset();
    buffer_.remove_prefix(kHeaderSize + length);
    *result = Slice(header + kHeaderSize, length);
    return type;
  }
}

}  // namespace shale::log
