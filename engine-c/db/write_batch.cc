#include "db/write_batch.h"

#include "db/memtable.h"

namespace shale {

void WriteBatch::Put(const Slice& key, const Slice& value) {
  SetCount(Count() + 1);
  rep_.push_back(static_cast<char>(kTypeValue));
  PutLengthPrefixedSlice(&rep_, key);
  PutLengthPrefixedSlice(&rep_, value);
}

void WriteBatch::Delete(const Slice& key) {
  SetCount(Count() + 1);
  rep_.push_back(static_cast<char>(kTypeDeletion));
  PutLengthPrefixedSlice(&rep_, key);
}

void WriteBatch::DeleteRange(const Slice& begin, const Slice& end) {
  SetCount(Count() + 1);
  rep_.push_back(static_cast<char>(kTypeRangeDeletion));
  PutLengthPrefixedSlice(&rep_, begin);
  PutLengthPrefixedSlice(&rep_, end);
}

namespace {

// Reads one varstring from [*p, limit); false if truncated or malformed.
inline bool ReadVarstring(const char** p, const char* limit, Slice* out) {
  uint32_t len;
  const char* q = GetVarint32Ptr(*p, limit, &len);
  if (q == nullptr || len > static_cast<size_t>(limit - q)) return false;
  *out = Slice(q, len);
  *p = q + len;
  return true;
}

Status BatchCorruption(const char* what, size_t offset) {
  return Status::Corruption("write batch: " + std::string(what) +
                            " at offset " + std::to_string(offset));
}

}  // namespace

Status ValidateWriteBatch(const Slice& batch, const Comparator* user_cmp,
                          WriteBatchSummary* summary) {
  *summary = WriteBatchSummary();
  if (batch.size() < kBatchHeaderSize) {
    return Status::Corruption("write batch: " + std::to_string(batch.size()) +
                              " bytes is shorter than the 12-byte header");
  }
  const uint32_t declared = DecodeFixed32(batch.data() + 8);
  const char* const base = batch.data();
  const char* p = base + kBatchHeaderSize;
  const char* const limit = base + batch.size();
  uint32_t found = 0;
  while (p < limit) {
    const size_t record_offset = p - base;
    const uint8_t tag = static_cast<uint8_t>(*p++);
    Slice key, value;
    switch (tag) {
      case kTypeDeletion:
        if (!ReadVarstring(&p, limit, &key)) {
          return BatchCorruption("truncated Delete record", record_offset);
        }
        summary->deletes++;
        break;
      case kTypeValue:
        if (!ReadVarstring(&p, limit, &key) ||
            !ReadVarstring(&p, limit, &value)) {
          return BatchCorruption("truncated Put record", record_offset);
        }
        summary->puts++;
        break;
      case kTypeRangeDeletion:
        if (!ReadVarstring(&p, limit, &key) ||
            !ReadVarstring(&p, limit, &value)) {
          return BatchCorruption("truncated DeleteRange record", record_offset);
        }
        if (user_cmp->Compare(key, value) > 0) {
          return Status::InvalidArgument(
              "write batch: DeleteRange begin '" + EscapeKey(key) +
              "' sorts after end '" + EscapeKey(value) +
              "' (record at offset " + std::to_string(record_offset) + ")");
        }
        summary->range_deletes++;
        break;
      default:
        return BatchCorruption(
            ("unknown record tag " + std::to_string(tag)).c_str(),
            record_offset);
    }
    found++;
    if (found == 0) {
      return BatchCorruption("more than 2^32 records", record_offset);
    }
  }
  if (found != declared) {
    return Status::Corruption("write batch: header says " +
                              std::to_string(declared) + " records, found " +
                              std::to_string(found));
  }
  summary->count = found;
  return Status::OK();
}

uint32_t InsertBatchRecords(const Slice& records, SequenceNumber first_seq,
                            MemTable* mem) {
  SequenceNumber seq = first_seq;
  ForEachBatchRecord(records,
                     [&](ValueType type, const Slice& key, const Slice& value) {
                       mem->Add(seq++, type, key, value);
                     });
  return static_cast<uint32_t>(seq - first_seq);
}

}  // namespace shale
