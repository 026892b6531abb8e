#include "db/merging_iterator.h"

#include <cassert>
#include <memory>

namespace shale {

namespace {

// A child iterator with its validity and key cached, so heap comparisons
// make no virtual calls.
class Child {
 public:
  explicit Child(Iterator* iter) : iter_(iter) {}

  Iterator* iter() const { return iter_.get(); }
  bool valid() const { return valid_; }
  const Slice& key() const { return key_; }

  void Update() {
    valid_ = iter_->Valid();
    if (valid_) key_ = iter_->key();
  }
  void SeekToFirst() {
    iter_->SeekToFirst();
    Update();
  }
  void SeekToLast() {
    iter_->SeekToLast();
    Update();
  }
  void Seek(const Slice& k) {
    iter_->Seek(k);
    Update();
  }
  void Next() {
    iter_->Next();
    Update();
  }
  void Prev() {
    iter_->Prev();
    Update();
  }

 private:
  std::unique_ptr<Iterator> iter_;
  Slice key_;
  bool valid_ = false;
};

class MergingIterator final : public Iterator {
 public:
  MergingIterator(const InternalKeyComparator* cmp,
                  std::vector<Iterator*> children)
      : cmp_(cmp) {
    children_.reserve(children.size());
    for (Iterator* c : children) children_.emplace_back(c);
    heap_.reserve(children_.size());
  }

  bool Valid() const override { return current_ != nullptr; }

  void SeekToFirst() override {
    for (Child& c : children_) c.SeekToFirst();
    BuildHeap(kForward);
  }

  void SeekToLast() override {
    for (Child& c : children_) c.SeekToLast();
    BuildHeap(kReverse);
  }

  void Seek(const Slice& target) override {
    for (Child& c : children_) c.Seek(target);
    BuildHeap(kForward);
  }

  void Next() override {
    assert(Valid());
    if (direction_ != kForward) {
      // Every child but current_ is positioned before key(); move each to
      // the first entry after key().
      const Slice k = key_copy(current_->key());
      for (Child& c : children_) {
        if (&c == current_) continue;
        c.Seek(k);
        if (c.valid() && cmp_->Compare(k, c.key()) == 0) c.Next();
      }
      BuildHeapKeepCurrent(kForward);
    }
    current_->Next();
    FixTop();
  }

  void Prev() override {
    assert(Valid());
    if (direction_ != kReverse) {
      // Move every other child to the last entry before key().
      const Slice k = key_copy(current_->key());
      for (Child& c : children_) {
        if (&c == current_) continue;
        c.Seek(k);
        if (c.valid()) {
          c.Prev();
        } else {
          c.SeekToLast();
        }
      }
      BuildHeapKeepCurrent(kReverse);
    }
    current_->Prev();
    FixTop();
  }

  Slice key() const override {
    assert(Valid());
    return current_->key();
  }

  Slice value() const override {
    assert(Valid());
    return current_->iter()->value();
  }

  Status status() const override {
    for (const Child& c : children_) {
      Status s = c.iter()->status();
      if (!s.ok()) return s;
    }
    return Status::OK();
  }

 private:
  enum Direction { kForward, kReverse };

  // Copies k: re-seeking the children may move the memory it points to.
  Slice key_copy(const Slice& k) {
    saved_key_.assign(k.data(), k.size());
    return saved_key_;
  }

  // True if a should be nearer the top than b.
  bool Before(const Child* a, const Child* b) const {
    const int r = cmp_->Compare(a->key(), b->key());
    return direction_ == kForward ? r < 0 : r > 0;
  }

  void SiftDown(size_t i) {
    const size_t n = heap_.size();
    Child* x = heap_[i];
    while (true) {
      size_t child = 2 * i + 1;
      if (child >= n) break;
      if (child + 1 < n && Before(heap_[child + 1], heap_[child])) child++;
      if (!Before(heap_[child], x)) break;
      heap_[i] = heap_[child];
      i = child;
    }
    heap_[i] = x;
  }

  void BuildHeap(Direction d) {
    direction_ = d;
    heap_.clear();
    for (Child& c : children_) {
      if (c.valid()) heap_.push_back(&c);
    }
    for (size_t i = heap_.size() / 2; i-- > 0;) SiftDown(i);
    current_ = heap_.empty() ? nullptr : heap_[0];
  }

  // Rebuilds the heap for direction d, where current_ (whatever its key)
  // must end up on top because the caller moves it next.
  void BuildHeapKeepCurrent(Direction d) {
    direction_ = d;
    heap_.clear();
    heap_.push_back(current_);
    for (Child& c : children_) {
      if (&c != current_ && c.valid()) heap_.push_back(&c);
    }
    for (size_t i = heap_.size() / 2; i-- > 1;) SiftDown(i);
    // heap_[0] is current_; its subtrees are heaps. FixTop() will sift it
    // after it moves.
  }

  // After the top child moved: drop it if exhausted, else restore order.
  void FixTop() {
    if (!current_->valid()) {
      heap_[0] = heap_.back();
      heap_.pop_back();
    }
    if (!heap_.empty()) SiftDown(0);
    current_ = heap_.empty() ? nullptr : heap_[0];
  }

  const InternalKeyComparator* const cmp_;
  std::vector<Child> children_;
  std::vector<Child*> heap_;
  Child* current_ = nullptr;
  Direction direction_ = kForward;
  std::string saved_key_;
};

}  // namespace

Iterator* NewMergingIterator(const InternalKeyComparator* cmp,
                             std::vector<Iterator*> children) {
  if (children.empty()) return NewEmptyIterator();
  if (children.size() == 1) return children[0];
  return new MergingIterator(cmp, std::move(children));
}

}  // namespace shale
