// Slice: a pointer and a length into bytes owned by someone else.
//
// A Slice never owns memory. The caller must keep the referenced bytes alive
// and unchanged for as long as the Slice is used. Multiple threads may read
// one Slice concurrently; writing to it needs external synchronization.

#ifndef SHALE_UTIL_SLICE_H_
#define SHALE_UTIL_SLICE_H_

#include <cassert>
#include <cstddef>
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
    int r = (min_len == 0) ? 0 : memcmp(data_, b.data_, min_len);
    if (r == 0) {
      if (size_ < b.size_)
        r = -1;
      else if (size_ > b.size_)
        r = +1;
    }
    return r;
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
