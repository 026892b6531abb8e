// Range tombstones: how DeleteRange(begin, end) at sequence s hides every
// version of every key in [begin, end) with a sequence number below s.
//
// Tombstones may overlap arbitrarily. Before they are queried, a source's
// tombstones (one memtable's, one SST's) are cut into fragments: sorted,
// non-overlapping spans [start, end), each carrying the sequence numbers of
// every tombstone that covers the whole span. "Is key k at sequence t
// deleted, reading at r?" is then one binary search: take the fragment
// holding k and see whether it has a sequence number in (t, r].
//
// Thread safety: a FragmentedRangeTombstoneList is immutable once built and
// may be shared (through shared_ptr) by any number of threads. A
// RangeDelAggregator belongs to one reader (iterator or compaction).

#ifndef SHALE_DB_RANGE_TOMBSTONE_H_
#define SHALE_DB_RANGE_TOMBSTONE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "db/dbformat.h"
#include "util/arena.h"
#include "util/iterator.h"
#include "util/slice.h"

namespace shale {

// One DeleteRange: [start, end) at sequence seq.
struct RangeTombstone {
  Slice start;
  Slice end;
  SequenceNumber seq;
};

class FragmentedRangeTombstoneList {
 public:
  struct Fragment {
    Slice start;  // user key, inclusive
    Slice end;    // user key, exclusive
    // Sequence numbers of the covering tombstones, descending and distinct,
    // are seqs()[seq_begin, seq_end).
    uint32_t seq_begin;
    uint32_t seq_end;
  };

  // Builds the list from an iterator over tombstones whose key() is an
  // internal key (start user key, sequence, kTypeRangeDeletion) and value()
  // the exclusive end user key. Empty tombstones (start >= end) are
  // dropped. Copies what it keeps; the iterator may go away afterwards.
  // Returns the iterator's error status in *status.
  FragmentedRangeTombstoneList(Iterator* tombstones,
                               const InternalKeyComparator& icmp,
                               Status* status);
  // Builds the list from tombstones given directly (copied).
  FragmentedRangeTombstoneList(const std::vector<RangeTombstone>& tombstones,
                               const InternalKeyComparator& icmp);
  FragmentedRangeTombstoneList(const FragmentedRangeTombstoneList&) = delete;
  FragmentedRangeTombstoneList& operator=(const FragmentedRangeTombstoneList&) =
      delete;

  bool empty() const { return fragments_.empty(); }
  const std::vector<Fragment>& fragments() const { return fragments_; }
  SequenceNumber seq(uint32_t i) const { return seqs_[i]; }
  // Number of tombstones the list was built from.
  size_t num_tombstones() const { return num_tombstones_; }
  const InternalKeyComparator& icmp() const { return icmp_; }

  // The index of the fragment holding user_key, or fragments().size().
  size_t FindFragment(const Slice& user_key) const;

  // The largest sequence number <= read_seq among tombstones in fragment i
  // (0 if none).
  SequenceNumber MaxSeqAtOrBelow(size_t i, SequenceNumber read_seq) const;

  // The largest sequence number <= read_seq of a tombstone covering
  // user_key, or 0 if none does.
  SequenceNumber MaxCoveringSeq(const Slice& user_key,
                                SequenceNumber read_seq) const {
    const size_t i = FindFragment(user_key);
    return i < fragments_.size() ? MaxSeqAtOrBelow(i, read_seq) : 0;
  }

 private:
  // Fragments raw (whose keys point into arena_).
  void Build(std::vector<RangeTombstone>* raw);

  const InternalKeyComparator icmp_;
  Arena arena_;  // holds the key bytes the fragments point to
  std::vector<Fragment> fragments_;
  std::vector<SequenceNumber> seqs_;
  size_t num_tombstones_ = 0;
};

// Answers "is this point entry deleted by a range tombstone?" for an
// iterator or a compaction that reads several sources, each with its own
// fragment list. Remembers the last fragment of each source, so a scan in
// key order costs no search per key.
class RangeDelAggregator {
 public:
  // Only tombstones with sequence <= read_seq count.
  RangeDelAggregator(const InternalKeyComparator* icmp, SequenceNumber read_seq)
      : icmp_(icmp), read_seq_(read_seq) {}

  // Adds a source; nullptr and empty lists are ignored.
  void AddTombstones(std::shared_ptr<const FragmentedRangeTombstoneList> list);

  bool empty() const { return sources_.empty(); }

  // True iff a tombstone with sequence in (key.sequence, read_seq] covers
  // key.user_key.
  bool ShouldDelete(const ParsedInternalKey& key) {
    if (sources_.empty()) return false;
    return MaxCoveringSeq(key.user_key) > key.sequence;
  }

  // The largest sequence number <= read_seq of a tombstone covering
  // user_key, over all sources (0 if none).
  SequenceNumber MaxCoveringSeq(const Slice& user_key);

 private:
  struct Source {
    std::shared_ptr<const FragmentedRangeTombstoneList> list;
    size_t pos;  // last fragment found, a hint
  };

  const InternalKeyComparator* const icmp_;
  const SequenceNumber read_seq_;
  std::vector<Source> sources_;
};

}  // namespace shale

#endif  // SHALE_DB_RANGE_TOMBSTONE_H_
