#include "table/merging_iterator.h"

#include <cassert>
#include <vector>

#include "util/comparator.h"

namespace shale {

namespace {

class MergingIterator final : public Iterator {
 public:
  MergingIterator(const Comparator* comparator, Iterator** children, int n)
      : comparator_(comparator), children_(n) {
    for (int i = 0; i < n; i++) {
      children_[i].iter = children[i];
      children_[i].index = i;
    }
    heap_.reserve(n);
  }

  ~MergingIterator() override {
    for (Child& c : children_) delete c.iter;
  }

  bool Valid() const override { return !heap_.empty(); }

  Slice key() const override {
    assert(Valid());
    return heap_[0]->key;
  }

  Slice value() const override {
    assert(Valid());
    return heap_[0]->iter->value();
  }

  Status status() const override { return status_; }

  void SeekToFirst() override {
    for (Child& c : children_) c.iter->SeekToFirst();
    direction_ = kForward;
    BuildHeap();
  }

  void SeekToLast() override {
    for (Child& c : children_) c.iter->SeekToLast();
    direction_ = kReverse;
    BuildHeap();
  }

  void Seek(const Slice& target) override {
    for (Child& c : children_) c.iter->Seek(target);
    direction_ = kForward;
    BuildHeap();
  }

  void Next() override {
    assert(Valid());
    if (direction_ != kForward) SwitchToForward();
    Advance(/*forward=*/true);
  }

  void Prev() override {
    assert(Valid());
    if (direction_ != kReverse) SwitchToReverse();
    Advance(/*forward=*/false);
  }

  void NextPrefix(const Slice& prefix) override {
    assert(Valid());
    if (direction_ != kForward) SwitchToForward();
    // Children whose entry has the prefix step past it, the current one
    // first; the others are past it already (they come after the current
    // entry, and the keys with the prefix are contiguous). Once the child
    // that just stepped is back on top, no other child has the prefix.
    for (;;) {
      Child* top = heap_[0];
      top->iter->NextPrefix(prefix);
      TopMoved();
      if (heap_.empty() || heap_[0] == top ||
          !UserKeyHasPrefix(heap_[0]->key, prefix)) {
        return;
      }
    }
  }

 private:
  enum Direction { kForward, kReverse };

  struct Child {
    Iterator* iter = nullptr;
    Slice key;  // iter->key() while the child is in the heap
    int index = 0;
  };

  // True if a is to be returned before b in the current direction.
  bool Before(const Child* a, const Child* b) const {
    const int c = CompareInline(comparator_, a->key, b->key);
    if (direction_ == kForward) {
      return c < 0 || (c == 0 && a->index < b->index);
    }
    return c > 0 || (c == 0 && a->index > b->index);
  }

  void SiftDown(size_t i) {
    const size_t n = heap_.size();
    Child* const item = heap_[i];
    for (;;) {
      size_t best = 2 * i + 1;
      if (best >= n) break;
      if (best + 1 < n && Before(heap_[best + 1], heap_[best])) best++;
      if (!Before(heap_[best], item)) break;
      heap_[i] = heap_[best];
      i = best;
    }
    heap_[i] = item;
  }

  // Adds every valid child to the heap; records the first child error.
  void BuildHeap() {
    heap_.clear();
    smaller_child_ = 0;
    status_ = Status::OK();
    for (Child& c : children_) {
      if (c.iter->Valid()) {
        c.key = c.iter->key();
        heap_.push_back(&c);
      } else if (!c.iter->status().ok()) {
        status_ = c.iter->status();
        heap_.clear();
        return;
      }
    }
    for (size_t i = heap_.size() / 2; i-- > 0;) SiftDown(i);
  }

  // Moves the top child one step and restores the heap.
  void Advance(bool forward) {
    Child* top = heap_[0];
    if (forward) {
      top->iter->Next();
    } else {
      top->iter->Prev();
    }
    TopMoved();
  }

  // Restores the heap after the top child moved.
  void TopMoved() {
    Child* top = heap_[0];
    if (!top->iter->Valid()) {
      if (!top->iter->status().ok()) {
        status_ = top->iter->status();
        heap_.clear();
        return;
      }
      // The child is exhausted: drop it.
      heap_[0] = heap_.back();
      heap_.pop_back();
      smaller_child_ = 0;
      if (!heap_.empty()) SiftDown(0);
      return;
    }
    top->key = top->iter->key();
    // Often one child supplies a long run (most of an LSM's data is in its
    // last level): if top still comes before the better of the root's
    // children, nothing moves. Which child is better is remembered for as
    // long as only the top changes, so such a step costs one comparison
    // instead of two.
    const size_t n = heap_.size();
    if (n == 1) return;
    if (smaller_child_ == 0) {
      smaller_child_ = (n > 2 && Before(heap_[2], heap_[1])) ? 2 : 1;
    }
    const size_t c = smaller_child_;
    if (!Before(heap_[c], top)) return;
    // The better child becomes the top; the old top sinks into its subtree.
    heap_[0] = heap_[c];
    heap_[c] = top;
    smaller_child_ = 0;
    SiftDown(c);
  }

  // Going forward from (K, current child c), the entries still to come in
  // other children are keys > K, and keys == K in children after c.
  void SwitchToForward() {
    Child* current = heap_[0];
    const Slice k = current->key;
    for (Child& c : children_) {
      if (&c == current) continue;
      c.iter->Seek(k);
      if (c.index < current->index) SkipEqual(&c, k);
    }
    direction_ = kForward;
    BuildHeap();
    assert(!Valid() || heap_[0] == current);
  }

  // Going back from (K, c), the entries still to come in other children are
  // keys < K, and keys == K in children before c: position each child at
  // its last entry < K (children after c) or <= K (children before c).
  void SwitchToReverse() {
    Child* current = heap_[0];
    const Slice k = current->key;
    for (Child& c : children_) {
      if (&c == current) continue;
      c.iter->Seek(k);
      if (c.index < current->index) SkipEqual(&c, k);
      if (c.iter->Valid()) {
        c.iter->Prev();
      } else if (c.iter->status().ok()) {
        // Every entry of the child is before the position: start at its end.
        c.iter->SeekToLast();
      }
      // A child written to concurrently (the memtable) may have gained
      // entries after k since the Seek above, and SeekToLast then lands on
      // one: step back until the child comes after current in reverse
      // order. Those entries are newer than any reader's sequence; left
      // in place they would take the heap top from current, and current's
      // own entry (at or past a caller's upper bound) would be returned.
      while (c.iter->Valid()) {
        const int cmp = CompareInline(comparator_, c.iter->key(), k);
        if (cmp < 0 || (cmp == 0 && c.index < current->index)) break;
        c.iter->Prev();
      }
    }
    direction_ = kReverse;
    BuildHeap();
    assert(!Valid() || heap_[0] == current);
  }

  // Steps c past entries equal to k.
  void SkipEqual(Child* c, const Slice& k) {
    while (c->iter->Valid() &&
           CompareInline(comparator_, c->iter->key(), k) == 0) {
      c->iter->Next();
    }
  }

  const Comparator* const comparator_;
  std::vector<Child> children_;
  std::vector<Child*> heap_;  // heap_[0] is the current entry
  // 1 or 2: which of heap_[1], heap_[2] comes first; 0 when unknown. Valid
  // while only heap_[0] changes.
  size_t smaller_child_ = 0;
  Direction direction_ = kForward;
  Status status_;
};

}  // namespace

Iterator* NewMergingIterator(const Comparator* comparator, Iterator** children,
                             int n) {
  assert(n >= 0);
  if (n == 0) return NewEmptyIterator();
  if (n == 1) return children[0];
  return new MergingIterator(comparator, children, n);
}

Iterator* NewMergingIterator(const Comparator* comparator,
                             std::vector<Iterator*> children) {
  return NewMergingIterator(comparator, children.data(),
                            static_cast<int>(children.size()));
}

}  // namespace shale
