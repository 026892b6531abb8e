// Tests of db_bench: flag parsing, the RocksDB-compatible histogram, and
// whole benchmarks run against a real database.

#include <gtest/gtest.h>

#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tools/db_bench/benchmark.h"
#include "tools/db_bench/flags.h"
#include "tools/db_bench/histogram.h"
#include "tools/db_bench/workload.h"
#include "util/testutil.h"

namespace shale::bench {
namespace {

bool Parse(std::vector<std::string> args, Flags* f, std::string* error) {
  std::vector<char*> argv = {const_cast<char*>("db_bench")};
  for (std::string& a : args) argv.push_back(a.data());
  bool help = false;
  return ParseFlags(static_cast<int>(argv.size()), argv.data(), f, &help,
                    error);
}

TEST(DBBenchFlags, Defaults) {
  Flags f;
  EXPECT_EQ(1000000, f.num);
  EXPECT_EQ(64 << 20, f.write_buffer_size);
  EXPECT_EQ(268435456u, f.max_bytes_for_level_base);
  EXPECT_EQ(-1, f.bloom_bits);
  EXPECT_EQ(8 << 20, f.cache_size);
}

TEST(DBBenchFlags, Forms) {
  Flags f;
  std::string error;
  ASSERT_TRUE(Parse(
      {"--num=42", "-reads=7", "--threads", "3", "--histogram", "--nosync",
       "--disable_wal=true", "--compression_ratio=0.25", "--db=x"},
      &f, &error))
      << error;
  EXPECT_EQ(42, f.num);
  EXPECT_EQ(7, f.reads);
  EXPECT_EQ(3, f.threads);
  EXPECT_TRUE(f.histogram);
  EXPECT_FALSE(f.sync);
  EXPECT_TRUE(f.disable_wal);
  EXPECT_DOUBLE_EQ(0.25, f.compression_ratio);
  EXPECT_EQ("x", f.db);
}

TEST(DBBenchFlags, RejectsUnknownAndBadValues) {
  Flags f;
  std::string error;
  EXPECT_FALSE(Parse({"--no_such_flag=1"}, &f, &error));
  EXPECT_NE(std::string::npos, error.find("unknown flag --no_such_flag"));
  EXPECT_FALSE(Parse({"--num=12x"}, &f, &error));
  EXPECT_NE(std::string::npos, error.find("--num"));
  EXPECT_FALSE(Parse({"--sync=maybe"}, &f, &error));
  EXPECT_FALSE(Parse({"--max_bytes_for_level_base=-1"}, &f, &error));
  EXPECT_FALSE(Parse({"--threads=99999999999"}, &f, &error));
  EXPECT_FALSE(Parse({"--num"}, &f, &error));
  EXPECT_FALSE(Parse({"stray"}, &f, &error));
  // --noX only negates booleans.
  EXPECT_FALSE(Parse({"--nonum"}, &f, &error));
}

TEST(DBBenchFlags, HelpListsEveryFlag) {
  const std::string help = FlagsHelp();
  for (const char* name : {"--num ",
                           "--reads ",
                           "--threads ",
                           "--duration ",
                           "--key_size ",
                           "--value_size ",
                           "--compression_type ",
                           "--compression_ratio ",
                           "--block_size ",
                           "--bloom_bits ",
                           "--cache_size ",
                           "--write_buffer_size ",
                           "--max_write_buffer_number ",
                           "--target_file_size_base ",
                           "--max_bytes_for_level_base ",
                           "--max_bytes_for_level_multiplier ",
                           "--level0_file_num_compaction_trigger ",
                           "--level0_slowdown_writes_trigger ",
                           "--level0_stop_writes_trigger ",
                           "--max_background_jobs ",
                           "--sync ",
                           "--disable_wal ",
                           "--use_existing_db ",
                           "--db ",
                           "--statistics ",
                           "--histogram ",
                           "--seed ",
                           "--seek_nexts ",
                           "--batch_size ",
                           "--multiread_batched ",
                           "--benchmark_write_rate_limit "}) {
    EXPECT_NE(std::string::npos, help.find(name)) << name;
  }
}

TEST(DBBenchHistogram, BucketsAndPercentilesMatchRocksDB) {
  Histogram h;
  // Limits are 1, 2, 3, 4, 6, 10, 15, 22, 34, 51, 76, 110, 170, ...
  for (uint64_t v : {0, 1, 2, 3, 4, 5, 6, 7, 10, 11, 100, 111}) h.Add(v);
  const std::string s = h.ToString();
  EXPECT_NE(std::string::npos, s.find("Count: 12 "));
  EXPECT_NE(std::string::npos, s.find("[       0,       1 ]        2"));
  EXPECT_NE(std::string::npos, s.find("(       4,       6 ]        2"));
  EXPECT_NE(std::string::npos, s.find("(       6,      10 ]        2"));
  EXPECT_NE(std::string::npos, s.find("(      76,     110 ]        1"));
  EXPECT_NE(std::string::npos, s.find("(     110,     170 ]        1"));
  // P50: the threshold, 6 samples, is reached in (4, 6], which holds 5 and
  // 6 with 5 samples below it: 4 + (6 - 4) * (6 - 5) / 2 = 5.
  EXPECT_DOUBLE_EQ(5.0, h.Percentile(50));
  EXPECT_DOUBLE_EQ(111.0, h.Percentile(100));
  EXPECT_DOUBLE_EQ(0.0, h.Percentile(0));
}

TEST(DBBenchWorkload, KeysSortNumericallyAndValuesCompress) {
  KeyMaker k(16);
  const std::string a = k.Make(255).ToString();
  const std::string b = k.Make(256).ToString();
  ASSERT_EQ(16u, a.size());
  EXPECT_LT(a, b);
  EXPECT_EQ("00000000", a.substr(8));
  ValueGenerator g(0.5, 100);
  const std::string v = g.Generate(100).ToString();
  // Half random, half a repeat of it.
  EXPECT_EQ(v.substr(0, 50), v.substr(50, 50));
}

// Runs whole benchmarks on a real database and checks their result lines.
TEST(DBBenchRun, BenchmarksReportTheirLines) {
  Flags f;
  f.db = test::TempDir("db_bench_run");
  f.num = 3000;
  f.seed = 7;
  f.write_buffer_size = 64 << 10;
  f.target_file_size_base = 64 << 10;
  f.max_bytes_for_level_base = 256 << 10;
  f.bloom_bits = 10;
  f.seek_nexts = 5;
  f.batch_size = 8;
  f.duration = 0;
  f.histogram = true;
  f.statistics = true;
  f.benchmarks =
      "fillseq,readrandom,readseq,readreverse,seekrandom,multireadrandom,"
      "overwrite,readwhilewriting,waitforcompaction,stats";
  testing::internal::CaptureStdout();
  Benchmark b(f);
  ASSERT_EQ(0, b.Run());
  const std::string out = testing::internal::GetCapturedStdout();
  auto line = [&](const std::string& re) {
    return std::regex_search(out, std::regex(re));
  };
  const std::string head =
      " +: +[0-9.]+ micros/op [0-9]+ ops/sec [0-9.]+ seconds ";
  EXPECT_TRUE(line("fillseq" + head + "3000 operations; +[0-9.]+ MB/s\n"))
      << out;
  // fillseq wrote every key, so every random read finds one.
  EXPECT_TRUE(
      line("readrandom" + head + "3000 operations;.*\\(3000 of 3000 found\\)"));
  EXPECT_TRUE(line("readseq" + head + "3000 operations;"));
  EXPECT_TRUE(line("readreverse" + head + "3000 operations;"));
  EXPECT_TRUE(
      line("seekrandom" + head + "3000 operations;.*\\(3000 of 3000 found\\)"));
  EXPECT_TRUE(line("multireadrandom" + head +
                   "3000 operations;.*\\(3000 of 3000 found\\)"));
  EXPECT_TRUE(line("overwrite" + head + "3000 operations;"));
  EXPECT_TRUE(line("readwhilewriting" + head + "3000 operations;.*found\\)"));
  EXPECT_TRUE(line("waitforcompaction\\(.*\\): finished"));
  EXPECT_TRUE(line("Microseconds per read:\nCount: 3000 "));
  EXPECT_TRUE(line("Microseconds per seek:\nCount: 3000 "));
  EXPECT_TRUE(
      line("Percentiles: P50: [0-9.]+ P75: [0-9.]+ P99: [0-9.]+ P99.9: [0-9.]+ "
           "P99.99: [0-9.]+"));
  EXPECT_TRUE(line("rocksdb.bytes.written COUNT : [1-9][0-9]*\n"));
  EXPECT_TRUE(line("write amplification: [0-9.]+"));
  test::RemoveDirRecursively(f.db);
}

// compact (as RocksDB's) compacts the whole key range: every file ends up
// in one level.
TEST(DBBenchRun, CompactLeavesOneLevel) {
  Flags f;
  f.db = test::TempDir("db_bench_compact");
  f.num = 5000;
  f.write_buffer_size = 64 << 10;
  f.target_file_size_base = 64 << 10;
  f.max_bytes_for_level_base = 128 << 10;
  f.benchmarks = "fillrandom,compact,stats";
  testing::internal::CaptureStdout();
  Benchmark b(f);
  ASSERT_EQ(0, b.Run());
  const std::string out = testing::internal::GetCapturedStdout();
  const size_t levels = out.find("** Level stats **");
  ASSERT_NE(std::string::npos, levels) << out;
  // Level lines: "level files size score"; count those holding files.
  std::istringstream in(out.substr(levels));
  std::string row;
  int non_empty = 0;
  const std::regex level_line(" *[0-9]+ +([0-9]+) +[0-9.]+ +[0-9.]+");
  std::smatch m;
  while (std::getline(in, row)) {
    if (std::regex_match(row, m, level_line) && m[1] != "0") non_empty++;
  }
  EXPECT_EQ(1, non_empty) << out;
  test::RemoveDirRecursively(f.db);
}

TEST(DBBenchRun, FreshBenchmarkRefusesAnExistingDB) {
  Flags f;
  f.db = test::TempDir("db_bench_existing");
  f.num = 100;
  f.use_existing_db = true;
  f.benchmarks = "fillrandom";
  testing::internal::CaptureStdout();
  Benchmark b(f);
  EXPECT_EQ(0, b.Run());
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_NE(std::string::npos, out.find("fillrandom   : skipped"));
  test::RemoveDirRecursively(f.db);
}

}  // namespace
}  // namespace shale::bench
