#include "db/compaction_iterator.h"

#include <algorithm>

#include "table/table_builder.h"

namespace shale {

CompactionIterator::CompactionIterator(
    Iterator* input, const InternalKeyComparator* icmp,
    const std::vector<SequenceNumber>* snapshots,
    const FragmentedRangeTombstoneList* tombstones, bool bottommost)
    : input_(input),
      icmp_(icmp),
      snapshots_(snapshots),
      tombstones_(tombstones != nullptr && !tombstones->empty() ? tombstones
                                                                : nullptr),
      bottommost_(bottommost) {}

void CompactionIterator::SeekToFirst() {
  input_->SeekToFirst();
  has_current_user_key_ = false;
  FindNextOutput();
}

void CompactionIterator::Next() {
  input_->Next();
  FindNextOutput();
}

Status CompactionIterator::status() const {
  if (!status_.ok()) return status_;
  return input_->status();
}

size_t CompactionIterator::StripeOf(SequenceNumber seq) const {
  return std::lower_bound(snapshots_->begin(), snapshots_->end(), seq) -
         snapshots_->begin();
}

SequenceNumber CompactionIterator::StripeTop(size_t stripe) const {
  return stripe < snapshots_->size() ? (*snapshots_)[stripe]
                                     : kMaxSequenceNumber;
}

bool CompactionIterator::CoveredInStripe(const ParsedInternalKey& k,
                                         size_t stripe) {
  if (tombstones_ == nullptr) return false;
  const auto& frags = tombstones_->fragments();
  // Keys arrive in order: move the hint forward instead of searching.
  size_t i = fragment_hint_;
  while (i < frags.size() &&
         icmp_->CompareUserKeys(frags[i].end, k.user_key) <= 0) {
    i++;
  }
  fragment_hint_ = i;
  if (i == frags.size() ||
      icmp_->CompareUserKeys(frags[i].start, k.user_key) > 0) {
    return false;
  }
  return tombstones_->MaxSeqAtOrBelow(i, StripeTop(stripe)) > k.sequence;
}

void CompactionIterator::FindNextOutput() {
  valid_ = false;
  zeroed_ = false;
  while (input_->Valid()) {
    if (!ParseInternalKey(input_->key(), &parsed_)) {
      status_ = Status::Corruption("compaction input holds a malformed key",
                                   EscapeKey(input_->key()));
      return;
    }
    num_input_++;
    if (!has_current_user_key_ ||
        icmp_->CompareUserKeys(parsed_.user_key, current_user_key_) != 0) {
      current_user_key_.assign(parsed_.user_key.data(),
                               parsed_.user_key.size());
      has_current_user_key_ = true;
      has_last_stripe_ = false;
      key_bottommost_ = bottommost_;
      if (deep_lower_ != nullptr &&
          icmp_->CompareUserKeys(parsed_.user_key, *deep_lower_) >= 0 &&
          icmp_->CompareUserKeys(parsed_.user_key, *deep_upper_) < 0) {
        key_bottommost_ = deep_bottommost_;
      }
    }
    const size_t stripe = StripeOf(parsed_.sequence);
    bool drop;
    if (has_last_stripe_ && stripe == last_stripe_) {
      drop = true;  // a newer version in the same stripe hides it
    } else {
      // The newest version of the key in its stripe decides the stripe.
      last_stripe_ = stripe;
      has_last_stripe_ = true;
      if (CoveredInStripe(parsed_, stripe)) {
        drop = true;
      } else {
        drop = parsed_.type == kTypeDeletion && key_bottommost_ && stripe == 0;
      }
    }
    if (!drop) {
      valid_ = true;
      if (zero_sequences_ && key_bottommost_ && stripe == 0 &&
          parsed_.type == kTypeValue && parsed_.sequence != 0) {
        zeroed_key_.clear();
        AppendInternalKey(&zeroed_key_,
                          ParsedInternalKey(parsed_.user_key, 0, kTypeValue));
        parsed_.user_key = ExtractUserKey(zeroed_key_);
        parsed_.sequence = 0;
        zeroed_ = true;
      }
      return;
    }
    num_dropped_++;
    input_->Next();
  }
}

std::shared_ptr<const FragmentedRangeTombstoneList> MergeTombstones(
    const std::vector<std::shared_ptr<const FragmentedRangeTombstoneList>>&
        sources,
    const InternalKeyComparator& icmp) {
  std::vector<RangeTombstone> all;
  for (const auto& list : sources) {
    if (list == nullptr) continue;
    for (const auto& f : list->fragments()) {
      for (uint32_t i = f.seq_begin; i < f.seq_end; i++) {
        all.push_back(RangeTombstone{f.start, f.end, list->seq(i)});
      }
    }
  }
  if (all.empty()) return nullptr;
  return std::make_shared<const FragmentedRangeTombstoneList>(all, icmp);
}

void TombstonesToTable(const FragmentedRangeTombstoneList& list,
                       const Slice* lower, const Slice* upper,
                       const std::vector<SequenceNumber>& snapshots,
                       bool bottommost, TableBuilder* builder,
                       FileMetaData* meta) {
  const InternalKeyComparator& icmp = list.icmp();
  const auto& frags = list.fragments();
  size_t i = 0;
  if (lower != nullptr) {
    // The first fragment ending after lower.
    i = std::upper_bound(frags.begin(), frags.end(), *lower,
                         [&](const Slice& k, const auto& f) {
                           return icmp.CompareUserKeys(k, f.end) < 0;
                         }) -
        frags.begin();
  }
  std::string start_key;
  for (; i < frags.size(); i++) {
    const auto& f = frags[i];
    if (upper != nullptr && icmp.CompareUserKeys(f.start, *upper) >= 0) break;
    Slice start = f.start, end = f.end;
    if (lower != nullptr && icmp.CompareUserKeys(start, *lower) < 0) {
      start = *lower;
    }
    if (upper != nullptr && icmp.CompareUserKeys(end, *upper) > 0) end = *upper;
    if (icmp.CompareUserKeys(start, end) >= 0) continue;
    // Sequence numbers are descending: the first of each stripe is its
    // newest.
    bool has_stripe = false;
    size_t prev_stripe = 0;
    for (uint32_t j = f.seq_begin; j < f.seq_end; j++) {
      const SequenceNumber seq = list.seq(j);
      const size_t stripe =
          std::lower_bound(snapshots.begin(), snapshots.end(), seq) -
          snapshots.begin();
      if (has_stripe && stripe == prev_stripe) continue;
      has_stripe = true;
      prev_stripe = stripe;
      if (bottommost && stripe == 0) continue;
      start_key.clear();
      AppendInternalKey(&start_key,
                        ParsedInternalKey(start, seq, kTypeRangeDeletion));
      builder->AddRangeTombstone(start_key, end);
      meta->num_range_deletions++;
      // Bounds: from the start key to the end sentinel.
      const InternalKey sentinel(end, kMaxSequenceNumber, kTypeRangeDeletion);
      if (meta->smallest.empty() ||
          icmp.Compare(start_key, meta->smallest.Encode()) < 0) {
        meta->smallest.DecodeFrom(start_key);
      }
      if (meta->largest.empty() ||
          icmp.Compare(sentinel.Encode(), meta->largest.Encode()) > 0) {
        meta->largest = sentinel;
      }
      meta->smallest_seqno = std::min(meta->smallest_seqno, seq);
      meta->largest_seqno = std::max(meta->largest_seqno, seq);
    }
  }
}

}  // namespace shale
