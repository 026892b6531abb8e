// A sharded LRU cache with lazy promotion.
//
// Each shard is a hash table of entries plus one circular list, lru_,
// holding every entry in the cache in insertion order, oldest first. A
// strict LRU would move an entry to the young end on every lookup and on
// every release, touching two neighbouring entries each time - cache misses
// that cost more than the lookup itself once the cache is large. Here a
// lookup only sets the entry's referenced bit; eviction, starting from the
// old end, evicts an entry only if it is unpinned and unreferenced, and
// moves pinned or referenced entries to the young end (clearing the bit)
// instead. This is the second-chance (CLOCK) approximation of LRU: an entry
// used since the eviction hand last passed it survives another round.
//
// An entry that was erased or replaced while pinned is on no list and is
// destroyed when its last handle is released. refs counts the cache's own
// reference (while in_cache) plus one per outstanding handle. Deleters run
// outside the shard mutex, so a deleter that frees a large block never
// holds up other lookups.

#include "util/cache.h"

#include <atomic>
#include <cassert>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "util/hash.h"
#include "util/thread_annotations.h"

namespace shale {

namespace {

struct LRUHandle {
  void* value;
  Cache::Deleter deleter;
  LRUHandle* next_hash;  // chain in the hash table
  LRUHandle* next;       // in lru_
  LRUHandle* prev;
  size_t charge;
  size_t key_length;
  uint32_t hash;
  uint32_t refs;
  bool in_cache;
  bool referenced;   // looked up since eviction last passed it
  char key_data[1];  // beginning of the key (allocated with the handle)

  Slice key() const { return Slice(key_data, key_length); }
};

// An open-chaining hash table whose buckets always number a power of two
// and at least the entries, so chains stay about one long.
class HandleTable {
 public:
  HandleTable() { Resize(); }
  HandleTable(const HandleTable&) = delete;
  HandleTable& operator=(const HandleTable&) = delete;

  LRUHandle* Lookup(const Slice& key, uint32_t hash) {
    return *FindPointer(key, hash);
  }

  // Inserts h, returning the entry it replaces (or nullptr).
  LRUHandle* Insert(LRUHandle* h) {
    LRUHandle** ptr = FindPointer(h->key(), h->hash);
    LRUHandle* old = *ptr;
    h->next_hash = (old == nullptr ? nullptr : old->next_hash);
    *ptr = h;
    if (old == nullptr) {
      ++elems_;
      if (elems_ > length_) Resize();
    }
    return old;
  }

  LRUHandle* Remove(const Slice& key, uint32_t hash) {
    LRUHandle** ptr = FindPointer(key, hash);
    LRUHandle* result = *ptr;
    if (result != nullptr) {
      *ptr = result->next_hash;
      --elems_;
    }
    return result;
  }

 private:
  // The slot that points at the entry for key, or at the trailing nullptr
  // of its chain.
  LRUHandle** FindPointer(const Slice& key, uint32_t hash) {
    LRUHandle** ptr = &list_[hash & (length_ - 1)];
    while (*ptr != nullptr && ((*ptr)->hash != hash || key != (*ptr)->key())) {
      ptr = &(*ptr)->next_hash;
    }
    return ptr;
  }

  void Resize() {
    uint32_t new_length = 16;
    while (new_length < elems_ * 2) new_length *= 2;
    std::unique_ptr<LRUHandle*[]> new_list(new LRUHandle*[new_length]());
    for (uint32_t i = 0; i < length_; i++) {
      LRUHandle* h = list_[i];
      while (h != nullptr) {
        LRUHandle* next = h->next_hash;
        LRUHandle** slot = &new_list[h->hash & (new_length - 1)];
        h->next_hash = *slot;
        *slot = h;
        h = next;
      }
    }
    list_ = std::move(new_list);
    length_ = new_length;
  }

  uint32_t length_ = 0;
  uint32_t elems_ = 0;
  std::unique_ptr<LRUHandle*[]> list_;
};

void FreeHandle(LRUHandle* e) {
  assert(e->refs == 0);
  (*e->deleter)(e->key(), e->value);
  free(e);
}

class LRUShard {
 public:
  LRUShard() { lru_.next = lru_.prev = &lru_; }
  LRUShard(const LRUShard&) = delete;
  LRUShard& operator=(const LRUShard&) = delete;

  ~LRUShard() {
    for (LRUHandle* e = lru_.next; e != &lru_;) {
      LRUHandle* next = e->next;
      assert(e->in_cache && e->refs == 1);  // no handle outstanding
      e->in_cache = false;
      e->refs = 0;
      FreeHandle(e);
      e = next;
    }
  }

  void SetCapacity(size_t capacity) { capacity_ = capacity; }

  Cache::Handle* Insert(const Slice& key, uint32_t hash, void* value,
                        size_t charge, Cache::Deleter deleter) {
    LRUHandle* e =
        static_cast<LRUHandle*>(malloc(sizeof(LRUHandle) - 1 + key.size()));
    if (e == nullptr) throw std::bad_alloc();
    e->value = value;
    e->deleter = deleter;
    e->charge = charge;
    e->key_length = key.size();
    e->hash = hash;
    e->in_cache = false;
    e->referenced = false;
    e->refs = 1;  // the returned handle
    memcpy(e->key_data, key.data(), key.size());

    std::vector<LRUHandle*> dead;
    {
      std::lock_guard<std::mutex> l(mu_);
      if (capacity_ > 0) {
        e->refs++;  // the cache's reference
        e->in_cache = true;
        Append(&lru_, e);
        usage_ += charge;
        entries_++;
        if (LRUHandle* old = table_.Insert(e)) FinishErase(old, &dead);
      }
      // capacity_ == 0 turns caching off: the entry lives only as long as
      // the returned handle.
      EvictLocked(&dead);
    }
    for (LRUHandle* d : dead) FreeHandle(d);
    return reinterpret_cast<Cache::Handle*>(e);
  }

  Cache::Handle* Lookup(const Slice& key, uint32_t hash) {
    std::lock_guard<std::mutex> l(mu_);
    LRUHandle* e = table_.Lookup(key, hash);
    if (e != nullptr) Ref(e);
    return reinterpret_cast<Cache::Handle*>(e);
  }

  void Release(Cache::Handle* handle) {
    LRUHandle* e = reinterpret_cast<LRUHandle*>(handle);
    bool free_it = false;
    std::vector<LRUHandle*> dead;  // allocates only if something is evicted
    {
      std::lock_guard<std::mutex> l(mu_);
      free_it = Unref(e);
      // Inserts may push usage past capacity while entries are pinned; an
      // unpinned entry makes room to get back under it.
      if (usage_ > capacity_) EvictLocked(&dead);
    }
    if (free_it) FreeHandle(e);
    for (LRUHandle* d : dead) FreeHandle(d);
  }

  void Erase(const Slice& key, uint32_t hash) {
    std::vector<LRUHandle*> dead;
    {
      std::lock_guard<std::mutex> l(mu_);
      if (LRUHandle* e = table_.Remove(key, hash)) FinishErase(e, &dead);
    }
    for (LRUHandle* d : dead) FreeHandle(d);
  }

  void Prune() {
    std::vector<LRUHandle*> dead;
    {
      std::lock_guard<std::mutex> l(mu_);
      for (LRUHandle* e = lru_.next; e != &lru_;) {
        LRUHandle* next = e->next;
        if (e->refs == 1) {
          LRUHandle* removed = table_.Remove(e->key(), e->hash);
          assert(removed == e);
          (void)removed;
          FinishErase(e, &dead);
        }
        e = next;
      }
    }
    for (LRUHandle* d : dead) FreeHandle(d);
  }

  size_t TotalCharge() const {
    std::lock_guard<std::mutex> l(mu_);
    return usage_;
  }

 private:
  static void Append(LRUHandle* list, LRUHandle* e) {
    // Newest entries go at the back, before the list head.
    e->next = list;
    e->prev = list->prev;
    e->prev->next = e;
    e->next->prev = e;
  }

  static void Unlink(LRUHandle* e) {
    e->next->prev = e->prev;
    e->prev->next = e->next;
  }

  void Ref(LRUHandle* e) EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    e->refs++;
    e->referenced = true;
  }

  // Drops one reference. Returns true if the entry is now unreferenced and
  // the caller must free it (outside the lock).
  bool Unref(LRUHandle* e) EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    assert(e->refs > 0);
    e->refs--;
    if (e->refs == 0) {
      assert(!e->in_cache);
      return true;
    }
    return false;
  }

  // Evicts unpinned, unreferenced entries from the old end of lru_ until
  // usage is within capacity, queueing them on *dead. Pinned and referenced
  // entries go to the young end instead (the referenced bit cleared). Each
  // unpinned entry is passed at most twice, so the loop ends even when
  // everything is pinned.
  void EvictLocked(std::vector<LRUHandle*>* dead)
      EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    size_t budget = 2 * entries_;
    while (usage_ > capacity_ && budget > 0 && lru_.next != &lru_) {
      budget--;
      LRUHandle* oldest = lru_.next;
      if (oldest->refs > 1 || oldest->referenced) {
        oldest->referenced = false;
        Unlink(oldest);
        Append(&lru_, oldest);
        continue;
      }
      LRUHandle* removed = table_.Remove(oldest->key(), oldest->hash);
      assert(removed == oldest);
      (void)removed;
      FinishErase(oldest, dead);
    }
  }

  // Finishes removing e (already out of the table) from the cache: drops
  // the cache's reference; if that was the last, queues e on *dead.
  void FinishErase(LRUHandle* e, std::vector<LRUHandle*>* dead)
      EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    assert(e->in_cache);
    Unlink(e);
    e->in_cache = false;
    usage_ -= e->charge;
    entries_--;
    e->refs--;
    if (e->refs == 0) dead->push_back(e);
  }

  mutable std::mutex mu_;
  size_t capacity_ GUARDED_BY(mu_) = 0;
  size_t usage_ GUARDED_BY(mu_) = 0;
  size_t entries_ GUARDED_BY(mu_) = 0;  // on lru_
  // Dummy head of the circular list; lru_.next is the oldest entry.
  LRUHandle lru_ GUARDED_BY(mu_);
  HandleTable table_ GUARDED_BY(mu_);
};

class ShardedLRUCache final : public Cache {
 public:
  ShardedLRUCache(size_t capacity, int num_shard_bits)
      : capacity_(capacity),
        shard_bits_(num_shard_bits),
        shards_(new LRUShard[size_t{1} << num_shard_bits]) {
    const size_t n = size_t{1} << shard_bits_;
    // Round up so that the shards together hold at least capacity bytes.
    const size_t per_shard = (capacity + n - 1) / n;
    for (size_t i = 0; i < n; i++) shards_[i].SetCapacity(per_shard);
  }

  Handle* Insert(const Slice& key, void* value, size_t charge,
                 Deleter deleter) override {
    const uint32_t hash = HashKey(key);
    return Shard(hash).Insert(key, hash, value, charge, deleter);
  }

  Handle* Lookup(const Slice& key) override {
    const uint32_t hash = HashKey(key);
    return Shard(hash).Lookup(key, hash);
  }

  void Release(Handle* handle) override {
    LRUHandle* h = reinterpret_cast<LRUHandle*>(handle);
    Shard(h->hash).Release(handle);
  }

  void* Value(Handle* handle) override {
    return reinterpret_cast<LRUHandle*>(handle)->value;
  }

  void Erase(const Slice& key) override {
    const uint32_t hash = HashKey(key);
    Shard(hash).Erase(key, hash);
  }

  uint64_t NewId() override {
    return last_id_.fetch_add(1, std::memory_order_relaxed) + 1;
  }

  void Prune() override {
    for (size_t i = 0; i < NumShards(); i++) shards_[i].Prune();
  }

  size_t TotalCharge() const override {
    size_t total = 0;
    for (size_t i = 0; i < NumShards(); i++) total += shards_[i].TotalCharge();
    return total;
  }

  size_t Capacity() const override { return capacity_; }

 private:
  static uint32_t HashKey(const Slice& key) {
    return Hash(key.data(), key.size(), 0);
  }

  size_t NumShards() const { return size_t{1} << shard_bits_; }

  LRUShard& Shard(uint32_t hash) {
    // The top bits pick the shard; the table buckets use the low bits.
    return shards_[shard_bits_ == 0 ? 0 : hash >> (32 - shard_bits_)];
  }

  const size_t capacity_;
  const int shard_bits_;
  std::unique_ptr<LRUShard[]> shards_;
  std::atomic<uint64_t> last_id_{0};
};

// Enough shards that threads rarely meet on one mutex, few enough that each
// shard still holds many blocks (at least 512 KiB).
int DefaultShardBits(size_t capacity) {
  constexpr size_t kMinShardSize = 512 * 1024;
  constexpr int kMaxShardBits = 6;
  int bits = 0;
  size_t shards = capacity / kMinShardSize;
  while (bits < kMaxShardBits && shards > 1) {
    bits++;
    shards >>= 1;
  }
  return bits;
}

}  // namespace

Cache* NewLRUCache(size_t capacity, int num_shard_bits) {
  if (num_shard_bits < 0) num_shard_bits = DefaultShardBits(capacity);
  if (num_shard_bits > 20) num_shard_bits = 20;
  return new ShardedLRUCache(capacity, num_shard_bits);
}

}  // namespace shale
