#include "util/comparator.h"

#include <algorithm>
#include <cstdint>

namespace shale {

namespace {

class BytewiseComparatorImpl final : public Comparator {
 public:
  BytewiseComparatorImpl() : Comparator(Kind::kBytewise) {}

  const char* Name() const override { return "shale.BytewiseComparator"; }

  int Compare(const Slice& a, const Slice& b) const override {
    return a.compare(b);
  }

  void FindShortestSeparator(std::string* start,
                             const Slice& limit) const override {
    // Find the length of the common prefix.
    size_t min_length = std::min(start->size(), limit.size());
    size_t diff_index = 0;
    while (diff_index < min_length &&
           (*start)[diff_index] == limit[diff_index]) {
      diff_index++;
    }
    if (diff_index >= min_length) {
      // One is a prefix of the other: leave *start alone.
      return;
    }
    uint8_t diff_byte = static_cast<uint8_t>((*start)[diff_index]);
    if (diff_byte < 0xff &&
        diff_byte + 1 < static_cast<uint8_t>(limit[diff_index])) {
      (*start)[diff_index]++;
      start->resize(diff_index + 1);
    }
  }

  void FindShortSuccessor(std::string* key) const override {
    // Find the first byte that can be incremented and drop what follows.
    for (size_t i = 0; i < key->size(); i++) {
      const uint8_t byte = (*key)[i];
      if (byte != 0xff) {
        (*key)[i] = byte + 1;
        key->resize(i + 1);
        return;
      }
    }
    // *key is a run of 0xffs: leave it alone.
  }
};

}  // namespace

const Comparator* BytewiseComparator() {
  static const BytewiseComparatorImpl* const kSingleton =
      new BytewiseComparatorImpl;
  return kSingleton;
}

}  // namespace shale
