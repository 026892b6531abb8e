// Snapshots: a sequence number that reads can be made at, kept in a list
// so that compaction knows the oldest one still in use and keeps the
// versions it can see.
//
// Thread safety: a Snapshot is immutable and may be shared; the list is
// guarded by the DB mutex.

#ifndef SHALE_DB_SNAPSHOT_H_
#define SHALE_DB_SNAPSHOT_H_

#include <cassert>
#include <cstdint>
#include <vector>

#include "db/dbformat.h"

namespace shale {

class SnapshotList;

class Snapshot {
 public:
  SequenceNumber sequence() const { return sequence_; }

 private:
  friend class SnapshotList;
  explicit Snapshot(SequenceNumber s) : sequence_(s) {}

  const SequenceNumber sequence_;
  // A circular doubly linked list, oldest first.
  Snapshot* prev_ = nullptr;
  Snapshot* next_ = nullptr;
};

// REQUIRES: every method is called with the DB mutex held.
class SnapshotList {
 public:
  SnapshotList() : head_(0) {
    head_.prev_ = &head_;
    head_.next_ = &head_;
  }
  SnapshotList(const SnapshotList&) = delete;
  SnapshotList& operator=(const SnapshotList&) = delete;
  ~SnapshotList() { assert(empty()); }

  bool empty() const { return head_.next_ == &head_; }
  size_t size() const { return count_; }
  SequenceNumber oldest() const {
    assert(!empty());
    return head_.next_->sequence_;
  }
  SequenceNumber newest() const {
    assert(!empty());
    return head_.prev_->sequence_;
  }

  // REQUIRES: s >= newest() (snapshots are taken in sequence order).
  const Snapshot* New(SequenceNumber s) {
    assert(empty() || newest() <= s);
    Snapshot* snap = new Snapshot(s);
    snap->next_ = &head_;
    snap->prev_ = head_.prev_;
    snap->prev_->next_ = snap;
    snap->next_->prev_ = snap;
    count_++;
    return snap;
  }

  void Delete(const Snapshot* snap) {
    Snapshot* s = const_cast<Snapshot*>(snap);
    s->prev_->next_ = s->next_;
    s->next_->prev_ = s->prev_;
    count_--;
    delete s;
  }

  // The sequence numbers of every snapshot, ascending.
  std::vector<SequenceNumber> All() const {
    std::vector<SequenceNumber> r;
    r.reserve(count_);
    for (const Snapshot* s = head_.next_; s != &head_; s = s->next_) {
      r.push_back(s->sequence_);
    }
    return r;
  }

 private:
  Snapshot head_;  // dummy
  size_t count_ = 0;
};

}  // namespace shale

#endif  // SHALE_DB_SNAPSHOT_H_
