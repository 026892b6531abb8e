// DBIter: the user-facing iterator. It turns a merged stream of internal
// entries (every version of every key, newest first per key) into the view
// at one sequence number: one entry per live user key, with overwritten
// versions, point-deleted keys and keys under a newer range tombstone
// hidden, restricted to [lower, upper).
//
// Positioning. Moving forward, the internal iterator sits on the entry that
// yields the current key and value. Moving backward, it sits just before all
// entries of the current key (on the last entry of the previous user key),
// and the current key and value are copied into saved_key_/saved_value_.
// Changing direction repositions the internal iterator accordingly.
//
// Thread safety: one thread at a time.

#ifndef SHALE_DB_DB_ITER_H_
#define SHALE_DB_DB_ITER_H_

#include <memory>
#include <optional>
#include <string>

#include "db/dbformat.h"
#include "db/range_tombstone.h"
#include "util/iterator.h"

namespace shale {

class DBIter final : public Iterator {
 public:
  // Takes ownership of internal and range_del (which may be nullptr: no
  // range tombstones). lower and upper (nullptr: unbounded) are copied.
  // icmp must outlive the iterator.
  DBIter(const InternalKeyComparator* icmp, Iterator* internal,
         std::unique_ptr<RangeDelAggregator> range_del, SequenceNumber sequence,
         const Slice* lower, const Slice* upper);
  ~DBIter() override;

  bool Valid() const override { return valid_; }
  Slice key() const override;
  Slice value() const override;
  Status status() const override;

  void Next() override;
  void Prev() override;
  // The first live key after the current one that does not start with
  // prefix (user keys; e.g. the next MVCC key after every version of the
  // current one). Entries with the prefix are passed over inside the
  // blocks without being decoded (Iterator::NextPrefix), where Next would
  // decode and compare each. prefix must not point into key(), and must
  // stay valid during the call. REQUIRES: Valid() and key() starts with
  // prefix.
  void NextPrefix(const Slice& prefix) override;
  // The first live key >= target (and >= lower).
  void Seek(const Slice& target) override;
  // The last live key <= target (and < upper).
  void SeekForPrev(const Slice& target);
  void SeekToFirst() override;
  void SeekToLast() override;

  SequenceNumber sequence() const { return sequence_; }

 private:
  enum Direction { kForward, kReverse };

  void FindNextUserEntry(bool skipping);
  void FindPrevUserEntry();
  bool ParseKey(ParsedInternalKey* key);
  bool BeforeLower(const Slice& user_key) const {
    return lower_.has_value() && icmp_->CompareUserKeys(user_key, *lower_) < 0;
  }
  bool AtOrAfterUpper(const Slice& user_key) const {
    return upper_.has_value() && icmp_->CompareUserKeys(user_key, *upper_) >= 0;
  }
  bool Covered(const ParsedInternalKey& k) {
    return range_del_ != nullptr && range_del_->ShouldDelete(k);
  }
  void SetSeekKey(const Slice& user_key, SequenceNumber seq, ValueType t);
  void Invalidate() {
    valid_ = false;
    saved_key_.clear();
    ClearSavedValue();
  }
  void ClearSavedValue();

  const InternalKeyComparator* const icmp_;
  std::unique_ptr<Iterator> iter_;
  std::unique_ptr<RangeDelAggregator> range_del_;
  const SequenceNumber sequence_;
  const std::optional<std::string> lower_;
  const std::optional<std::string> upper_;

  Status status_;
  // Forward: the user key being skipped; reverse: the current key.
  std::string saved_key_;
  std::string saved_value_;  // reverse only
  std::string seek_key_;     // scratch for internal seek targets
  Direction direction_ = kForward;
  bool valid_ = false;
};

}  // namespace shale

#endif  // SHALE_DB_DB_ITER_H_
