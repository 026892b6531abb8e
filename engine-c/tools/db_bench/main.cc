// db_bench: the Shale engine's benchmark tool. It accepts RocksDB 7.8.3
// db_bench's flags (the subset in flags.h; any other flag is an error) and
// prints its result lines, so both tools can run one command line side by
// side (scripts/compare-rocksdb, docs/benchmarks.md):
//
//   db_bench --benchmarks=fillrandom,readrandom --num=1000000 --bloom_bits=10

#include <cstdio>
#include <string>

#include "tools/db_bench/benchmark.h"
#include "tools/db_bench/flags.h"

int main(int argc, char** argv) {
  shale::bench::Flags flags;
  bool help = false;
  std::string error;
  if (!shale::bench::ParseFlags(argc, argv, &flags, &help, &error)) {
    fprintf(stderr, "db_bench: %s\n", error.c_str());
    return 2;
  }
  if (help) {
    fputs(shale::bench::FlagsHelp().c_str(), stdout);
    return 0;
  }
  if (flags.num <= 0 || flags.key_size <= 0 || flags.value_size < 0 ||
      flags.threads <= 0) {
    fprintf(stderr,
            "db_bench: --num, --key_size and --threads must be positive, "
            "--value_size not negative\n");
    return 2;
  }
  shale::bench::Benchmark bench(flags);
  return bench.Run();
}
