#include "table/format.h"

#include <snappy.h>

#include "util/coding.h"
#include "util/crc32c.h"
#include "util/env.h"

namespace shale {

void BlockHandle::EncodeTo(std::string* dst) const {
  // Sanity check that all fields have been set.
  assert(offset_ != ~uint64_t{0});
  assert(size_ != ~uint64_t{0});
  PutVarint64(dst, offset_);
  PutVarint64(dst, size_);
}

Status BlockHandle::DecodeFrom(Slice* input) {
  if (GetVarint64(input, &offset_) && GetVarint64(input, &size_)) {
    return Status::OK();
  }
  return Status::Corruption("bad block handle");
}

void Footer::EncodeTo(std::string* dst) const {
  const size_t original_size = dst->size();
  metaindex_handle_.EncodeTo(dst);
  index_handle_.EncodeTo(dst);
  dst->resize(original_size + kHandlesLength, '\0');  // padding
  PutFixed32(dst, format_version_);
  const uint32_t crc =
      crc32c::Value(dst->data() + original_size, kHandlesLength + 4);
  PutFixed32(dst, crc32c::Mask(crc));
  PutFixed64(dst, kTableMagicNumber);
  assert(dst->size() == original_size + kEncodedLength);
}

Status Footer::DecodeFrom(const Slice& input) {
  if (input.size() < kEncodedLength) {
    return Status::Corruption("footer too short");
  }
  const char* p = input.data();
  const uint64_t magic = DecodeFixed64(p + kHandlesLength + 8);
  if (magic != kTableMagicNumber) {
    return Status::Corruption("bad magic number (not an SST file)");
  }
  const uint32_t expected =
      crc32c::Unmask(DecodeFixed32(p + kHandlesLength + 4));
  const uint32_t actual = crc32c::Value(p, kHandlesLength + 4);
  if (actual != expected) {
    return Status::Corruption("footer checksum mismatch");
  }
  format_version_ = DecodeFixed32(p + kHandlesLength);
  if (format_version_ != kFormatVersion) {
    return Status::NotSupported("unknown SST format version " +
                                std::to_string(format_version_));
  }
  Slice handles(p, kHandlesLength);
  Status s = metaindex_handle_.DecodeFrom(&handles);
  if (s.ok()) s = index_handle_.DecodeFrom(&handles);
  return s;
}

std::string BlockErrorContext(const std::string& file_name, uint64_t offset) {
  return file_name + " at offset " + std::to_string(offset);
}

namespace {

Status BlockError(const std::string& file_name, const BlockHandle& handle,
                  const char* what) {
  return Status::Corruption(
      what, BlockErrorContext(file_name, handle.offset()) + " (block size " +
                std::to_string(handle.size()) + ")");
}

}  // namespace

Status ReadBlock(const RandomAccessFile* file, uint64_t file_size,
                 const std::string& file_name, const TableReadOptions& options,
                 const BlockHandle& handle, BlockContents* result) {
  *result = BlockContents();

  // A handle from a damaged index could name any offset and size: check it
  // against the file before allocating anything.
  const uint64_t n = handle.size();
  if (handle.offset() > file_size || n > file_size - handle.offset() ||
      kBlockTrailerSize > file_size - handle.offset() - n) {
    return BlockError(file_name, handle, "block handle past end of file");
  }

  std::unique_ptr<char[]> buf(new char[n + kBlockTrailerSize]);
  Slice contents;
  Status s =
      file->Read(handle.offset(), n + kBlockTrailerSize, &contents, buf.get());
  if (!s.ok()) {
    return Status::IOError(
        "reading block",
        BlockErrorContext(file_name, handle.offset()) + ": " + s.message());
  }
  if (contents.size() != n + kBlockTrailerSize) {
    return BlockError(file_name, handle, "truncated block read");
  }

  const char* data = contents.data();
  if (options.verify_checksums) {
    const uint32_t expected = crc32c::Unmask(DecodeFixed32(data + n + 1));
    const uint32_t actual = crc32c::Value(data, n + 1);
    if (actual != expected) {
      return BlockError(file_name, handle, "block checksum mismatch");
    }
  }

  const bool in_scratch = data == buf.get();
  switch (static_cast<uint8_t>(data[n])) {
    case kNoCompression:
      if (in_scratch) {
        result->data = Slice(buf.release(), n);
        result->heap_allocated = true;
        result->cachable = true;
      } else {
        // The file owns the bytes (mmap) for as long as it is open.
        result->data = Slice(data, n);
        result->heap_allocated = false;
        result->cachable = false;
      }
      return Status::OK();

    case kSnappyCompression: {
      size_t ulength = 0;
      if (!snappy::GetUncompressedLength(data, n, &ulength)) {
        return BlockError(file_name, handle, "corrupted snappy block");
      }
      // Without a verified checksum the length header could be anything;
      // refuse to trust it before it sizes an allocation.
      if (!options.verify_checksums &&
          !snappy::IsValidCompressedBuffer(data, n)) {
        return BlockError(file_name, handle, "corrupted snappy block");
      }
      std::unique_ptr<char[]> ubuf(new char[ulength]);
      if (!snappy::RawUncompress(data, n, ubuf.get())) {
        return BlockError(file_name, handle, "corrupted snappy block");
      }
      result->data = Slice(ubuf.release(), ulength);
      result->heap_allocated = true;
      result->cachable = true;
      return Status::OK();
    }

    default:
      return BlockError(file_name, handle, "unknown block compression type");
  }
}

const char* CompressionTypeName(CompressionType type) {
  switch (type) {
    case kNoCompression:
      return "none";
    case kSnappyCompression:
      return "snappy";
  }
  return "unknown";
}

}  // namespace shale
