#include "util/iterator.h"

namespace shale {

Iterator::~Iterator() {
  if (first_.fn != nullptr) first_.fn(first_.arg1, first_.arg2);
  for (const Cleanup& c : more_) c.fn(c.arg1, c.arg2);
}

void Iterator::RegisterCleanup(CleanupFunction fn, void* arg1, void* arg2) {
  if (first_.fn == nullptr) {
    first_ = Cleanup{fn, arg1, arg2};
  } else {
    more_.push_back(Cleanup{fn, arg1, arg2});
  }
}

void Iterator::NextPrefix(const Slice& prefix) {
  do {
    Next();
  } while (Valid() && UserKeyHasPrefix(key(), prefix));
}

namespace {

class EmptyIterator final : public Iterator {
 public:
  explicit EmptyIterator(const Status& s) : status_(s) {}
  bool Valid() const override { return false; }
  void Seek(const Slice&) override {}
  void SeekToFirst() override {}
  void SeekToLast() override {}
  void Next() override {}
  void Prev() override {}
  Slice key() const override { return Slice(); }
  Slice value() const override { return Slice(); }
  Status status() const override { return status_; }

 private:
  Status status_;
};

}  // namespace

Iterator* NewEmptyIterator() { return new EmptyIterator(Status::OK()); }
Iterator* NewErrorIterator(const Status& s) { return new EmptyIterator(s); }

}  // namespace shale
