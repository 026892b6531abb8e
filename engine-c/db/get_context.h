// GetContext: the state of one point lookup as it visits the sources that
// may hold the key, newest first (memtable, immutable memtables, L0 files
// newest first, then one file per level).
//
// Each source first folds in the sequence number of its newest range
// tombstone covering the key (visible at the read sequence), then offers the
// newest visible point entry for the key, if it has one. Because every
// source holds only data older than the sources before it, a covering
// tombstone seen in one source also deletes whatever older sources hold.
//
// The value goes straight to its destination: a std::string, or a caller's
// buffer (the C API's), so a lookup copies it once and allocates nothing.
//
// Thread safety: one lookup, one thread.

#ifndef SHALE_DB_GET_CONTEXT_H_
#define SHALE_DB_GET_CONTEXT_H_

#include <cstring>
#include <string>

#include "db/dbformat.h"
#include "util/status.h"

namespace shale {

class GetContext {
 public:
  enum State { kNotFound, kFound, kDeleted, kCorrupt };

  // If value_str is not nullptr the value is assigned to it; otherwise it
  // is copied to [buf, buf + cap) when it fits (see value_fits()).
  GetContext(const InternalKeyComparator* icmp, const Slice& user_key,
             SequenceNumber read_seq, std::string* value_str, char* buf,
             size_t cap)
      : icmp_(icmp),
        user_key_(user_key),
        read_seq_(read_seq),
        value_str_(value_str),
        buf_(buf),
        cap_(cap) {}

  const Slice& user_key() const { return user_key_; }
  SequenceNumber read_seq() const { return read_seq_; }

  // Records a range tombstone covering the key (sequence <= read_seq).
  void AddCoveringTombstone(SequenceNumber seq) {
    if (seq > max_covering_seq_) max_covering_seq_ = seq;
  }
  SequenceNumber max_covering_tombstone_seq() const {
    return max_covering_seq_;
  }

  // Offers the first entry at or after the lookup key in a source. Returns
  // true when it decides the lookup (it is a visible version of the key).
  // An entry newer than the read sequence can only come from an ingested
  // file (whose entries all read with the file's global sequence number,
  // whatever the lookup key); it is not visible, and older sources may
  // still hold the answer.
  bool SaveValue(const ParsedInternalKey& parsed, const Slice& value) {
    if (icmp_->CompareUserKeys(parsed.user_key, user_key_) != 0) return false;
    if (parsed.sequence > read_seq_) return false;
    if (parsed.sequence < max_covering_seq_) {
      state_ = kDeleted;
      return true;
    }
    switch (parsed.type) {
      case kTypeValue:
        state_ = kFound;
        SetValue(value);
        return true;
      case kTypeDeletion:
        state_ = kDeleted;
        return true;
      default:
        MarkCorrupt(
            Status::Corruption("point lookup met an entry of unexpected type",
                               parsed.DebugString()));
        return true;
    }
  }

  // Called after a source that did not decide the lookup: a tombstone seen
  // so far covers every version in the older sources.
  bool DecidedByTombstone() {
    if (max_covering_seq_ > 0) {
      state_ = kDeleted;
      return true;
    }
    return false;
  }

  void MarkCorrupt(const Status& s) {
    state_ = kCorrupt;
    status_ = s;
  }

  State state() const { return state_; }
  const Status& status() const { return status_; }
  // The length of the value found.
  size_t value_size() const { return value_size_; }
  // True when the value was copied to the caller's buffer (or string).
  bool value_fits() const { return value_fits_; }

 private:
  void SetValue(const Slice& v) {
    value_size_ = v.size();
    if (value_str_ != nullptr) {
      value_str_->assign(v.data(), v.size());
      value_fits_ = true;
    } else if (v.size() <= cap_) {
      if (!v.empty()) memcpy(buf_, v.data(), v.size());
      value_fits_ = true;
    } else {
      value_fits_ = false;
    }
  }

  const InternalKeyComparator* const icmp_;
  const Slice user_key_;
  const SequenceNumber read_seq_;
  std::string* const value_str_;
  char* const buf_;
  const size_t cap_;

  State state_ = kNotFound;
  Status status_;
  SequenceNumber max_covering_seq_ = 0;
  size_t value_size_ = 0;
  bool value_fits_ = false;
};

}  // namespace shale

#endif  // SHALE_DB_GET_CONTEXT_H_
