// libFuzzer target for the SST reader: Table::Open, iteration both ways,
// Seek, Get, MultiGet and the range-tombstone iterator over damaged files.
// Any input must yield OK or an error status - never a crash, a hang, a
// sanitizer report or an absurd allocation.
//
// Random bytes rarely get past the footer's checksum, so most inputs are
// read as edits to a valid SST built once at start-up:
//
//   input := mode: uint8  rest
//   mode & 3 == 0: rest is the whole file
//   otherwise:     rest := truncate: fixed16  edit*
//                  edit := offset: fixed16  xor: uint8
//                  (offsets taken modulo the file size; truncate, modulo
//                  the size + 1, keeps that many bytes when mode & 4)
//   mode & 8:      read with checksum verification off
//
// Not built by CMake (it needs clang's libFuzzer). Build and run from
// engine-c/:
//   clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined \
//     -msse4.2 -mpclmul -I. fuzz/sst_reader_fuzzer.cc \
//     $(ls table/*.cc util/*.cc | grep -v _test.cc) -lsnappy \
//     -o sst_reader_fuzzer
//   mkdir -p corpus && ./sst_reader_fuzzer -max_total_time=300 \
//     -max_len=4096 corpus

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "table/filter_policy.h"
#include "table/table.h"
#include "table/table_builder.h"
#include "util/cache.h"
#include "util/coding.h"
#include "util/comparator.h"
#include "util/env.h"

namespace shale {
namespace {

const FilterPolicy* Bloom() {
  static const FilterPolicy* policy = NewBloomFilterPolicy(10);
  return policy;
}

TableOptions Options(Cache* cache) {
  TableOptions o;
  o.comparator = BytewiseComparator();
  o.filter_policy = Bloom();
  o.block_size = 256;
  o.block_restart_interval = 4;
  o.block_cache = cache;
  return o;
}

const std::string& SeedTable() {
  static const std::string* seed = [] {
    fuzz::StringSink sink;
    TableBuilder builder(Options(nullptr), &sink);
    for (int i = 0; i < 300; i++) {
      char key[16];
      snprintf(key, sizeof(key), "key%06d", i * 7);
      builder.Add(key, std::string(i % 40, static_cast<char>('a' + i % 26)));
    }
    builder.AddRangeTombstone("key000100", "key000200");
    builder.SetUserProperty("fuzz", "seed");
    if (!builder.Finish().ok()) abort();
    return new std::string(std::move(sink.data()));
  }();
  return *seed;
}

void Found(void* arg, size_t, const Slice& k, const Slice& v) {
  *static_cast<size_t*>(arg) += k.size() + v.size();
}

void ReadEverything(const std::string& file, bool verify) {
  std::unique_ptr<Cache> cache(NewLRUCache(64 << 10));
  std::unique_ptr<Table> table;
  Status s = Table::Open(Options(cache.get()),
                         std::make_unique<fuzz::StringRandomAccessFile>(file),
                         file.size(), 1, 0, "fuzz.sst", &table);
  if (!s.ok()) return;
  TableReadOptions ro;
  ro.verify_checksums = verify;
  size_t sink = 0;
  {
    std::unique_ptr<Iterator> it(table->NewIterator(ro));
    int n = 0;
    for (it->SeekToFirst(); it->Valid() && n < 100000; it->Next(), n++) {
      sink += it->key().size() + it->value().size();
    }
    for (it->SeekToLast(); it->Valid() && n < 200000; it->Prev(), n++) {
      sink += it->key().size();
    }
    it->Seek("key000500");
    if (it->Valid()) it->Prev();
  }
  const char* probes[] = {"", "key000000", "key000350", "key001000", "zzz"};
  for (const char* p : probes) table->Get(ro, p, &sink, &Found);
  Slice keys[5] = {probes[0], probes[1], probes[2], probes[3], probes[4]};
  Status statuses[5];
  table->MultiGet(ro, 5, keys, &sink, &Found, statuses);
  {
    std::unique_ptr<Iterator> rd(table->NewRangeTombstoneIterator(ro));
    for (rd->SeekToFirst(); rd->Valid(); rd->Next()) sink += rd->key().size();
  }
  table->ApproximateOffsetOf("key000400");
  (void)sink;
}

}  // namespace
}  // namespace shale

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  data++;
  size--;
  std::string file;
  if ((mode & 3) == 0) {
    file.assign(reinterpret_cast<const char*>(data), size);
  } else {
    file = shale::SeedTable();
    uint16_t truncate = 0;
    if (size >= 2) {
      memcpy(&truncate, data, 2);
      data += 2;
      size -= 2;
    }
    for (; size >= 3; data += 3, size -= 3) {
      uint16_t offset;
      memcpy(&offset, data, 2);
      file[offset % file.size()] ^= static_cast<char>(data[2]);
    }
    if (mode & 4) file.resize(truncate % (file.size() + 1));
  }
  shale::ReadEverything(file, (mode & 8) == 0);
  return 0;
}
