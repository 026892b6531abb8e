// The write-ahead log format (docs/formats.md, "WAL").
//
// A log file is a sequence of 32 KiB blocks. A logical record (one
// WriteBatch payload) is written as one or more physical records, each
// wholly inside one block:
//
//   block    := physical* trailer?
//   physical := checksum: fixed32   masked CRC32C of type and payload
//               length:   fixed16   payload bytes (little-endian)
//               type:     uint8     FULL | FIRST | MIDDLE | LAST
//               payload:  bytes[length]
//   trailer  := 0x00{0,6}           when fewer than 7 bytes (a header) are
//                                   left in a block, they are zero-filled
//
// A record that fits in what is left of the block is one FULL physical
// record; otherwise it is split into FIRST, MIDDLE..., LAST. The checksum
// covers the type byte then the payload and is masked (util/crc32c.h), so
// a record holding a CRC of its own does not confuse the check.
//
// DO NOT CHANGE these values: they are in every WAL on disk.

#ifndef SHALE_LOG_LOG_FORMAT_H_
#define SHALE_LOG_LOG_FORMAT_H_

#include <cstddef>

namespace shale::log {

enum RecordType : unsigned char {
  // Never written. Zero bytes (preallocated or zero-filled space after a
  // crash) read as this type.
  kZeroType = 0,
  kFullType = 1,
  // The pieces of a record split across blocks.
  kFirstType = 2,
  kMiddleType = 3,
  kLastType = 4,
};
constexpr int kMaxRecordType = kLastType;

constexpr size_t kBlockSize = 32768;

// checksum (4 bytes) + length (2 bytes) + type (1 byte).
constexpr size_t kHeaderSize = 4 + 2 + 1;

}  // namespace shale::log

#endif  // SHALE_LOG_LOG_FORMAT_H_
