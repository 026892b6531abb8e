// libFuzzer target for the WAL reader (log::Reader) and for WAL replay's
// next step, batch validation. Any input must yield records or reported
// damage - never a crash, a hang, a sanitizer report, a record the writer
// cannot have produced reported as good, or a report without a file name.
//
// Random bytes rarely pass a CRC32C, so most inputs are edits to a valid
// WAL built once at start-up (records of several sizes, one spanning three
// blocks):
//
//   input := mode: uint8  rest
//   mode & 3 == 0: rest is the whole file
//   otherwise:     rest is an edit list (fuzz_util.h EditSeed); mode & 4
//                  also truncates
//   mode & 8:      read with checksum verification off
//
// Build: cmake -DSHALE_FUZZ=ON with clang (see `make fuzz`).

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "db/write_batch.h"
#include "fuzz/fuzz_util.h"
#include "log/log_format.h"
#include "log/log_reader.h"
#include "log/log_writer.h"
#include "util/comparator.h"

namespace shale {
namespace {

const std::string& SeedWal() {
  static const std::string* seed = [] {
    fuzz::StringSink sink;
    log::Writer writer(&sink);
    for (int i = 0; i < 40; i++) {
      WriteBatch b;
      b.Put("key" + std::to_string(i), std::string(i * 13 % 200, 'v'));
      if (i % 5 == 0) b.Delete("key" + std::to_string(i - 1));
      if (i % 7 == 0) b.DeleteRange("a", "b");
      if (i == 20) b.Put("big", std::string(2 * log::kBlockSize + 100, 'x'));
      if (!writer.AddRecord(b.Data()).ok()) abort();
    }
    return new std::string(std::move(sink.data()));
  }();
  return *seed;
}

// Checks that every report names the file and that offsets stay inside it.
class CheckingReporter final : public log::Reader::Reporter {
 public:
  explicit CheckingReporter(uint64_t file_size) : file_size_(file_size) {}
  void Corruption(uint64_t offset, size_t bytes,
                  const Status& reason) override {
    if (offset > file_size_) {
      fprintf(stderr, "report offset %llu past the file (%llu bytes)\n",
              static_cast<unsigned long long>(offset),
              static_cast<unsigned long long>(file_size_));
      abort();
    }
    if (reason.ToString().find("fuzz.log") == std::string::npos) {
      fprintf(stderr, "report without the file name: %s\n",
              reason.ToString().c_str());
      abort();
    }
  }

 private:
  const uint64_t file_size_;
};

void ReadEverything(const std::string& file, bool checksum) {
  fuzz::StringSequentialFile src(file);
  CheckingReporter reporter(file.size());
  log::Reader reader(&src, "fuzz.log", &reporter, checksum);
  Slice record;
  std::string scratch;
  uint64_t last_end = 0;
  for (int n = 0; n < 100000 && reader.ReadRecord(&record, &scratch); n++) {
    if (reader.LastRecordEnd() > file.size() ||
        reader.LastRecordEnd() < last_end) {
      fprintf(stderr, "record end %llu out of order or past the file\n",
              static_cast<unsigned long long>(reader.LastRecordEnd()));
      abort();
    }
    last_end = reader.LastRecordEnd();
    // What replay does next with a record: validate it as a batch. With
    // checksums on, damage inside a record that passed its CRC cannot come
    // from the seed, but the validator must still never misbehave.
    WriteBatchSummary summary;
    ValidateWriteBatch(record, BytewiseComparator(), &summary).ok();
  }
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
    file = shale::fuzz::EditSeed(shale::SeedWal(), data, size, mode & 4);
  }
  shale::ReadEverything(file, (mode & 8) == 0);
  return 0;
}
