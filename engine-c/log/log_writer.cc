#include "log/log_writer.h"

#include <algorithm>
#include <cassert>

#include "util/coding.h"
#include "util/crc32c.h"
#include "util/env.h"

namespace shale::log {

Writer::Writer(WritableFile* dest, uint64_t dest_length)
    : dest_(dest),
      block_offset_(dest_length % kBlockSize),
      good_length_(dest_length) {
  for (int i = 0; i <= kMaxRecordType; i++) {
    const char t = static_cast<char>(i);
    type_crc_[i] = crc32c::Value(&t, 1);
  }
}

Status Writer::AddRecordParts(const Slice* parts, size_t n) {
  size_t left = 0;
  for (size_t i = 0; i < n; i++) left += parts[i].size();
  parts_ = parts;
  num_parts_ = n;
  part_index_ = 0;
  part_offset_ = 0;

  // Fragment the record; an empty record is still one FULL record.
  Status s;
  bool begin = true;
  do {
    const size_t leftover = kBlockSize - block_offset_;
    if (leftover < kHeaderSize) {
      // Not even a header fits: zero-fill the trailer, start a new block.
      if (leftover > 0) {
        static const char kZeros[kHeaderSize] = {0};
        s = dest_->Append(Slice(kZeros, leftover));
        if (!s.ok()) break;
      }
      block_offset_ = 0;
    }
    const size_t avail = kBlockSize - block_offset_ - kHeaderSize;
    const size_t fragment_length = (left < avail) ? left : avail;
    const bool end = (left == fragment_length);
    RecordType type;
    if (begin && end) {
      type = kFullType;
    } else if (begin) {
      type = kFirstType;
    } else if (end) {
      type = kLastType;
    } else {
      type = kMiddleType;
    }
    s = EmitPhysicalRecord(type, fragment_length);
    left -= fragment_length;
    begin = false;
  } while (s.ok() && left > 0);

  if (s.ok()) s = dest_->Flush();
  if (s.ok()) good_length_ = dest_->Size();
  parts_ = nullptr;
  return s;
}

Status Writer::EmitPhysicalRecord(RecordType t, size_t len) {
  assert(len <= 0xffff);
  assert(block_offset_ + kHeaderSize + len <= kBlockSize);

  // Checksum the payload where it lies, across part boundaries.
  uint32_t crc = type_crc_[t];
  {
    size_t i = part_index_, off = part_offset_, need = len;
    while (need > 0) {
      const Slice& p = parts_[i];
      const size_t take = std::min(need, p.size() - off);
      crc = crc32c::Extend(crc, p.data() + off, take);
      need -= take;
      off += take;
      if (off == p.size()) {
        i++;
        off = 0;
      }
    }
  }

  char header[kHeaderSize];
  EncodeFixed32(header, crc32c::Mask(crc));
  header[4] = static_cast<char>(len & 0xff);
  header[5] = static_cast<char>(len >> 8);
  header[6] = static_cast<char>(t);
  Status s = dest_->Append(Slice(header, kHeaderSize));

  // Then append the same bytes, advancing the cursor.
  size_t need = len;
  while (s.ok() && need > 0) {
    const Slice& p = parts_[part_index_];
    const size_t take = std::min(need, p.size() - part_offset_);
    s = dest_->Append(Slice(p.data() + part_offset_, take));
    need -= take;
    part_offset_ += take;
    if (part_offset_ == p.size()) {
      part_index_++;
      part_offset_ = 0;
    }
  }
  // Skip empty parts so the cursor rests on real bytes.
  while (part_index_ < num_parts_ && parts_[part_index_].size() == 0) {
    part_index_++;
  }
  block_offset_ += kHeaderSize + len;
  return s;
}

Status Writer::Sync() { return dest_->Sync(); }

}  // namespace shale::log
