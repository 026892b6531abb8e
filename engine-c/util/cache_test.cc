// Tests of the sharded LRU cache: hits and misses, eviction order, pinning,
// erase, deleters running exactly once, capacity accounting, concurrency.

#include "util/cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "util/coding.h"
#include "util/random.h"

namespace shale {

namespace {

std::string EncodeKey(int k) {
  std::string result;
  PutFixed32(&result, k);
  return result;
}

int DecodeKey(const Slice& k) {
  EXPECT_EQ(4u, k.size());
  return static_cast<int>(DecodeFixed32(k.data()));
}

void* EncodeValue(uintptr_t v) { return reinterpret_cast<void*>(v); }
int DecodeValue(void* v) {
  return static_cast<int>(reinterpret_cast<uintptr_t>(v));
}

// Records deleter calls. Tests run one at a time, so one instance suffices.
struct DeleterLog {
  std::vector<int> keys;
  std::vector<int> values;
};
DeleterLog* current_log = nullptr;

void RecordingDeleter(const Slice& key, void* v) {
  current_log->keys.push_back(DecodeKey(key));
  current_log->values.push_back(DecodeValue(v));
}

class CacheTest : public testing::Test {
 protected:
  static constexpr size_t kCapacity = 1000;

  CacheTest() : cache_(NewLRUCache(kCapacity, 0)) { current_log = &log_; }
  ~CacheTest() override {
    cache_.reset();  // its deleters log to log_
    current_log = nullptr;
  }

  int Lookup(int key) {
    Cache::Handle* h = cache_->Lookup(EncodeKey(key));
    const int r = (h == nullptr) ? -1 : DecodeValue(cache_->Value(h));
    if (h != nullptr) cache_->Release(h);
    return r;
  }

  void Insert(int key, int value, int charge = 1) {
    cache_->Release(InsertAndReturnHandle(key, value, charge));
  }

  Cache::Handle* InsertAndReturnHandle(int key, int value, int charge = 1) {
    return cache_->Insert(EncodeKey(key), EncodeValue(value), charge,
                          &RecordingDeleter);
  }

  void Erase(int key) { cache_->Erase(EncodeKey(key)); }

  DeleterLog log_;
  std::unique_ptr<Cache> cache_;
};

}  // namespace

TEST_F(CacheTest, HitAndMiss) {
  ASSERT_EQ(-1, Lookup(100));

  Insert(100, 101);
  ASSERT_EQ(101, Lookup(100));
  ASSERT_EQ(-1, Lookup(200));
  ASSERT_EQ(-1, Lookup(300));

  Insert(200, 201);
  ASSERT_EQ(101, Lookup(100));
  ASSERT_EQ(201, Lookup(200));
  ASSERT_EQ(-1, Lookup(300));

  Insert(100, 102);  // replaces
  ASSERT_EQ(102, Lookup(100));
  ASSERT_EQ(201, Lookup(200));
  ASSERT_EQ(-1, Lookup(300));

  ASSERT_EQ(1u, log_.keys.size());
  ASSERT_EQ(100, log_.keys[0]);
  ASSERT_EQ(101, log_.values[0]);
}

TEST_F(CacheTest, Erase) {
  Erase(200);
  ASSERT_EQ(0u, log_.keys.size());

  Insert(100, 101);
  Insert(200, 201);
  Erase(100);
  ASSERT_EQ(-1, Lookup(100));
  ASSERT_EQ(201, Lookup(200));
  ASSERT_EQ(1u, log_.keys.size());
  ASSERT_EQ(100, log_.keys[0]);
  ASSERT_EQ(101, log_.values[0]);

  Erase(100);
  ASSERT_EQ(-1, Lookup(100));
  ASSERT_EQ(201, Lookup(200));
  ASSERT_EQ(1u, log_.keys.size());
}

TEST_F(CacheTest, EntriesArePinned) {
  Insert(100, 101);
  Cache::Handle* h1 = cache_->Lookup(EncodeKey(100));
  ASSERT_EQ(101, DecodeValue(cache_->Value(h1)));

  Insert(100, 102);
  Cache::Handle* h2 = cache_->Lookup(EncodeKey(100));
  ASSERT_EQ(102, DecodeValue(cache_->Value(h2)));
  ASSERT_EQ(0u, log_.keys.size());  // 101 is replaced but still pinned

  cache_->Release(h1);
  ASSERT_EQ(1u, log_.keys.size());
  ASSERT_EQ(100, log_.keys[0]);
  ASSERT_EQ(101, log_.values[0]);

  Erase(100);
  ASSERT_EQ(-1, Lookup(100));
  ASSERT_EQ(1u, log_.keys.size());  // 102 still pinned

  cache_->Release(h2);
  ASSERT_EQ(2u, log_.keys.size());
  ASSERT_EQ(100, log_.keys[1]);
  ASSERT_EQ(102, log_.values[1]);
}

TEST_F(CacheTest, EvictionPolicy) {
  Insert(100, 101);
  Insert(200, 201);
  Insert(300, 301);
  Cache::Handle* h = cache_->Lookup(EncodeKey(300));

  // Frequently used entry must be kept around, as must pinned entries.
  for (int i = 0; i < static_cast<int>(kCapacity) + 100; i++) {
    Insert(1000 + i, 2000 + i);
    ASSERT_EQ(2000 + i, Lookup(1000 + i));
    ASSERT_EQ(101, Lookup(100));
  }
  ASSERT_EQ(101, Lookup(100));
  ASSERT_EQ(-1, Lookup(200));
  ASSERT_EQ(301, Lookup(300));
  cache_->Release(h);
}

TEST_F(CacheTest, UseExceedsCacheSizeWhilePinned) {
  // Overfill the cache, keeping handles on all inserted entries.
  std::vector<Cache::Handle*> h;
  for (int i = 0; i < static_cast<int>(kCapacity) + 100; i++) {
    h.push_back(InsertAndReturnHandle(1000 + i, 2000 + i));
  }
  // All entries are still there: pinned ones cannot be evicted.
  for (size_t i = 0; i < h.size(); i++) {
    ASSERT_EQ(2000 + static_cast<int>(i), Lookup(1000 + static_cast<int>(i)));
  }
  EXPECT_EQ(kCapacity + 100, cache_->TotalCharge());
  for (Cache::Handle* handle : h) cache_->Release(handle);
  // Unpinning brings usage back within capacity, oldest entries first.
  EXPECT_EQ(kCapacity, cache_->TotalCharge());
  EXPECT_EQ(-1, Lookup(1000));
  EXPECT_EQ(2000 + static_cast<int>(kCapacity) + 99,
            Lookup(1000 + static_cast<int>(kCapacity) + 99));
  EXPECT_EQ(100u, log_.keys.size());
}

TEST_F(CacheTest, HeavyEntries) {
  // Add a bunch of light and heavy entries and then count the combined
  // size of items still in the cache, which must be about the capacity.
  const int kLight = 1;
  const int kHeavy = 10;
  int added = 0;
  int index = 0;
  while (added < 2 * static_cast<int>(kCapacity)) {
    const int weight = (index & 1) ? kLight : kHeavy;
    Insert(index, 1000 + index, weight);
    added += weight;
    index++;
  }
  int cached_weight = 0;
  for (int i = 0; i < index; i++) {
    const int weight = (i & 1 ? kLight : kHeavy);
    const int r = Lookup(i);
    if (r >= 0) {
      cached_weight += weight;
      ASSERT_EQ(1000 + i, r);
    }
  }
  ASSERT_LE(cached_weight, static_cast<int>(kCapacity));
  ASSERT_GT(cached_weight, static_cast<int>(kCapacity) - kHeavy);
  ASSERT_EQ(static_cast<size_t>(cached_weight), cache_->TotalCharge());
}

TEST_F(CacheTest, NewIdIsUnique) {
  const uint64_t a = cache_->NewId();
  const uint64_t b = cache_->NewId();
  ASSERT_NE(a, b);
}

TEST_F(CacheTest, Prune) {
  Insert(1, 100);
  Insert(2, 200);
  Cache::Handle* handle = cache_->Lookup(EncodeKey(1));
  ASSERT_TRUE(handle);
  cache_->Prune();
  cache_->Release(handle);

  ASSERT_EQ(100, Lookup(1));  // was pinned during Prune
  ASSERT_EQ(-1, Lookup(2));
  ASSERT_EQ(1u, log_.keys.size());
}

TEST_F(CacheTest, ZeroCapacityCachesNothing) {
  cache_.reset(NewLRUCache(0, 0));
  Cache::Handle* h = InsertAndReturnHandle(1, 100);
  ASSERT_EQ(100, DecodeValue(cache_->Value(h)));
  ASSERT_EQ(-1, Lookup(1));
  ASSERT_EQ(0u, log_.keys.size());
  cache_->Release(h);
  ASSERT_EQ(1u, log_.keys.size());
  ASSERT_EQ(0u, cache_->TotalCharge());
}

TEST_F(CacheTest, DestructorRunsDeleters) {
  Insert(1, 100);
  Insert(2, 200);
  cache_.reset();
  ASSERT_EQ(2u, log_.keys.size());
}

// Shards split the capacity; the whole cache still honours it.
TEST(ShardedCacheTest, CapacityAcrossShards) {
  std::unique_ptr<Cache> cache(NewLRUCache(1 << 20, 4));
  EXPECT_EQ(size_t{1} << 20, cache->Capacity());
  for (int i = 0; i < 10000; i++) {
    std::string key = EncodeKey(i);
    cache->Release(
        cache->Insert(key, nullptr, 1024, [](const Slice&, void*) {}));
  }
  EXPECT_LE(cache->TotalCharge(), size_t{1} << 20);
  EXPECT_GE(cache->TotalCharge(), (size_t{1} << 20) * 3 / 4);
}

// Many threads inserting, looking up, erasing and releasing at once: every
// deleter runs exactly once, and every lookup sees the value of its key.
TEST(ShardedCacheTest, Concurrent) {
  std::atomic<int> live{0};
  struct Value {
    explicit Value(int k, std::atomic<int>* l) : key(k), live(l) {
      live->fetch_add(1);
    }
    ~Value() { live->fetch_sub(1); }
    int key;
    std::atomic<int>* live;
  };
  std::unique_ptr<Cache> cache(NewLRUCache(64 * 100, 3));
  std::vector<std::thread> threads;
  std::atomic<int> errors{0};
  for (int t = 0; t < 4; t++) {
    threads.emplace_back([&, t] {
      Random rnd(1000 + t);
      std::vector<Cache::Handle*> pinned;
      for (int i = 0; i < 20000; i++) {
        const int k = static_cast<int>(rnd.Uniform(500));
        const std::string key = EncodeKey(k);
        switch (rnd.Uniform(4)) {
          case 0:
            pinned.push_back(cache->Insert(
                key, new Value(k, &live), 64,
                [](const Slice&, void* v) { delete static_cast<Value*>(v); }));
            break;
          case 1:
          case 2: {
            Cache::Handle* h = cache->Lookup(key);
            if (h != nullptr) {
              if (static_cast<Value*>(cache->Value(h))->key != k) errors++;
              pinned.push_back(h);
            }
            break;
          }
          case 3:
            cache->Erase(key);
            break;
        }
        if (pinned.size() > 8) {
          cache->Release(pinned.front());
          pinned.erase(pinned.begin());
        }
      }
      for (Cache::Handle* h : pinned) cache->Release(h);
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(0, errors.load());
  EXPECT_LE(cache->TotalCharge(), size_t{64 * 100});
  cache.reset();
  EXPECT_EQ(0, live.load());  // every value deleted exactly once
}

}  // namespace shale
