// Internal keys: how the engine tags every user key with a sequence number
// and an entry type.
//
//   internal_key := user_key trailer
//   trailer      := fixed64(sequence << 8 | type)     (little-endian)
//
// Internal keys order by user key ascending, then by trailer descending, so
// the newest version of a key comes first and a lookup at sequence s lands
// on the newest version visible at s.
//
// Internal keys are stored in WAL-replayed memtables, in every SST and in
// the MANIFEST (file boundaries): their layout and the type values below are
// part of the on-disk format (docs/formats.md).

#ifndef SHALE_DB_DBFORMAT_H_
#define SHALE_DB_DBFORMAT_H_

#include <cstdint>
#include <string>

#include "util/coding.h"
#include "util/comparator.h"
#include "util/slice.h"

namespace shale {

using SequenceNumber = uint64_t;

// Sequence numbers take the high 56 bits of the trailer.
constexpr SequenceNumber kMaxSequenceNumber = (uint64_t{1} << 56) - 1;

// DO NOT CHANGE THESE VALUES: they are embedded in WALs (through the batch
// tags of engine.h, which share them) and SSTs.
enum ValueType : uint8_t {
  kTypeDeletion = 0x0,
  kTypeValue = 0x1,
  kTypeRangeDeletion = 0x2,
};
// The largest type: a seek key (user_key, s, kValueTypeForSeek) sorts before
// every entry of user_key with sequence <= s.
constexpr ValueType kValueTypeForSeek = kTypeRangeDeletion;

inline bool IsValidValueType(uint8_t t) { return t <= kTypeRangeDeletion; }

inline uint64_t PackSequenceAndType(SequenceNumber seq, ValueType t) {
  return (seq << 8) | t;
}

struct ParsedInternalKey {
  Slice user_key;
  SequenceNumber sequence = 0;
  ValueType type = kTypeValue;

  ParsedInternalKey() = default;
  ParsedInternalKey(const Slice& u, SequenceNumber seq, ValueType t)
      : user_key(u), sequence(seq), type(t) {}
  // For messages and tests: 'user_key' @ seq : type, key bytes escaped.
  std::string DebugString() const;
};

// Appends the encoding of key to *result.
void AppendInternalKey(std::string* result, const ParsedInternalKey& key);

// Parses an internal key. Returns false (leaving *result unspecified) if it
// is too short or carries an unknown type.
inline bool ParseInternalKey(const Slice& internal_key,
                             ParsedInternalKey* result) {
  const size_t n = internal_key.size();
  if (n < 8) return false;
  const uint64_t num = DecodeFixed64(internal_key.data() + n - 8);
  const uint8_t c = num & 0xff;
  result->sequence = num >> 8;
  result->type = static_cast<ValueType>(c);
  result->user_key = Slice(internal_key.data(), n - 8);
  return IsValidValueType(c);
}

// REQUIRES: internal_key.size() >= 8
inline Slice ExtractUserKey(const Slice& internal_key) {
  return Slice(internal_key.data(), internal_key.size() - 8);
}

// REQUIRES: internal_key.size() >= 8
inline uint64_t ExtractTrailer(const Slice& internal_key) {
  return DecodeFixed64(internal_key.data() + internal_key.size() - 8);
}

// Orders internal keys: user keys by the user comparator, then trailers
// descending. Also works on table keys in SSTs, which are internal keys.
class InternalKeyComparator final : public Comparator {
 public:
  explicit InternalKeyComparator(const Comparator* user_comparator)
      : Comparator(user_comparator == BytewiseComparator()
                       ? Kind::kInternalBytewise
                       : Kind::kOther),
        user_comparator_(user_comparator),
        bytewise_(user_comparator == BytewiseComparator()) {}

  const char* Name() const override;
  int Compare(const Slice& a, const Slice& b) const override {
    int r = CompareUserKeys(ExtractUserKey(a), ExtractUserKey(b));
    if (r == 0) {
      const uint64_t anum = ExtractTrailer(a);
      const uint64_t bnum = ExtractTrailer(b);
      if (anum > bnum) {
        r = -1;
      } else if (anum < bnum) {
        r = +1;
      }
    }
    return r;
  }
  void FindShortestSeparator(std::string* start,
                             const Slice& limit) const override;
  void FindShortSuccessor(std::string* key) const override;

  // Compares user keys; the common bytewise case avoids a virtual call.
  int CompareUserKeys(const Slice& a, const Slice& b) const {
    return bytewise_ ? a.compare(b) : user_comparator_->Compare(a, b);
  }

  const Comparator* user_comparator() const { return user_comparator_; }

 private:
  const Comparator* const user_comparator_;
  const bool bytewise_;
};

// An owned internal key (file boundaries, iterator positions).
class InternalKey {
 public:
  InternalKey() = default;  // empty: invalid
  InternalKey(const Slice& user_key, SequenceNumber s, ValueType t) {
    AppendInternalKey(&rep_, ParsedInternalKey(user_key, s, t));
  }

  // Returns false if s is not a well-formed internal key.
  bool DecodeFrom(const Slice& s) {
    rep_.assign(s.data(), s.size());
    return !rep_.empty();
  }
  Slice Encode() const { return rep_; }
  Slice user_key() const { return ExtractUserKey(rep_); }
  void SetFrom(const ParsedInternalKey& p) {
    rep_.clear();
    AppendInternalKey(&rep_, p);
  }
  void Clear() { rep_.clear(); }
  bool empty() const { return rep_.empty(); }
  std::string DebugString() const;

 private:
  std::string rep_;
};

// A key for a point lookup at a sequence number, in the forms the memtable
// (length-prefixed) and the SSTs (plain internal key) want. Short keys use
// an inline buffer: a Get does not allocate.
class LookupKey {
 public:
  LookupKey(const Slice& user_key, SequenceNumber sequence);
  LookupKey(const LookupKey&) = delete;
  LookupKey& operator=(const LookupKey&) = delete;
  ~LookupKey() {
    if (start_ != space_) delete[] start_;
  }

  // varint32(internal key length) + internal key: the memtable's form.
  Slice memtable_key() const { return Slice(start_, end_ - start_); }
  Slice internal_key() const { return Slice(kstart_, end_ - kstart_); }
  Slice user_key() const { return Slice(kstart_, end_ - kstart_ - 8); }

 private:
  //   start_   varint32 of internal key length
  //   kstart_  user key, then the 8-byte trailer
  //   end_
  const char* start_;
  const char* kstart_;
  const char* end_;
  char space_[200];
};

// Escapes a key for messages: printable ASCII as is, the rest as \xNN.
std::string EscapeKey(const Slice& key);

}  // namespace shale

#endif  // SHALE_DB_DBFORMAT_H_
