// WriteBatch: the engine's unit of atomic writing, as one byte buffer.
//
// The buffer format is the one of include/shale/engine.h, version 1:
//
//   batch     := header record*
//   header    := sequence: fixed64   (ignored on input; assigned by the DB)
//                count:    fixed32   (number of records)
//   record    := kTypeDeletion      varstring               -- Delete(key)
//              | kTypeValue         varstring varstring     -- Put(key, value)
//              | kTypeRangeDeletion varstring varstring     -- DeleteRange(
//                                                               begin, end)
//   varstring := len: varint32, bytes[len]
//
// The tags are the ValueType values of db/dbformat.h (0x00, 0x01, 0x02).
// The same bytes, with the sequence filled in, are the payload of a WAL
// record (several callers' batches may share one WAL record: one header,
// then the records of each batch back to back). Batches live on in Raft
// logs, so this format is frozen: DO NOT CHANGE the meaning of any tag;
// add new tags for new record kinds.
//
// Thread safety: a WriteBatch is used by one thread at a time.

#ifndef SHALE_DB_WRITE_BATCH_H_
#define SHALE_DB_WRITE_BATCH_H_

#include <cstdint>
#include <string>

#include "db/dbformat.h"
#include "util/coding.h"
#include "util/slice.h"
#include "util/status.h"

namespace shale {

class MemTable;

constexpr size_t kBatchHeaderSize = 12;

// Builds a batch buffer (for C++ callers: tests, tools). The C API takes
// buffers built by the caller.
class WriteBatch {
 public:
  WriteBatch() { Clear(); }

  void Put(const Slice& key, const Slice& value);
  void Delete(const Slice& key);
  // Deletes every key in [begin, end).
  void DeleteRange(const Slice& begin, const Slice& end);
  void Clear() { rep_.assign(kBatchHeaderSize, '\0'); }

  uint32_t Count() const { return DecodeFixed32(rep_.data() + 8); }
  Slice Data() const { return rep_; }
  size_t ApproximateSize() const { return rep_.size(); }

 private:
  void SetCount(uint32_t n) { EncodeFixed32(&rep_[8], n); }

  std::string rep_;
};

// What ValidateWriteBatch learned about a batch.
struct WriteBatchSummary {
  uint32_t count = 0;
  // Records of each kind.
  uint32_t puts = 0;
  uint32_t deletes = 0;
  uint32_t range_deletes = 0;
};

// Checks a whole batch buffer before any of it is applied, so that a bad
// batch is rejected as a unit: a short header, an unknown tag, a truncated
// or oversized length, trailing bytes or a count that does not match the
// records are Corruption; a DeleteRange whose begin sorts after its end is
// InvalidArgument. Never reads outside batch.
Status ValidateWriteBatch(const Slice& batch, const Comparator* user_cmp,
                          WriteBatchSummary* summary);

// Inserts the records (the bytes after the header) into mem, the i-th
// record with sequence number first_seq + i. Returns the number of records.
// REQUIRES: the records were validated; the caller is mem's only writer.
uint32_t InsertBatchRecords(const Slice& records, SequenceNumber first_seq,
                            MemTable* mem);

// Calls fn(type, key, value) for each record of validated records (value is
// empty for deletions, the end key for range deletions).
template <typename Fn>
void ForEachBatchRecord(const Slice& records, Fn&& fn) {
  const char* p = records.data();
  const char* const limit = p + records.size();
  while (p < limit) {
    const ValueType type = static_cast<ValueType>(*p++);
    uint32_t len;
    p = GetVarint32Ptr(p, limit, &len);
    Slice key(p, len);
    p += len;
    Slice value;
    if (type != kTypeDeletion) {
      p = GetVarint32Ptr(p, limit, &len);
      value = Slice(p, len);
      p += len;
    }
    fn(type, key, value);
  }
}

}  // namespace shale

#endif  // SHALE_DB_WRITE_BATCH_H_
