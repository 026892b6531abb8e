// The block-based table (SST) file format: block handles, the footer, the
// block trailer, and ReadBlock. The prose description is docs/sst-format.md.
//
//   sst_file :=
//     data_block*            (prefix-compressed entries,
//     table/block_builder.cc) filter_block?          (one full-file filter,
//     table/filter_policy.cc) range_del_block?       (range tombstones sorted
//     by start key) index_block            (one separator key per data block ->
//     handle) properties_block       (TableProperties,
//     table/table_properties.cc) metaindex_block        (meta block name ->
//     handle) footer                 (fixed size, at the very end)
//
//   block on disk := payload (payload_size bytes) trailer
//   trailer (5 bytes) :=
//     compression_type: uint8   (CompressionType, table/options.h)
//     checksum: fixed32         (crc32c::Mask of crc32c(payload + type byte))
//
//   block_handle := offset: varint64  size: varint64   (size excludes the
//                                                      trailer)
//
//   footer (kFooterSize = 56 bytes) :=
//     metaindex_handle: block_handle
//     index_handle: block_handle
//     padding: zero bytes up to byte 40
//     format_version: fixed32     (kFormatVersion)
//     checksum: fixed32           (crc32c::Mask of crc32c(bytes 0..43))
//     magic: fixed64              (kTableMagicNumber)
//
// Every constant below is part of the file format: DO NOT CHANGE them.

#ifndef SHALE_TABLE_FORMAT_H_
#define SHALE_TABLE_FORMAT_H_

#include <cstdint>
#include <memory>
#include <string>

#include "table/options.h"
#include "util/slice.h"
#include "util/status.h"

namespace shale {

class RandomAccessFile;

// "shaleSST" read as a little-endian fixed64. DO NOT CHANGE.
constexpr uint64_t kTableMagicNumber = 0x5453536568616873ull;
// The only format version written and read so far. DO NOT CHANGE.
constexpr uint32_t kFormatVersion = 1;
// Compression type byte + masked CRC32C. DO NOT CHANGE.
constexpr size_t kBlockTrailerSize = 5;

// Names of the meta blocks in the metaindex block. DO NOT CHANGE.
// The filter block's name is kFilterBlockPrefix + FilterPolicy::Name().
inline constexpr char kFilterBlockPrefix[] = "filter.";
inline constexpr char kPropertiesBlockName[] = "properties";
inline constexpr char kRangeDelBlockName[] = "rangedel";

// Where a block sits in the file.
class BlockHandle {
 public:
  // Two varint64s.
  static constexpr size_t kMaxEncodedLength = 10 + 10;

  BlockHandle() = default;
  BlockHandle(uint64_t offset, uint64_t size) : offset_(offset), size_(size) {}

  // Offset of the block's first byte in the file.
  uint64_t offset() const { return offset_; }
  void set_offset(uint64_t offset) { offset_ = offset; }
  // Size of the stored payload, not counting the trailer.
  uint64_t size() const { return size_; }
  void set_size(uint64_t size) { size_ = size; }

  void EncodeTo(std::string* dst) const;
  // Parses a handle from the front of *input and advances it.
  Status DecodeFrom(Slice* input);
  // DecodeFrom without a Status, inline (a point read decodes a handle per
  // table it reads): false when *input does not start with a handle.
  bool Decode(Slice* input) {
    const char* p = input->data();
    const char* limit = p + input->size();
    if ((p = DecodeVarint(p, limit, &offset_)) == nullptr ||
        (p = DecodeVarint(p, limit, &size_)) == nullptr) {
      return false;
    }
    *input = Slice(p, static_cast<size_t>(limit - p));
    return true;
  }

 private:
  static const char* DecodeVarint(const char* p, const char* limit,
                                  uint64_t* v) {
    uint64_t result = 0;
    for (uint32_t shift = 0; shift <= 63 && p < limit; shift += 7) {
      const uint64_t byte = static_cast<uint8_t>(*p++);
      result |= (byte & 127) << shift;
      if ((byte & 128) == 0) {
        *v = result;
        return p;
      }
    }
    return nullptr;
  }

  uint64_t offset_ = ~uint64_t{0};
  uint64_t size_ = ~uint64_t{0};
};

// The fixed-size trailer of every table file.
class Footer {
 public:
  // Byte 40 is where format_version starts; handles use at most 40 bytes.
  static constexpr size_t kHandlesLength = 2 * BlockHandle::kMaxEncodedLength;
  static constexpr size_t kEncodedLength = kHandlesLength + 4 + 4 + 8;

  Footer() = default;

  const BlockHandle& metaindex_handle() const { return metaindex_handle_; }
  void set_metaindex_handle(const BlockHandle& h) { metaindex_handle_ = h; }
  const BlockHandle& index_handle() const { return index_handle_; }
  void set_index_handle(const BlockHandle& h) { index_handle_ = h; }
  uint32_t format_version() const { return format_version_; }

  // Appends exactly kEncodedLength bytes.
  void EncodeTo(std::string* dst) const;
  // Parses kEncodedLength bytes. Checks the magic number, the checksum and
  // the version; errors are Corruption (NotSupported for a newer version).
  Status DecodeFrom(const Slice& input);

 private:
  BlockHandle metaindex_handle_;
  BlockHandle index_handle_;
  uint32_t format_version_ = kFormatVersion;
};

// The bytes of one block after checksum verification and decompression.
struct BlockContents {
  Slice data;
  // data may be kept in the block cache (false for blocks that point into a
  // memory-mapped file: they are already in memory).
  bool cachable = false;
  // data.data() was allocated with new char[] and the owner must free it.
  bool heap_allocated = false;
};

// Where an error happened, for the messages of corrupt files.
std::string BlockErrorContext(const std::string& file_name, uint64_t offset);

// Reads the block at handle from file (file_size bytes long), verifies its
// checksum when options.verify_checksums, and decompresses it. On success
// *result owns or points at the payload (see BlockContents). Errors name
// file_name and the block's offset. A block whose stored bytes fit in
// scratch[0, scratch_size) is read there, not into a new buffer: for a
// compressed block, which is decompressed into one anyway, that saves an
// allocation (an uncompressed one is then copied out).
Status ReadBlock(const RandomAccessFile* file, uint64_t file_size,
                 const std::string& file_name, const TableReadOptions& options,
                 const BlockHandle& handle, BlockContents* result,
                 char* scratch = nullptr, size_t scratch_size = 0);

// Bytes of the file read in one go (the tail of an SST at open), from which
// several blocks are then decoded without further reads.
struct FileRange {
  uint64_t offset = 0;  // of data[0] in the file
  Slice data;
  // data points into memory the open file owns (mmap) rather than into a
  // buffer that the reader frees after use.
  bool file_owned = false;

  // True if the stored block (with its trailer) lies inside data.
  bool Contains(const BlockHandle& handle) const;
};

// Like ReadBlock, for a block inside range (REQUIRES: range.Contains(handle)).
// The result never points into range.data unless range.file_owned.
Status ReadBlockFromRange(const FileRange& range, const std::string& file_name,
                          const TableReadOptions& options,
                          const BlockHandle& handle, BlockContents* result);

// Returns the name stored in properties for a compression type.
const char* CompressionTypeName(CompressionType type);

}  // namespace shale

#endif  // SHALE_TABLE_FORMAT_H_
