// libFuzzer target for the WriteBatch decoder: ValidateWriteBatch, then (for
// batches it accepts) ForEachBatchRecord and InsertBatchRecords into a
// memtable. Batch bytes arrive from Raft logs and from the C API, so the
// decoder is the engine's front door for untrusted input.
//
// Properties checked on every input:
//   - validation never reads outside the buffer (ASan) or misbehaves;
//   - an accepted batch has exactly the records its header counts, of the
//     kinds the summary reports;
//   - re-encoding the decoded records with WriteBatch yields a batch that
//     validates and decodes to the same records, no longer than the input
//     (the decoder accepts over-long varints, as LevelDB's does, so the
//     bytes themselves may differ): nothing is silently dropped or altered;
//   - the memtable receives every record.
//
// Build: cmake -DSHALE_FUZZ=ON with clang (see `make fuzz`).

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "db/dbformat.h"
#include "db/memtable.h"
#include "db/write_batch.h"
#include "util/comparator.h"

namespace {

void Fail(const char* what) {
  fprintf(stderr, "write_batch_fuzzer: %s\n", what);
  abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shale;
  const Slice batch(reinterpret_cast<const char*>(data), size);
  WriteBatchSummary summary;
  if (!ValidateWriteBatch(batch, BytewiseComparator(), &summary).ok()) {
    return 0;
  }
  if (summary.count != DecodeFixed32(batch.data() + 8)) {
    Fail("summary count differs from the header");
  }
  if (summary.puts + summary.deletes + summary.range_deletes != summary.count) {
    Fail("record kinds do not add up to the count");
  }
  const Slice records(batch.data() + kBatchHeaderSize,
                      batch.size() - kBatchHeaderSize);
  WriteBatch again;
  std::vector<std::string> decoded;
  ForEachBatchRecord(
      records, [&](ValueType type, const Slice& key, const Slice& value) {
        decoded.push_back(std::to_string(type) + "/" + key.ToString() + "/" +
                          value.ToString());
        switch (type) {
          case kTypeValue:
            again.Put(key, value);
            break;
          case kTypeDeletion:
            again.Delete(key);
            break;
          case kTypeRangeDeletion:
            again.DeleteRange(key, value);
            break;
          default:
            Fail("unknown type from an accepted batch");
        }
      });
  if (decoded.size() != summary.count) {
    Fail("ForEachBatchRecord count mismatch");
  }
  const Slice re = again.Data();
  if (re.size() > batch.size()) Fail("re-encoded batch is longer");
  WriteBatchSummary re_summary;
  if (!ValidateWriteBatch(re, BytewiseComparator(), &re_summary).ok()) {
    Fail("re-encoded batch does not validate");
  }
  size_t i = 0;
  ForEachBatchRecord(
      Slice(re.data() + kBatchHeaderSize, re.size() - kBatchHeaderSize),
      [&](ValueType type, const Slice& key, const Slice& value) {
        if (i >= decoded.size() || decoded[i++] != std::to_string(type) + "/" +
                                                       key.ToString() + "/" +
                                                       value.ToString()) {
          Fail("re-encoded batch decodes to other records");
        }
      });
  if (i != decoded.size()) Fail("re-encoded batch has fewer records");
  InternalKeyComparator icmp(BytewiseComparator());
  MemTable* mem = new MemTable(icmp, 1, 0, 1 << 16);
  const uint32_t inserted = InsertBatchRecords(records, 1, mem);
  if (inserted != summary.count) Fail("InsertBatchRecords count mismatch");
  size_t entries = 0;
  {
    std::unique_ptr<Iterator> it(mem->NewIterator());
    for (it->SeekToFirst(); it->Valid(); it->Next()) entries++;
    std::unique_ptr<Iterator> rt(mem->NewRangeTombstoneIterator());
    for (rt->SeekToFirst(); rt->Valid(); rt->Next()) entries++;
  }
  if (entries != summary.count) Fail("memtable entry count mismatch");
  mem->Unref();
  return 0;
}
