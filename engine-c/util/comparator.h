// Comparator: a total order over keys.
//
// Implementations must be thread-safe: the engine calls them concurrently
// from many threads.

#ifndef SHALE_UTIL_COMPARATOR_H_
#define SHALE_UTIL_COMPARATOR_H_

#include <cstdint>
#include <string>

#include "util/coding.h"
#include "util/slice.h"

namespace shale {

class Comparator {
 public:
  virtual ~Comparator() = default;

  // Three-way comparison: <0 iff a < b, 0 iff a == b, >0 iff a > b.
  virtual int Compare(const Slice& a, const Slice& b) const = 0;

  // The name is persisted in every SST and the MANIFEST; opening data with a
  // comparator of another name fails.
  virtual const char* Name() const = 0;

  // If *start < limit, may change *start to a shorter string in
  // [start, limit). Used to shorten index-block separators.
  virtual void FindShortestSeparator(std::string* start,
                                     const Slice& limit) const = 0;

  // May change *key to a shorter string >= *key.
  virtual void FindShortSuccessor(std::string* key) const = 0;

  // Orders that hot paths apply inline (CompareInline) instead of calling
  // Compare: a block seek compares dozens of keys per lookup, and the
  // virtual call costs as much as a short comparison.
  enum class Kind : uint8_t {
    kOther,     // only Compare knows the order
    kBytewise,  // Slice::compare
    // Internal keys (db/dbformat.h) over bytewise user keys: the user key
    // (all but the last 8 bytes) bytewise, then the 8-byte little-endian
    // trailer (sequence << 8 | type) descending. Every key has >= 8 bytes.
    kInternalBytewise,
  };
  Kind kind() const { return kind_; }

 protected:
  Comparator() = default;
  // A subclass declares a Kind only if its Compare is exactly that order.
  explicit Comparator(Kind kind) : kind_(kind) {}

 private:
  const Kind kind_ = Kind::kOther;
};

// c->Compare(a, b), inline for the orders of Comparator::Kind.
// Always inlined: a block seek's loops call it once per key, and a call
// costs as much as the comparison.
__attribute__((always_inline)) inline int CompareInline(const Comparator* c,
                                                        const Slice& a,
                                                        const Slice& b) {
  switch (c->kind()) {
    case Comparator::Kind::kBytewise:
      return a.compare(b);
    case Comparator::Kind::kInternalBytewise: {
      const Slice ua(a.data(), a.size() - 8);
      const Slice ub(b.data(), b.size() - 8);
      const int r = ua.compare(ub);
      if (r != 0) return r;
      const uint64_t ta = DecodeFixed64(a.data() + ua.size());
      const uint64_t tb = DecodeFixed64(b.data() + ub.size());
      return ta > tb ? -1 : (ta < tb ? +1 : 0);
    }
    case Comparator::Kind::kOther:
      break;
  }
  return c->Compare(a, b);
}

// Lexicographic bytewise order (memcmp, shorter first on a tie). The result
// is a process-lifetime singleton; do not delete it.
const Comparator* BytewiseComparator();

}  // namespace shale

#endif  // SHALE_UTIL_COMPARATOR_H_
