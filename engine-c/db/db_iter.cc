#include "db/db_iter.h"

#include <cassert>

namespace shale {

namespace {

std::optional<std::string> CopyBound(const Slice* s) {
  if (s == nullptr) return std::nullopt;
  return s->ToString();
}

inline void SaveKey(const Slice& k, std::string* dst) {
  dst->assign(k.data(), k.size());
}

}  // namespace

DBIter::DBIter(const InternalKeyComparator* icmp, Iterator* internal,
               std::unique_ptr<RangeDelAggregator> range_del,
               SequenceNumber sequence, const Slice* lower, const Slice* upper)
    : icmp_(icmp),
      iter_(internal),
      range_del_(range_del != nullptr && range_del->empty()
                     ? nullptr
                     : std::move(range_del)),
      sequence_(sequence),
      lower_(CopyBound(lower)),
      upper_(CopyBound(upper)) {}

DBIter::~DBIter() = default;

Slice DBIter::key() const {
  assert(valid_);
  return direction_ == kForward ? ExtractUserKey(iter_->key())
                                : Slice(saved_key_);
}

Slice DBIter::value() const {
  assert(valid_);
  return direction_ == kForward ? iter_->value() : Slice(saved_value_);
}

Status DBIter::status() const {
  if (!status_.ok()) return status_;
  return iter_->status();
}

void DBIter::ClearSavedValue() {
  // Do not keep a large buffer alive after a large value.
  if (saved_value_.capacity() > 1048576) {
    std::string empty;
    saved_value_.swap(empty);
  } else {
    saved_value_.clear();
  }
}

bool DBIter::ParseKey(ParsedInternalKey* key) {
  if (ParseInternalKey(iter_->key(), key)) return true;
  status_ = Status::Corruption("iterator met a malformed internal key",
                               EscapeKey(iter_->key()));
  return false;
}

void DBIter::SetSeekKey(const Slice& user_key, SequenceNumber seq,
                        ValueType t) {
  seek_key_.clear();
  AppendInternalKey(&seek_key_, ParsedInternalKey(user_key, seq, t));
}

void DBIter::FindNextUserEntry(bool skipping) {
  // saved_key_ holds the user key to skip when skipping is true. Entries of
  // one user key come newest first, so the first visible one decides it.
  while (iter_->Valid()) {
    ParsedInternalKey ikey;
    if (!ParseKey(&ikey)) break;
    if (AtOrAfterUpper(ikey.user_key)) break;
    if (ikey.sequence <= sequence_) {
      if (skipping && icmp_->CompareUserKeys(ikey.user_key, saved_key_) <= 0) {
        // An older version of a key already decided.
      } else if (ikey.type == kTypeValue && !Covered(ikey)) {
        valid_ = true;
        saved_key_.clear();
        return;
      } else {
        // Deleted (point tombstone or covering range tombstone): hide
        // every older version too.
        SaveKey(ikey.user_key, &saved_key_);
        skipping = true;
      }
    }
    iter_->Next();
  }
  Invalidate();
}

void DBIter::FindPrevUserEntry() {
  // Walking backwards, the versions of one user key come oldest first; the
  // last visible one seen before reaching a smaller key decides the key.
  ValueType value_type = kTypeDeletion;
  while (iter_->Valid()) {
    ParsedInternalKey ikey;
    if (!ParseKey(&ikey)) {
      Invalidate();
      direction_ = kForward;
      return;
    }
    if (BeforeLower(ikey.user_key)) break;
    if (ikey.sequence <= sequence_) {
      if (value_type != kTypeDeletion &&
          icmp_->CompareUserKeys(ikey.user_key, saved_key_) < 0) {
        // saved_key_ is live, and we have stepped past all its versions.
        break;
      }
      value_type = ikey.type;
      if (value_type == kTypeValue && Covered(ikey)) value_type = kTypeDeletion;
      if (value_type == kTypeDeletion) {
        saved_key_.clear();
        ClearSavedValue();
      } else {
        SaveKey(ikey.user_key, &saved_key_);
        const Slice v = iter_->value();
        saved_value_.assign(v.data(), v.size());
      }
    }
    iter_->Prev();
  }
  if (value_type == kTypeDeletion) {
    // Exhausted.
    Invalidate();
    direction_ = kForward;
  } else {
    valid_ = true;
  }
}

void DBIter::Next() {
  assert(valid_);
  if (direction_ == kReverse) {
    direction_ = kForward;
    // iter_ is just before the entries of saved_key_ (the current key), or
    // invalid if nothing precedes them. Step onto them; FindNextUserEntry
    // then skips them.
    if (!iter_->Valid()) {
      if (lower_.has_value()) {
        SetSeekKey(*lower_, kMaxSequenceNumber, kValueTypeForSeek);
        iter_->Seek(seek_key_);
      } else {
        iter_->SeekToFirst();
      }
    } else {
      iter_->Next();
    }
    ClearSavedValue();
  } else {
    SaveKey(ExtractUserKey(iter_->key()), &saved_key_);
    iter_->Next();
  }
  FindNextUserEntry(true);
}

void DBIter::NextPrefix(const Slice& prefix) {
  assert(valid_);
  assert(key().starts_with(prefix));
  if (direction_ == kReverse) {
    // iter_ is before the current key's entries; going forward is rare
    // enough here to take one step at a time.
    do {
      Next();
    } while (valid_ && key().starts_with(prefix));
    return;
  }
  // iter_ is on the current key's entry, which has the prefix.
  saved_key_.clear();
  iter_->NextPrefix(prefix);
  FindNextUserEntry(false);
}

void DBIter::Prev() {
  assert(valid_);
  if (direction_ == kForward) {
    // iter_ is on the current entry: step back before every entry of the
    // current key.
    SaveKey(ExtractUserKey(iter_->key()), &saved_key_);
    while (true) {
      iter_->Prev();
      if (!iter_->Valid()) {
        Invalidate();
        return;
      }
      if (icmp_->CompareUserKeys(ExtractUserKey(iter_->key()), saved_key_) <
          0) {
        break;
      }
    }
    direction_ = kReverse;
  }
  FindPrevUserEntry();
}

void DBIter::Seek(const Slice& target) {
  direction_ = kForward;
  ClearSavedValue();
  saved_key_.clear();
  const Slice start =
      (lower_.has_value() && BeforeLower(target)) ? Slice(*lower_) : target;
  SetSeekKey(start, sequence_, kValueTypeForSeek);
  iter_->Seek(seek_key_);
  FindNextUserEntry(false);
}

void DBIter::SeekToFirst() {
  if (lower_.has_value()) {
    Seek(*lower_);
    return;
  }
  direction_ = kForward;
  ClearSavedValue();
  saved_key_.clear();
  iter_->SeekToFirst();
  FindNextUserEntry(false);
}

void DBIter::SeekToLast() {
  direction_ = kReverse;
  ClearSavedValue();
  saved_key_.clear();
  if (upper_.has_value()) {
    // Just before the first entry at or after upper.
    SetSeekKey(*upper_, kMaxSequenceNumber, kValueTypeForSeek);
    iter_->Seek(seek_key_);
    if (iter_->Valid()) {
      iter_->Prev();
    } else {
      iter_->SeekToLast();
    }
  } else {
    iter_->SeekToLast();
  }
  FindPrevUserEntry();
}

void DBIter::SeekForPrev(const Slice& target) {
  if (AtOrAfterUpper(target)) {
    SeekToLast();
    return;
  }
  direction_ = kReverse;
  ClearSavedValue();
  saved_key_.clear();
  // (target, 0, kTypeDeletion) is the last possible internal key of
  // target: position on the first entry after it, then step back.
  SetSeekKey(target, 0, kTypeDeletion);
  iter_->Seek(seek_key_);
  if (iter_->Valid() &&
      icmp_->CompareUserKeys(ExtractUserKey(iter_->key()), target) == 0) {
    iter_->Next();  // that very entry exists
  }
  if (iter_->Valid()) {
    iter_->Prev();
  } else {
    iter_->SeekToLast();
  }
  FindPrevUserEntry();
}

}  // namespace shale
