#include "db/range_tombstone.h"

#include <algorithm>
#include <cstring>

namespace shale {

namespace {

Slice CopyToArena(Arena* arena, const Slice& s) {
  if (s.empty()) return Slice();
  char* p = arena->Allocate(s.size());
  memcpy(p, s.data(), s.size());
  return Slice(p, s.size());
}

}  // namespace

FragmentedRangeTombstoneList::FragmentedRangeTombstoneList(
    Iterator* tombstones, const InternalKeyComparator& icmp, Status* status)
    : icmp_(icmp) {
  *status = Status::OK();
  std::vector<RangeTombstone> raws;
  for (tombstones->SeekToFirst(); tombstones->Valid(); tombstones->Next()) {
    ParsedInternalKey start;
    if (!ParseInternalKey(tombstones->key(), &start) ||
        start.type != kTypeRangeDeletion) {
      if (status->ok()) {
        *status = Status::Corruption("range tombstone with a malformed key",
                                     EscapeKey(tombstones->key()));
      }
      continue;
    }
    const Slice end = tombstones->value();
    if (icmp_.CompareUserKeys(start.user_key, end) >= 0) continue;
    raws.push_back(RangeTombstone{CopyToArena(&arena_, start.user_key),
                                  CopyToArena(&arena_, end), start.sequence});
  }
  if (status->ok()) *status = tombstones->status();
  Build(&raws);
}

FragmentedRangeTombstoneList::FragmentedRangeTombstoneList(
    const std::vector<RangeTombstone>& tombstones,
    const InternalKeyComparator& icmp)
    : icmp_(icmp) {
  std::vector<RangeTombstone> raws;
  raws.reserve(tombstones.size());
  for (const RangeTombstone& t : tombstones) {
    if (icmp_.CompareUserKeys(t.start, t.end) >= 0) continue;
    raws.push_back(RangeTombstone{CopyToArena(&arena_, t.start),
                                  CopyToArena(&arena_, t.end), t.seq});
  }
  Build(&raws);
}

void FragmentedRangeTombstoneList::Build(std::vector<RangeTombstone>* raw) {
  std::vector<RangeTombstone>& raws = *raw;
  num_tombstones_ = raws.size();
  if (raws.empty()) return;

  auto less = [this](const Slice& a, const Slice& b) {
    return icmp_.CompareUserKeys(a, b) < 0;
  };
  std::sort(raws.begin(), raws.end(),
            [&](const RangeTombstone& a, const RangeTombstone& b) {
              return less(a.start, b.start);
            });

  // Every start and end is a fragment boundary.
  std::vector<Slice> bounds;
  bounds.reserve(raws.size() * 2);
  for (const RangeTombstone& t : raws) {
    bounds.push_back(t.start);
    bounds.push_back(t.end);
  }
  std::sort(bounds.begin(), bounds.end(), less);
  bounds.erase(std::unique(bounds.begin(), bounds.end(),
                           [this](const Slice& a, const Slice& b) {
                             return icmp_.CompareUserKeys(a, b) == 0;
                           }),
               bounds.end());

  // Sweep the boundaries, keeping the tombstones that cover the span
  // [bounds[i], bounds[i+1]).
  std::vector<const RangeTombstone*> active;
  std::vector<SequenceNumber> span_seqs;
  size_t next = 0;
  for (size_t i = 0; i + 1 < bounds.size(); i++) {
    const Slice& b = bounds[i];
    active.erase(std::remove_if(active.begin(), active.end(),
                                [&](const RangeTombstone* t) {
                                  return icmp_.CompareUserKeys(t->end, b) <= 0;
                                }),
                 active.end());
    while (next < raws.size() &&
           icmp_.CompareUserKeys(raws[next].start, b) <= 0) {
      active.push_back(&raws[next]);
      next++;
    }
    if (active.empty()) continue;
    span_seqs.clear();
    for (const RangeTombstone* t : active) span_seqs.push_back(t->seq);
    std::sort(span_seqs.begin(), span_seqs.end(),
              std::greater<SequenceNumber>());
    span_seqs.erase(std::unique(span_seqs.begin(), span_seqs.end()),
                    span_seqs.end());
    Fragment f;
    f.start = b;
    f.end = bounds[i + 1];
    f.seq_begin = static_cast<uint32_t>(seqs_.size());
    seqs_.insert(seqs_.end(), span_seqs.begin(), span_seqs.end());
    f.seq_end = static_cast<uint32_t>(seqs_.size());
    fragments_.push_back(f);
  }
}

size_t FragmentedRangeTombstoneList::FindFragment(const Slice& user_key) const {
  // The first fragment starting after user_key, then one back.
  auto it = std::upper_bound(fragments_.begin(), fragments_.end(), user_key,
                             [this](const Slice& k, const Fragment& f) {
                               return icmp_.CompareUserKeys(k, f.start) < 0;
                             });
  if (it == fragments_.begin()) return fragments_.size();
  --it;
  if (icmp_.CompareUserKeys(user_key, it->end) >= 0) return fragments_.size();
  return it - fragments_.begin();
}

SequenceNumber FragmentedRangeTombstoneList::MaxSeqAtOrBelow(
    size_t i, SequenceNumber read_seq) const {
  const Fragment& f = fragments_[i];
  auto first = seqs_.begin() + f.seq_begin;
  auto last = seqs_.begin() + f.seq_end;
  // Descending: the first element <= read_seq is the answer.
  auto it = std::lower_bound(
      first, last, read_seq,
      [](SequenceNumber s, SequenceNumber bound) { return s > bound; });
  return it == last ? 0 : *it;
}

void RangeDelAggregator::AddTombstones(
    std::shared_ptr<const FragmentedRangeTombstoneList> list) {
  if (list == nullptr || list->empty()) return;
  sources_.push_back(Source{std::move(list), 0});
}

SequenceNumber RangeDelAggregator::MaxCoveringSeq(const Slice& user_key) {
  SequenceNumber max_seq = 0;
  for (Source& src : sources_) {
    const auto& frags = src.list->fragments();
    size_t i = src.pos;
    // Scans move key by key: try the remembered fragment and its
    // neighbours before searching.
    auto holds = [&](size_t j) {
      return j < frags.size() &&
             icmp_->CompareUserKeys(frags[j].start, user_key) <= 0 &&
             icmp_->CompareUserKeys(user_key, frags[j].end) < 0;
    };
    if (!holds(i)) {
      if (holds(i + 1)) {
        i = i + 1;
      } else if (i > 0 && holds(i - 1)) {
        i = i - 1;
      } else {
        i = src.list->FindFragment(user_key);
        if (i == frags.size()) continue;
      }
    }
    src.pos = i;
    const SequenceNumber s = src.list->MaxSeqAtOrBelow(i, read_seq_);
    if (s > max_seq) max_seq = s;
  }
  return max_seq;
}

}  // namespace shale
