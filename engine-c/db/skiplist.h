// InlineSkipList: the memtable's ordered index. Each node and its key live in
// one arena allocation (the key bytes follow the node's links), so a lookup
// touches one cache line per node instead of two.
//
// Thread safety
// -------------
// Writes need external synchronization: one writer at a time (the DB's write
// leader). Reads need none, and may run concurrently with the writer and
// with each other. Nothing is ever removed: nodes live until the whole list
// (its arena) is destroyed, which the owner does only once no reader remains.
//
// Memory ordering (why readers need no lock):
//  (1) A node's key bytes and its links are written before the node is
//      published, and it is published by storing a pointer to it into its
//      predecessor's link with release semantics. Readers load links with
//      acquire semantics, so a reader that sees the pointer also sees the
//      key and the node's own links as they were when it was published.
//  (2) A node is linked bottom-up, level 0 first. A reader that meets the
//      node at level i > 0 can therefore always continue from it at lower
//      levels. A reader that has not yet seen it at level i simply takes
//      the old, still valid, path.
//  (3) max_height_ is read relaxed. A reader that sees a stale, smaller
//      height starts lower down (slower, still correct). A reader that sees
//      a new, larger height before the head's links at the new levels are
//      set finds nullptr there - "no node at this level" - which is also
//      correct, because the head's links were initialized to nullptr.
//  (4) The writer's own bookkeeping (the insertion splice) is touched only
//      by the writer.
//
// The Comparator is a callable `int cmp(const char* a, const char* b)` over
// stored keys (the memtable compares its length-prefixed entries).

#ifndef SHALE_DB_SKIPLIST_H_
#define SHALE_DB_SKIPLIST_H_

#include <atomic>
#include <cassert>
#include <cstdint>
#include <cstring>

#include "util/arena.h"
#include "util/random.h"

namespace shale {

template <typename Comparator>
class InlineSkipList {
 private:
  struct Node;

 public:
  static constexpr int kMaxHeight = 12;

  // Allocates from *arena, which must outlive the list.
  InlineSkipList(Comparator cmp, Arena* arena);
  InlineSkipList(const InlineSkipList&) = delete;
  InlineSkipList& operator=(const InlineSkipList&) = delete;

  // Returns a buffer of key_size bytes for the caller to fill with a key,
  // then pass to Insert. REQUIRES: external synchronization (the writer);
  // every AllocateKey is followed by the Insert of its key before the next
  // AllocateKey.
  char* AllocateKey(size_t key_size);

  // Links the key (from AllocateKey) into the list. REQUIRES: external
  // synchronization; no key comparing equal to it is in the list.
  void Insert(const char* key);

  // True iff a key comparing equal to key is in the list.
  bool Contains(const char* key) const;

  // Iteration over the list. Valid while the list lives; safe to use
  // concurrently with the writer (it sees a consistent prefix of inserts).
  class Iterator {
   public:
    explicit Iterator(const InlineSkipList* list) : list_(list) {}

    bool Valid() const { return node_ != nullptr; }
    // REQUIRES: Valid()
    const char* key() const { return node_->Key(); }
    // REQUIRES: Valid()
    void Next() { node_ = node_->Next(0); }
    // REQUIRES: Valid()
    void Prev() {
      // No back links: search for the last node before this one.
      node_ = list_->FindLessThan(node_->Key());
      if (node_ == list_->head_) node_ = nullptr;
    }
    // Positions at the first key >= target.
    void Seek(const char* target) {
      node_ = list_->FindGreaterOrEqual(target, nullptr);
    }
    // Positions at the last key <= target.
    void SeekForPrev(const char* target) {
      Seek(target);
      if (!Valid()) {
        SeekToLast();
      }
      while (Valid() && list_->compare_(target, key()) < 0) {
        Prev();
      }
    }
    void SeekToFirst() { node_ = list_->head_->Next(0); }
    void SeekToLast() {
      node_ = list_->FindLast();
      if (node_ == list_->head_) node_ = nullptr;
    }

   private:
    const InlineSkipList* list_;
    Node* node_ = nullptr;
  };

 private:
  int GetMaxHeight() const {
    return max_height_.load(std::memory_order_relaxed);
  }
  int RandomHeight();
  Node* AllocateNode(size_t key_size, int height);
  bool KeyIsAfterNode(const char* key, Node* n) const {
    // nullptr is +infinity.
    return n != nullptr && compare_(n->Key(), key) < 0;
  }
  // Returns the first node with key >= key, or nullptr. If prev is not
  // nullptr, fills prev[level] with the last node before it at each level.
  Node* FindGreaterOrEqual(const char* key, Node** prev) const;
  // The last node with key < key, or head_.
  Node* FindLessThan(const char* key) const;
  // The last node, or head_ if the list is empty.
  Node* FindLast() const;

  Comparator const compare_;
  Arena* const arena_;
  Node* const head_;
  std::atomic<int> max_height_;  // height of the tallest node; see (3)

  // Writer-only state. The splice brackets the last inserted key:
  // splice_prev_[i] < key <= splice_next_[i] at every level i, with the two
  // adjacent at level i (nullptr = end). Sequential inserts then need no
  // search at all.
  Node* splice_prev_[kMaxHeight];
  Node* splice_next_[kMaxHeight];
  Random rnd_;
};

// Node layout in the arena, for a node of height h:
//
//   [link h-1] ... [link 1] [link 0 = next_[0]] [key bytes]
//                           ^ Node*
//
// Links above level 0 sit at lower addresses, so the key starts at a fixed
// offset from the Node pointer whatever the height.
template <typename Comparator>
struct InlineSkipList<Comparator>::Node {
  const char* Key() const { return reinterpret_cast<const char*>(&next_[1]); }

  // Acquire load: see the ordering notes at the top of the file.
  Node* Next(int n) const {
    assert(n >= 0);
    return (&next_[0] - n)->load(std::memory_order_acquire);
  }
  // Release store: publishes a fully initialized node.
  void SetNext(int n, Node* x) {
    assert(n >= 0);
    (&next_[0] - n)->store(x, std::memory_order_release);
  }
  // Used only where a later release store publishes the node.
  Node* NoBarrierNext(int n) const {
    return (&next_[0] - n)->load(std::memory_order_relaxed);
  }
  void NoBarrierSetNext(int n, Node* x) {
    (&next_[0] - n)->store(x, std::memory_order_relaxed);
  }

  // Between AllocateKey and Insert, the height is parked in link 0.
  void StashHeight(int height) {
    NoBarrierSetNext(0, reinterpret_cast<Node*>(static_cast<intptr_t>(height)));
  }
  int UnstashHeight() const {
    return static_cast<int>(reinterpret_cast<intptr_t>(NoBarrierNext(0)));
  }

  static Node* FromKey(const char* key) {
    return reinterpret_cast<Node*>(const_cast<char*>(key)) - 1;
  }

  std::atomic<Node*> next_[1];
};

template <typename Comparator>
InlineSkipList<Comparator>::InlineSkipList(Comparator cmp, Arena* arena)
    : compare_(cmp),
      arena_(arena),
      head_(AllocateNode(0, kMaxHeight)),
      max_height_(1),
      rnd_(0xdeadbeef) {
  for (int i = 0; i < kMaxHeight; i++) {
    head_->SetNext(i, nullptr);
    splice_prev_[i] = head_;
    splice_next_[i] = nullptr;
  }
}

template <typename Comparator>
typename InlineSkipList<Comparator>::Node*
InlineSkipList<Comparator>::AllocateNode(size_t key_size, int height) {
  const size_t prefix = sizeof(std::atomic<Node*>) * (height - 1);
  char* raw = arena_->AllocateAligned(prefix + sizeof(Node) + key_size);
  return reinterpret_cast<Node*>(raw + prefix);
}

template <typename Comparator>
int InlineSkipList<Comparator>::RandomHeight() {
  // Each level up with probability 1/4.
  int height = 1;
  uint32_t r = rnd_.Next();
  while (height < kMaxHeight && (r & 3) == 0) {
    height++;
    r >>= 2;
  }
  return height;
}

template <typename Comparator>
char* InlineSkipList<Comparator>::AllocateKey(size_t key_size) {
  const int height = RandomHeight();
  Node* x = AllocateNode(key_size, height);
  x->StashHeight(height);
  return const_cast<char*>(x->Key());
}

template <typename Comparator>
typename InlineSkipList<Comparator>::Node*
InlineSkipList<Comparator>::FindGreaterOrEqual(const char* key,
                                               Node** prev) const {
  Node* x = head_;
  int level = GetMaxHeight() - 1;
  Node* last_bigger = nullptr;
  while (true) {
    Node* next = x->Next(level);
    // Each step is a cache miss on the node compared. Start loading both
    // candidates for the next step (right at this level, or down from x)
    // while this comparison waits on its own miss.
    if (next != nullptr && next != last_bigger) {
      __builtin_prefetch(next->NoBarrierNext(level));
    }
    if (level > 0) __builtin_prefetch(x->NoBarrierNext(level - 1));
    // A node already compared at this level as "not before key" need not
    // be compared again one level down.
    if (next != last_bigger && KeyIsAfterNode(key, next)) {
      x = next;
    } else {
      if (prev != nullptr) prev[level] = x;
      if (level == 0) return next;
      last_bigger = next;
      level--;
    }
  }
}

template <typename Comparator>
typename InlineSkipList<Comparator>::Node*
InlineSkipList<Comparator>::FindLessThan(const char* key) const {
  Node* x = head_;
  int level = GetMaxHeight() - 1;
  Node* last_bigger = nullptr;
  while (true) {
    Node* next = x->Next(level);
    if (next != last_bigger && next != nullptr &&
        compare_(next->Key(), key) < 0) {
      x = next;
    } else {
      if (level == 0) return x;
      last_bigger = next;
      level--;
    }
  }
}

template <typename Comparator>
typename InlineSkipList<Comparator>::Node*
InlineSkipList<Comparator>::FindLast() const {
  Node* x = head_;
  int level = GetMaxHeight() - 1;
  while (true) {
    Node* next = x->Next(level);
    if (next != nullptr) {
      x = next;
    } else {
      if (level == 0) return x;
      level--;
    }
  }
}

template <typename Comparator>
void InlineSkipList<Comparator>::Insert(const char* key) {
  Node* x = Node::FromKey(key);
  const int height = x->UnstashHeight();
  assert(height >= 1 && height <= kMaxHeight);

  // Fast path: the splice left by the previous insert still brackets key
  // at level 0 (then it brackets it at every level, since the levels
  // nest). Otherwise search from the top.
  Node* p0 = splice_prev_[0];
  const bool brackets =
      (p0 == head_ || compare_(p0->Key(), key) < 0) &&
      (splice_next_[0] == nullptr || compare_(key, splice_next_[0]->Key()) < 0);
  if (!brackets) {
    FindGreaterOrEqual(key, splice_prev_);
    for (int i = 0; i < GetMaxHeight(); i++) {
      splice_next_[i] = splice_prev_[i]->NoBarrierNext(i);
    }
    for (int i = GetMaxHeight(); i < kMaxHeight; i++) {
      splice_prev_[i] = head_;
      splice_next_[i] = nullptr;
    }
  }
  assert(splice_next_[0] == nullptr ||
         compare_(key, splice_next_[0]->Key()) != 0);

  if (height > GetMaxHeight()) {
    // Readers may see the new height before the links below: see (3).
    max_height_.store(height, std::memory_order_relaxed);
  }

  for (int i = 0; i < height; i++) {
    // The node is not yet reachable, so its own links need no barrier;
    // SetNext on the predecessor publishes it (ordering note (1)).
    x->NoBarrierSetNext(i, splice_next_[i]);
    splice_prev_[i]->SetNext(i, x);
    splice_prev_[i] = x;
  }
}

template <typename Comparator>
bool InlineSkipList<Comparator>::Contains(const char* key) const {
  Node* x = FindGreaterOrEqual(key, nullptr);
  return x != nullptr && compare_(key, x->Key()) == 0;
}

}  // namespace shale

#endif  // SHALE_DB_SKIPLIST_H_
