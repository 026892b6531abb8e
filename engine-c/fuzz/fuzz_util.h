// Helpers shared by the libFuzzer targets: in-memory files, so that the
// readers under test see the fuzz input exactly as they would see a file on
// disk, without touching the file system.
//
// Fuzz targets are built by CMake only with clang (SHALE_FUZZ=ON, see
// CMakeLists.txt and `make fuzz`).

#ifndef SHALE_FUZZ_FUZZ_UTIL_H_
#define SHALE_FUZZ_FUZZ_UTIL_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "util/env.h"

namespace shale::fuzz {

// A SequentialFile over a string (how WAL and MANIFEST replay read).
class StringSequentialFile final : public SequentialFile {
 public:
  explicit StringSequentialFile(std::string data) : data_(std::move(data)) {}
  Status Read(size_t n, Slice* result, char* scratch) override {
    n = std::min(n, data_.size() - pos_);
    memcpy(scratch, data_.data() + pos_, n);
    pos_ += n;
    *result = Slice(scratch, n);
    return Status::OK();
  }
  Status Skip(uint64_t n) override {
    pos_ += std::min<uint64_t>(n, data_.size() - pos_);
    return Status::OK();
  }

 private:
  const std::string data_;
  size_t pos_ = 0;
};

// A RandomAccessFile over a string (how SST reads see a file).
class StringRandomAccessFile final : public RandomAccessFile {
 public:
  explicit StringRandomAccessFile(std::string data) : data_(std::move(data)) {}
  Status Read(uint64_t offset, size_t n, Slice* result,
              char* scratch) const override {
    if (offset >= data_.size()) {
      *result = Slice(scratch, 0);
      return Status::OK();
    }
    n = std::min<size_t>(n, data_.size() - offset);
    memcpy(scratch, data_.data() + offset, n);
    *result = Slice(scratch, n);
    return Status::OK();
  }

 private:
  const std::string data_;
};

// Collects appended bytes: how seed files are built in memory.
class StringSink final : public WritableFile {
 public:
  Status Append(const Slice& data) override {
    data_.append(data.data(), data.size());
    return Status::OK();
  }
  Status Flush() override { return Status::OK(); }
  Status Sync() override { return Status::OK(); }
  Status Close() override { return Status::OK(); }
  uint64_t Size() const override { return data_.size(); }
  const std::string& Name() const override { return name_; }
  std::string& data() { return data_; }

 private:
  std::string data_;
  const std::string name_ = "seed";
};

// Applies the edit encoding shared by the targets to a copy of seed:
//
//   rest := truncate: fixed16  edit*
//   edit := offset: fixed16  xor: uint8   (offset modulo the seed's size)
//
// and, when truncate_too, keeps only truncate % (size + 1) bytes.
inline std::string EditSeed(const std::string& seed, const uint8_t* data,
                            size_t size, bool truncate_too) {
  std::string file = seed;
  uint16_t truncate = 0;
  if (size >= 2) {
    memcpy(&truncate, data, 2);
    data += 2;
    size -= 2;
  }
  for (; size >= 3 && !file.empty(); data += 3, size -= 3) {
    uint16_t offset;
    memcpy(&offset, data, 2);
    file[offset % file.size()] ^= static_cast<char>(data[2]);
  }
  if (truncate_too) file.resize(truncate % (file.size() + 1));
  return file;
}

}  // namespace shale::fuzz

#endif  // SHALE_FUZZ_FUZZ_UTIL_H_
