// CompactionIterator: decides which entries of a merged input stream
// survive a flush or compaction, and TombstonesToTable writes the range
// tombstones that survive.
//
// Snapshot stripes. The live snapshots s_0 < s_1 < ... < s_n-1 cut the
// sequence numbers into stripes: stripe 0 is [0, s_0], stripe i is
// (s_i-1, s_i], and stripe n is everything newer than s_n-1 (with no
// snapshots there is one stripe). A reader at any snapshot sees, for a key,
// at most the newest version in each stripe, so for each user key:
//   - a version older than another version in its stripe is dropped;
//   - a version covered by a range tombstone in its stripe (a tombstone
//     newer than it and not newer than the stripe's top) is dropped;
//   - a point deletion in stripe 0 is dropped when the output is the
//     bottom of the tree for these keys (nothing older lies below): no one
//     can see what it deleted, since that went with it.
// For range tombstones the same rules give: keep, per fragment, only the
// newest tombstone of each stripe, and none of stripe 0 at the bottom.
//
// Thread safety: one thread (a flush or compaction job).

#ifndef SHALE_DB_COMPACTION_ITERATOR_H_
#define SHALE_DB_COMPACTION_ITERATOR_H_

#include <memory>
#include <string>
#include <vector>

#include "db/dbformat.h"
#include "db/range_tombstone.h"
#include "db/version_edit.h"
#include "util/iterator.h"

namespace shale {

class TableBuilder;

class CompactionIterator {
 public:
  // input yields internal keys in order; the iterator does not own it.
  // snapshots ascending. tombstones (may be nullptr) are all the range
  // tombstones of the inputs, merged into one list.
  CompactionIterator(Iterator* input, const InternalKeyComparator* icmp,
                     const std::vector<SequenceNumber>* snapshots,
                     const FragmentedRangeTombstoneList* tombstones,
                     bool bottommost);
  CompactionIterator(const CompactionIterator&) = delete;
  CompactionIterator& operator=(const CompactionIterator&) = delete;

  // Writes the values that survive in stripe 0 at the bottom with
  // sequence number 0 (as RocksDB does): no reader can tell them from
  // their original sequence, since nothing older lies below and every
  // snapshot sees them, and a run of equal trailers compresses better.
  // Only for outputs below L0, whose files are not ordered by sequence.
  // Call before SeekToFirst.
  void set_zero_sequences(bool v) { zero_sequences_ = v; }

  // The user keys in [lower, upper) are written one level further down,
  // where nothing older lies below them if bottommost: such keys follow
  // that flag instead of the constructor's. The iterator keeps the
  // strings' pointers: they must outlive it. Call before SeekToFirst.
  void set_deep_range(const std::string* lower, const std::string* upper,
                      bool bottommost) {
    deep_lower_ = lower;
    deep_upper_ = upper;
    deep_bottommost_ = bottommost;
  }

  void SeekToFirst();
  bool Valid() const { return valid_; }
  // The entry to write, valid until Next().
  Slice key() const { return zeroed_ ? Slice(zeroed_key_) : input_->key(); }
  Slice value() const { return input_->value(); }
  const ParsedInternalKey& parsed() const { return parsed_; }
  void Next();
  // An input error or a malformed key.
  Status status() const;

  uint64_t num_input_entries() const { return num_input_; }
  uint64_t num_dropped() const { return num_dropped_; }

 private:
  // Moves the input to the next entry to keep.
  void FindNextOutput();
  size_t StripeOf(SequenceNumber seq) const;
  SequenceNumber StripeTop(size_t stripe) const;
  bool CoveredInStripe(const ParsedInternalKey& k, size_t stripe);

  Iterator* const input_;
  const InternalKeyComparator* const icmp_;
  const std::vector<SequenceNumber>* const snapshots_;
  const FragmentedRangeTombstoneList* const tombstones_;
  const bool bottommost_;
  bool zero_sequences_ = false;
  const std::string* deep_lower_ = nullptr;  // nullptr: no deep range
  const std::string* deep_upper_ = nullptr;
  bool deep_bottommost_ = false;
  bool key_bottommost_ = false;  // the flag for current_user_key_
  bool zeroed_ = false;          // key() is zeroed_key_
  std::string zeroed_key_;

  bool valid_ = false;
  Status status_;
  ParsedInternalKey parsed_;
  std::string current_user_key_;
  bool has_current_user_key_ = false;
  size_t last_stripe_ = 0;  // of the last kept or deciding version
  bool has_last_stripe_ = false;
  size_t fragment_hint_ = 0;
  uint64_t num_input_ = 0;
  uint64_t num_dropped_ = 0;
};

// Merges the range tombstones of several sources into one fragment list
// (nullptr when there are none).
std::shared_ptr<const FragmentedRangeTombstoneList> MergeTombstones(
    const std::vector<std::shared_ptr<const FragmentedRangeTombstoneList>>&
        sources,
    const InternalKeyComparator& icmp);

// Adds to builder the tombstones of list clipped to [lower, upper)
// (nullptr: unbounded) that survive under the stripe rules above, and
// widens meta's bounds (a tombstone [b, e) at seq s spans (b, s) to the
// sentinel (e, kMaxSequenceNumber, kTypeRangeDeletion)).
void TombstonesToTable(const FragmentedRangeTombstoneList& list,
                       const Slice* lower, const Slice* upper,
                       const std::vector<SequenceNumber>& snapshots,
                       bool bottommost, TableBuilder* builder,
                       FileMetaData* meta);

}  // namespace shale

#endif  // SHALE_DB_COMPACTION_ITERATOR_H_
