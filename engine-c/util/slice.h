// Slice: a pointer and a length into bytes owned by someone else.
//
// A Slice never owns memory. The caller must keep the referenced bytes alive
// and unchanged for as long as the Slice is used. Multiple threads may read
// one Slice concurrently; writing to it needs external synchronization.

#ifndef SHALE_UTIL_SLICE_H_
#define SHALE_UTIL_SLICE_H_

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace shale {

class Slice {
 public:
  Slice() : data_(""), size_(0) {}
  Slice(const char* d, size_t n) : data_(d), size_(n) {}
  Slice(const uint8_t* d, size_t n)
      : data_(reinterpret_cast<const char*>(d)), size_(n) {}
  Slice(const std::string& s) : data_(s.data()), size_(s.size()) {}
  Slice(std::string_view s) : data_(s.data()), size_(s.size()) {}
  Slice(const char* s) : data_(s), size_(strlen(s)) {}

  const char* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  // REQUIRES: n < size()
  char operator[](size_t n) const {
    assert(n < size_);
    return data_[n];
  }

  void clear() {
    data_ = "";
    size_ = 0;
  }

  // Drops the first n bytes. REQUIRES: n <= size()
  void remove_prefix(size_t n) {
    assert(n <= size_);
    data_ += n;
    size_ -= n;
  }

  // Drops the last n bytes. REQUIRES: n <= size()
  void remove_suffix(size_t n) {
    assert(n <= size_);
    size_ -= n;
  }

  std::string ToString() const { return std::string(data_, size_); }
  std::string_view view() const { return std::string_view(data_, size_); }

  // Three-way bytewise comparison: <0, 0, >0.
  int compare(const Slice& b) const {
    const size_t min_len = (size_ < b.size_) ? size_ : b.size_;
    int r = CompareBytes(data_, b.data_, min_len);
    if (r == 0) {
      if (size_ < b.size_)
        r = -1;
      else if (size_ > b.size_)
        r = +1;
    }
    return r;
  }

  // memcmp's sign for n bytes. Keys of a few dozen bytes (the common case:
  // every lookup compares dozens of them) are compared 8 bytes at a time
  // inline; for them a call to memcmp costs more than the comparison.
  static int CompareBytes(const char* a, const char* b, size_t n) {
    if (n > 32) return memcmp(a, b, n);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      uint64_t x, y;
      memcpy(&x, a + i, 8);
      memcpy(&y, b + i, 8);
      if (x != y) {
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        x = __builtin_bswap64(x);  // the first byte decides: most significant
        y = __builtin_bswap64(y);
#endif
        return x < y ? -1 : +1;
      }
    }
    for (; i < n; i++) {
      const uint8_t x = static_cast<uint8_t>(a[i]);
      const uint8_t y = static_cast<uint8_t>(b[i]);
      if (x != y) return x < y ? -1 : +1;
    }
    return 0;
  }

  bool starts_with(const Slice& x) const {
    return size_ >= x.size_ &&
           (x.size_ == 0 || memcmp(data_, x.data_, x.size_) == 0);
  }

 private:
  const char* data_;
  size_t size_;
};

inline bool operator==(const Slice& x, const Slice& y) {
  return x.size() == y.size() &&
         (x.size() == 0 || memcmp(x.data(), y.data(), x.size()) == 0);
}
inline bool operator!=(const Slice& x, const Slice& y) { return !(x == y); }

}  // namespace shale

#endif  // SHALE_UTIL_SLICE_H_
