// Comparator: a total order over keys.
//
// Implementations must be thread-safe: the engine calls them concurrently
// from many threads.

#ifndef SHALE_UTIL_COMPARATOR_H_
#define SHALE_UTIL_COMPARATOR_H_

#include <string>

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
};

// Lexicographic bytewise order (memcmp, shorter first on a tie). The result
// is a process-lifetime singleton; do not delete it.
const Comparator* BytewiseComparator();

}  // namespace shale

#endif  // SHALE_UTIL_COMPARATOR_H_
