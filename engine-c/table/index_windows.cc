#include "table/index_windows.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "table/block.h"

namespace shale {

uint64_t IndexWindows::Window(const Slice& order_key) const {
  const char* p = order_key.data() + prefix_.size();
  const size_t avail = order_key.size() - prefix_.size();
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  if (avail >= 8) {
    uint64_t x;
    memcpy(&x, p, 8);
    return __builtin_bswap64(x);  // big-endian: byte order is key order
  }
#endif
  uint64_t w = 0;
  for (size_t i = 0; i < 8; i++) {
    w = (w << 8) | (i < avail ? static_cast<uint8_t>(p[i]) : 0);
  }
  return w;
}

void IndexWindows::Build(const Block& index, const Comparator* cmp) {
  windows_.reset();
  n_ = 0;
  const Comparator::Kind kind = cmp->kind();
  if (kind != Comparator::Kind::kBytewise &&
      kind != Comparator::Kind::kInternalBytewise) {
    return;
  }
  cmp_ = cmp;
  internal_ = kind == Comparator::Kind::kInternalBytewise;
  // Every key is read from the block once; keys stored whole (restart
  // points) point into it, so the prefix can too.
  BlockIter it;
  index.InitIter(cmp, 0, nullptr, 0, &it);
  std::vector<Slice> keys;
  for (it.SeekToFirst(); it.Valid(); it.Next()) {
    const Slice k = it.key();
    if (internal_ && k.size() < 8) return;
    keys.push_back(OrderKey(k));
  }
  if (!it.status().ok() || keys.empty() || keys.size() != it.num_restarts()) {
    return;
  }
  const Slice& first = keys.front();
  const Slice& last = keys.back();
  size_t lcp = 0;
  const size_t max = std::min(first.size(), last.size());
  while (lcp < max && first[lcp] == last[lcp]) lcp++;
  prefix_ = Slice(first.data(), lcp);
  n_ = static_cast<uint32_t>(keys.size());
  windows_.reset(new uint64_t[n_]);
  for (uint32_t i = 0; i < n_; i++) {
    // Sorted keys between two that share a prefix share it too; a block
    // that breaks this is out of order and gets no windows.
    if (!keys[i].starts_with(prefix_)) {
      windows_.reset();
      n_ = 0;
      return;
    }
    windows_[i] = Window(keys[i]);
  }
}

void IndexWindows::Seek(BlockIter* it, const Slice& target) const {
  if (windows_ == nullptr || (internal_ && target.size() < 8)) {
    it->Seek(target);
    return;
  }
  const Slice order_key = OrderKey(target);
  if (!order_key.starts_with(prefix_)) {
    it->Seek(target);  // before or after every separator: rare
    return;
  }
  const uint64_t w = Window(order_key);
  const uint64_t* begin = windows_.get();
  const uint64_t* end = begin + n_;
  const uint64_t* first = std::lower_bound(begin, end, w);
  // Separators before first are < target, those past the run of equal
  // windows > target; the run needs the full comparison.
  it->SeekToRestartEntry(static_cast<uint32_t>(first - begin));
  for (const uint64_t* p = first; p < end && *p == w && it->Valid(); p++) {
    if (CompareInline(cmp_, it->key(), target) >= 0) return;
    it->Next();
  }
}

}  // namespace shale
