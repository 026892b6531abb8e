// Bounded iterators read while other threads write just past their bounds
// (found by tools/stress: a reverse scan of [a, b) returned b). The keys
// written concurrently are newer than the iterator, so it must never see
// them, and it must never step outside its bounds.

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "db/db_test_util.h"

namespace shale {
namespace {

class DBIterRaceTest : public test::DBTestBase {
 protected:
  DBIterRaceTest() : DBTestBase("db_iter_race_test") {
    options_.write_buffer_size = 64 << 10;
    options_.target_file_size_base = 64 << 10;
    options_.max_bytes_for_level_base = 256 << 10;
    options_.level0_file_num_compaction_trigger = 2;
    options_.block_size = 1024;
  }

  static std::string Key(int i) {
    char buf[16];
    snprintf(buf, sizeof(buf), "k%06d", i);
    return buf;
  }
};

TEST_F(DBIterRaceTest, BoundedScansStayInBoundsUnderConcurrentWrites) {
  Reopen();
  constexpr int kKeys = 2000, kChunk = 32;
  for (int i = 0; i < kKeys; i++) {
    ASSERT_TRUE(Put(Key(i), std::string(100, 'v')).ok());
  }
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0};
  std::string first_bad;
  std::vector<std::thread> writers;
  for (int t = 0; t < 3; t++) {
    writers.emplace_back([&, t] {
      uint64_t x = t + 1;
      while (!stop.load()) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        const int k = (x >> 33) % kKeys;
        WriteBatch b;
        if ((x >> 20) % 8 == 0) {
          b.DeleteRange(Key(k), Key(k + 1 + (x >> 50) % 8));
        } else if ((x >> 20) % 4 == 0) {
          b.Delete(Key(k));
        } else {
          b.Put(Key(k), std::string(50 + (x >> 40) % 100, 'w'));
        }
        EXPECT_TRUE(Write(b).ok());
      }
    });
  }
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(4);
  uint64_t scans = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    for (int c = 0; c + kChunk <= kKeys; c += kChunk) {
      const std::string lo = Key(c), hi = Key(c + kChunk);
      Slice l(lo), h(hi);
      std::unique_ptr<DBIter> it(db_->NewIterator(ReadOptions(), &l, &h));
      const bool reverse = (scans++ % 2) == 1;
      std::string last;
      for (reverse ? it->SeekToLast() : it->SeekToFirst(); it->Valid();
           reverse ? it->Prev() : it->Next()) {
        const std::string k = it->key().ToString();
        const bool out = k < lo || k >= hi;
        const bool disorder =
            !last.empty() && (reverse ? k >= last : k <= last);
        if ((out || disorder) && bad.fetch_add(1) == 0) {
          first_bad = std::string(reverse ? "reverse" : "forward") +
                      " scan of [" + lo + ", " + hi + ") returned " + k +
                      " after '" + last + "'";
        }
        last = k;
      }
      EXPECT_TRUE(it->status().ok()) << it->status().ToString();
    }
  }
  stop.store(true);
  for (std::thread& w : writers) w.join();
  EXPECT_EQ(0, bad.load()) << first_bad << " (" << scans << " scans)";
}

}  // namespace
}  // namespace shale
