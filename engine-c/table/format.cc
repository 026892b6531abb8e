#include "table/format.h"

#include <snappy.h>

#include <cassert>
#include <cstring>

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

namespace {

// Where the bytes handed to UnpackBlock live.
enum class Storage {
  kOwnedBuffer,  // a new char[] the caller gives up (pread scratch)
  kFileOwned,    // memory the open file owns (mmap)
  kTransient,    // anything else: copied if kept
};

// Verifies and decompresses the stored block (payload + trailer) at
// stored[0, handle.size() + kBlockTrailerSize).
Status UnpackBlock(const char* stored, Storage storage,
                   std::unique_ptr<char[]> owned, const std::string& file_name,
                   const TableReadOptions& options, const BlockHandle& handle,
                   BlockContents* result) {
  const size_t n = handle.size();
  if (options.verify_checksums) {
    const uint32_t expected = crc32c::Unmask(DecodeFixed32(stored + n + 1));
    const uint32_t actual = crc32c::Value(stored, n + 1);
    if (actual != expected) {
      return BlockError(file_name, handle, "block checksum mismatch");
    }
  }

  switch (static_cast<uint8_t>(stored[n])) {
    case kNoCompression:
      switch (storage) {
        case Storage::kOwnedBuffer:
          result->data = Slice(owned.release(), n);
          result->heap_allocated = true;
          result->cachable = true;
          break;
        case Storage::kFileOwned:
          // Valid for as long as the file is open: no copy, no caching.
          result->data = Slice(stored, n);
          result->heap_allocated = false;
          result->cachable = false;
          break;
        case Storage::kTransient: {
          char* copy = new char[n];
          memcpy(copy, stored, n);
          result->data = Slice(copy, n);
          result->heap_allocated = true;
          result->cachable = true;
          break;
        }
      }
      return Status::OK();

    case kSnappyCompression: {
      size_t ulength = 0;
      if (!snappy::GetUncompressedLength(stored, n, &ulength)) {
        return BlockError(file_name, handle, "corrupted snappy block");
      }
      // Without a verified checksum the length header could be anything;
      // refuse to trust it before it sizes an allocation.
      if (!options.verify_checksums &&
          !snappy::IsValidCompressedBuffer(stored, n)) {
        return BlockError(file_name, handle, "corrupted snappy block");
      }
      std::unique_ptr<char[]> ubuf(new char[ulength]);
      if (!snappy::RawUncompress(stored, n, ubuf.get())) {
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

// A handle from a damaged index could name any offset and size: it must
// lie inside [0, limit) with its trailer before anything is allocated.
bool HandleFits(const BlockHandle& handle, uint64_t limit) {
  const uint64_t n = handle.size();
  return handle.offset() <= limit && n <= limit - handle.offset() &&
         kBlockTrailerSize <= limit - handle.offset() - n;
}

}  // namespace

Status ReadBlock(const RandomAccessFile* file, uint64_t file_size,
                 const std::string& file_name, const TableReadOptions& options,
                 const BlockHandle& handle, BlockContents* result,
                 char* scratch, size_t scratch_size) {
  *result = BlockContents();
  if (!HandleFits(handle, file_size)) {
    return BlockError(file_name, handle, "block handle past end of file");
  }
  const size_t stored_size = handle.size() + kBlockTrailerSize;
  std::unique_ptr<char[]> buf;
  char* dst = scratch;
  if (stored_size > scratch_size || scratch == nullptr) {
    buf.reset(new char[stored_size]);
    dst = buf.get();
  }
  Slice contents;
  Status s = file->Read(handle.offset(), stored_size, &contents, dst);
  if (!s.ok()) {
    return Status::IOError(
        "reading block",
        BlockErrorContext(file_name, handle.offset()) + ": " + s.message());
  }
  if (contents.size() != stored_size) {
    return BlockError(file_name, handle, "truncated block read");
  }
  if (contents.data() == dst) {
    if (buf == nullptr) {
      return UnpackBlock(contents.data(), Storage::kTransient, nullptr,
                         file_name, options, handle, result);
    }
    return UnpackBlock(contents.data(), Storage::kOwnedBuffer, std::move(buf),
                       file_name, options, handle, result);
  }
  return UnpackBlock(contents.data(), Storage::kFileOwned, nullptr, file_name,
                     options, handle, result);
}

Status ReadBlockFromRange(const FileRange& range, const std::string& file_name,
                          const TableReadOptions& options,
                          const BlockHandle& handle, BlockContents* result) {
  *result = BlockContents();
  // Callers check Contains() first; a handle outside is a caller bug.
  assert(range.Contains(handle));
  const char* stored = range.data.data() + (handle.offset() - range.offset);
  return UnpackBlock(
      stored, range.file_owned ? Storage::kFileOwned : Storage::kTransient,
      nullptr, file_name, options, handle, result);
}

bool FileRange::Contains(const BlockHandle& handle) const {
  return handle.offset() >= offset &&
         HandleFits(BlockHandle(handle.offset() - offset, handle.size()),
                    data.size());
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
