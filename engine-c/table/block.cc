// Decoding of the block format written by BlockBuilder (grammar in
// block_builder.cc).

#include "table/block.h"

#include <algorithm>
#include <cassert>
#include <cstring>

#include "util/coding.h"
#include "util/comparator.h"

namespace shale {

Block::Block(const BlockContents& contents)
    : data_(contents.data.data()),
      size_(contents.data.size()),
      restart_offset_(kMalformed),
      num_restarts_(0),
      owned_(contents.heap_allocated) {
  if (size_ < sizeof(uint32_t) || size_ > UINT32_MAX) return;
  const size_t max_restarts = (size_ - sizeof(uint32_t)) / sizeof(uint32_t);
  const uint32_t num_restarts = DecodeFixed32(data_ + size_ - sizeof(uint32_t));
  if (num_restarts == 0 || num_restarts > max_restarts) return;
  num_restarts_ = num_restarts;
  restart_offset_ = static_cast<uint32_t>(
      size_ - (1 + static_cast<size_t>(num_restarts)) * sizeof(uint32_t));
}

Block::~Block() {
  if (owned_) delete[] data_;
}

void Block::InitIter(const Comparator* comparator, uint64_t global_seqno,
                     const std::string* error_file, uint64_t error_offset,
                     BlockIter* iter) const {
  if (!ok()) {
    std::string where = error_file == nullptr
                            ? std::string("in memory")
                            : BlockErrorContext(*error_file, error_offset);
    iter->InitError(Status::Corruption("bad block restart array", where));
    return;
  }
  iter->Init(comparator, data_, restart_offset_, num_restarts_, global_seqno,
             error_file, error_offset);
}

Iterator* Block::NewIterator(const Comparator* comparator,
                             uint64_t global_seqno,
                             const std::string* error_file,
                             uint64_t error_offset) const {
  BlockIter* iter = new BlockIter;
  InitIter(comparator, global_seqno, error_file, error_offset, iter);
  return iter;
}

// ---------------------------------------------------------------- BlockIter

namespace {

// Decodes the header of the entry at p: shared, non_shared, value_length.
// Returns the start of the key delta, or nullptr if the header is malformed
// or the entry overruns limit.
inline const char* DecodeEntry(const char* p, const char* limit,
                               uint32_t* shared, uint32_t* non_shared,
                               uint32_t* value_length) {
  if (limit - p < 3) return nullptr;
  *shared = static_cast<uint8_t>(p[0]);
  *non_shared = static_cast<uint8_t>(p[1]);
  *value_length = static_cast<uint8_t>(p[2]);
  if ((*shared | *non_shared | *value_length) < 128) {
    // Fast path: all three values fit in one byte each.
    p += 3;
  } else {
    if ((p = GetVarint32Ptr(p, limit, shared)) == nullptr) return nullptr;
    if ((p = GetVarint32Ptr(p, limit, non_shared)) == nullptr) return nullptr;
    if ((p = GetVarint32Ptr(p, limit, value_length)) == nullptr) return nullptr;
  }
  if (static_cast<uint64_t>(limit - p) <
      static_cast<uint64_t>(*non_shared) + *value_length) {
    return nullptr;
  }
  return p;
}

}  // namespace

void BlockIter::Init(const Comparator* comparator, const char* data,
                     uint32_t restart_offset, uint32_t num_restarts,
                     uint64_t global_seqno, const std::string* error_file,
                     uint64_t error_offset) {
  assert(num_restarts > 0);
  comparator_ = comparator;
  data_ = data;
  restart_offset_ = restart_offset;
  num_restarts_ = num_restarts;
  MarkInvalid();
  global_seqno_ = global_seqno;
  error_file_ = error_file;
  error_offset_ = error_offset;
  raw_key_ = key_ = value_ = Slice();
  status_ = Status::OK();
  ClearPrevCache();
}

void BlockIter::InitError(const Status& s) {
  comparator_ = nullptr;
  data_ = nullptr;
  restart_offset_ = 0;
  num_restarts_ = 0;
  current_ = 0;
  restart_index_ = 0;
  next_restart_ = 0;
  raw_key_ = key_ = value_ = Slice();
  status_ = s;
  ClearPrevCache();
}

void BlockIter::CorruptionError(const char* what) {
  MarkInvalid();
  status_ = Status::Corruption(
      what, error_file_ == nullptr
                ? std::string("in memory block")
                : BlockErrorContext(*error_file_, error_offset_));
  raw_key_ = key_ = value_ = Slice();
  ClearPrevCache();
}

void BlockIter::SeekToRestartPoint(uint32_t index) {
  raw_key_ = key_ = Slice();
  SetRestartIndex(index);
  // current_ is fixed by ParseNextKey(), which starts at NextEntryOffset():
  // an empty value_ at the restart point makes that the restart point.
  const uint32_t offset = RestartPoint(index);
  value_ = Slice(data_ + offset, 0);
}

bool BlockIter::ApplyGlobalSeqno() {
  // Internal key: user key + fixed64(sequence << 8 | type). Keep the type,
  // replace the sequence.
  if (raw_key_.size() < 8) {
    CorruptionError("key too short for a global sequence number");
    return false;
  }
  seqno_buf_.assign(raw_key_.data(), raw_key_.size());
  char* trailer = seqno_buf_.data() + seqno_buf_.size() - 8;
  const uint64_t packed = DecodeFixed64(trailer);
  EncodeFixed64(trailer, (global_seqno_ << 8) | (packed & 0xff));
  key_ = Slice(seqno_buf_);
  return true;
}

void BlockIter::GrowKeyBuffer(size_t n) {
  size_t capacity = key_capacity_ * 2;
  while (capacity < n) capacity *= 2;
  std::unique_ptr<char[]> bigger(new char[capacity]);
  const bool raw_in_buffer = raw_key_.data() == key_buf_;
  if (raw_in_buffer) memcpy(bigger.get(), key_buf_, raw_key_.size());
  key_heap_ = std::move(bigger);
  key_buf_ = key_heap_.get();
  key_capacity_ = capacity;
  if (raw_in_buffer) raw_key_ = Slice(key_buf_, raw_key_.size());
}

bool BlockIter::ParseNextKey() {
  current_ = NextEntryOffset();
  const char* p = data_ + current_;
  const char* limit = data_ + restart_offset_;
  if (p >= limit) {
    // No more entries: mark as invalid.
    MarkInvalid();
    return false;
  }

  uint32_t shared, non_shared, value_length;
  p = DecodeEntry(p, limit, &shared, &non_shared, &value_length);
  if (p == nullptr || raw_key_.size() < shared) {
    CorruptionError("bad entry in block");
    return false;
  }
  if (shared == 0) {
    // Stored whole: point into the block, no copy.
    raw_key_ = Slice(p, non_shared);
  } else {
    const size_t size = static_cast<size_t>(shared) + non_shared;
    if (size > key_capacity_) GrowKeyBuffer(size);
    if (raw_key_.data() != key_buf_) {
      // The previous key lives elsewhere (block, prev_->keys): bring its
      // shared prefix into the buffer.
      memcpy(key_buf_, raw_key_.data(), shared);
    }
    memcpy(key_buf_ + shared, p, non_shared);
    raw_key_ = Slice(key_buf_, size);
  }
  value_ = Slice(p + non_shared, value_length);
  if (current_ >= next_restart_) {
    // Crossed into the next restart interval.
    uint32_t index = restart_index_ + 1;
    while (index + 1 < num_restarts_ && RestartPoint(index + 1) <= current_) {
      index++;
    }
    SetRestartIndex(index);
  }
  return SetKeyFromRaw();
}

bool BlockIter::SlowRestartKey(uint32_t index, Slice* key) {
  const uint32_t offset = RestartPoint(index);
  const char* limit = data_ + restart_offset_;
  uint32_t shared, non_shared, value_length;
  const char* p = offset < restart_offset_
                      ? DecodeEntry(data_ + offset, limit, &shared, &non_shared,
                                    &value_length)
                      : nullptr;
  if (p == nullptr || shared != 0) {
    CorruptionError("bad restart point in block");
    return false;
  }
  *key = Slice(p, non_shared);
  if (global_seqno_ != 0) {
    raw_key_ = *key;
    if (!SetKeyFromRaw()) return false;
    *key = key_;
  }
  return true;
}

void BlockIter::Next() {
  assert(Valid());
  ParseNextKey();
  ClearPrevCache();
}

void BlockIter::NextPrefix(const Slice& prefix) {
  assert(Valid());
  assert(UserKeyHasPrefix(raw_key_, prefix));
  ClearPrevCache();
  const size_t n = prefix.size();
  const char* const limit = data_ + restart_offset_;
  // raw_key_ stays the last key decoded, which has the prefix; every entry
  // passed over after it has it too, so the first one decoded next, sharing
  // fewer than n bytes with its predecessor, shares them with raw_key_.
  const char* p = value_.data() + value_.size();
  for (;;) {
    if (p >= limit) {
      MarkInvalid();  // no more entries
      return;
    }
    uint32_t shared, non_shared, value_length;
    const char* delta =
        DecodeEntry(p, limit, &shared, &non_shared, &value_length);
    if (delta == nullptr) {
      CorruptionError("bad entry in block");
      return;
    }
    if (shared >= n && shared + non_shared >= n + 8) {
      p = delta + non_shared + value_length;  // has the prefix: pass over
      continue;
    }
    value_ = Slice(p, 0);  // ParseNextKey decodes the entry at p
    if (!ParseNextKey() || !UserKeyHasPrefix(raw_key_, prefix)) return;
    if (shared == 0) {
      // A restart point with the prefix (a long history): while the next
      // restart point's key has it too, so has every entry up to it.
      while (restart_index_ + 1 < num_restarts_) {
        const uint32_t next = RestartPoint(restart_index_ + 1);
        uint32_t s0, key_size, v0;
        const char* k =
            next < restart_offset_
                ? DecodeEntry(data_ + next, limit, &s0, &key_size, &v0)
                : nullptr;
        if (k == nullptr || s0 != 0) {
          CorruptionError("bad restart point in block");
          return;
        }
        if (!UserKeyHasPrefix(Slice(k, key_size), prefix)) break;
        SeekToRestartPoint(restart_index_ + 1);
        if (!ParseNextKey()) return;
      }
    }
    p = value_.data() + value_.size();
  }
}

void BlockIter::Prev() {
  assert(Valid());
  if (prev_ != nullptr && !prev_->entries.empty()) {
    // The previous entry was decoded by the scan that brought us here.
    const PrevCache::Entry& e = prev_->entries.back();
    current_ = e.offset;
    raw_key_ = Slice(prev_->keys.data() + e.key_offset, e.key_size);
    value_ = Slice(data_ + e.value_offset, e.value_size);
    prev_->entries.pop_back();
    SetKeyFromRaw();  // on failure the iterator is left invalid
    return;
  }

  // Scan backwards to a restart point before current_.
  const uint32_t original = current_;
  while (RestartPoint(restart_index_) >= original) {
    if (restart_index_ == 0) {
      // No more entries.
      MarkInvalid();
      return;
    }
    restart_index_--;
  }
  const uint32_t restart = restart_index_;
  SeekToRestartPoint(restart);
  // Decode forward to the entry just before original, remembering each one
  // passed so that the following Prev() calls need no decoding.
  if (prev_ == nullptr) prev_ = std::make_unique<PrevCache>();
  prev_->keys.clear();
  while (ParseNextKey() && NextEntryOffset() < original) {
    PrevCache::Entry e;
    e.offset = current_;
    e.key_offset = static_cast<uint32_t>(prev_->keys.size());
    e.key_size = static_cast<uint32_t>(raw_key_.size());
    e.value_offset = static_cast<uint32_t>(value_.data() - data_);
    e.value_size = static_cast<uint32_t>(value_.size());
    prev_->keys.append(raw_key_.data(), raw_key_.size());
    prev_->entries.push_back(e);
  }
  if (!Valid()) {
    // Only on corruption (status_ set) or a restart array that does not
    // match the entries.
    if (status_.ok()) CorruptionError("bad restart point in block");
    return;
  }
  if (NextEntryOffset() != original) {
    CorruptionError("bad entry in block");
    return;
  }
  SetRestartIndex(restart);
}

void BlockIter::Seek(const Slice& target) {
  if (!status_.ok() || data_ == nullptr) return;  // errors are sticky
  ClearPrevCache();
  // Binary search in the restart array for the last restart point whose key
  // is < target; the answer is in its interval (or is the interval's
  // successor's first key).
  uint32_t left = 0;
  uint32_t right = num_restarts_ - 1;
  // True once the key at restart point left is known to be < target.
  bool left_is_less = false;
  if (Valid()) {
    // Sorted lookups (MultiGet, merging) often seek near the current entry:
    // narrow the search with it.
    const int c = CompareInline(comparator_, key_, target);
    if (c == 0) return;
    if (c < 0) {
      left = restart_index_;  // its key <= the current key < target
      left_is_less = true;
      // A short seek forward (an MVCC scan stepping over a key's older
      // versions): when the next restart point's key is >= target, or
      // there is none, the answer is at most one interval ahead, so scan
      // on from the current entry instead of from a restart point.
      // (RestartKey rewrites raw_key_ under a global sequence number, which
      // the scan from here needs: not then.)
      if (global_seqno_ == 0) {
        const uint32_t next = restart_index_ + 1;
        Slice next_key;
        bool near = next >= num_restarts_;
        if (!near) {
          if (!RestartKey(next, &next_key)) return;
          near = CompareInline(comparator_, next_key, target) >= 0;
          if (!near) left = next;  // its key < target
        }
        if (near) {
          while (ParseNextKey()) {
            if (CompareInline(comparator_, key_, target) >= 0) return;
          }
          return;
        }
      }
    } else {
      right = restart_index_;
    }
  }
  while (left < right) {
    const uint32_t mid = (left + right + 1) / 2;
    Slice mid_key;
    if (!RestartKey(mid, &mid_key)) return;
    if (CompareInline(comparator_, mid_key, target) < 0) {
      left = mid;  // everything before mid is < target too
      left_is_less = true;
    } else {
      right = mid - 1;  // mid's key is >= target
    }
  }

  // Linear scan in the interval for the first key >= target. The restart
  // entry itself needs no comparison when the search already made one.
  SeekToRestartPoint(left);
  if (!ParseNextKey()) return;
  if (!left_is_less && CompareInline(comparator_, key_, target) >= 0) return;
  if (ScanForward(target)) return;
  // The fast scan gave up part way (an entry it does not decode): again,
  // entry by entry.
  SeekToRestartPoint(left);
  if (!ParseNextKey()) return;
  while (ParseNextKey()) {
    if (CompareInline(comparator_, key_, target) >= 0) return;
  }
}

namespace {

// The number of leading bytes a and b share.
inline size_t CommonPrefix(const Slice& a, const Slice& b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i + 8 <= n) {
    uint64_t x, y;
    memcpy(&x, a.data() + i, 8);
    memcpy(&y, b.data() + i, 8);
    if (x != y) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
      return i + __builtin_ctzll(x ^ y) / 8;  // the first differing byte
#else
      break;
#endif
    }
    i += 8;
  }
  while (i < n && a[i] == b[i]) i++;
  return i;
}

}  // namespace

// The scan of Seek, from the current entry (< target) to the first entry
// >= target, mostly without rebuilding keys. Let m be the bytes the last
// key passed shares with target, its first m bytes being target's, and
// byte m within the user keys of both (for internal keys; the whole keys
// for bytewise ones), so that it orders them: key[m] < target[m]. The
// next entry shares s bytes with that key (the builder stores the longest
// shared prefix). If s > m it has the same byte m: it is < target too, and
// is passed over on its header alone. If s < m, its byte s follows the
// last key's, which is target's: it is > target, the answer. If s == m,
// its stored bytes compared with target's from m on decide (by user key;
// an equal user key needs the whole keys). Only the answer, and entries
// the shortcut cannot place, are rebuilt (from target's prefix, which is
// the shared part). Returns false, the iterator then in no defined state,
// on an entry it does not decode (long varints, bad lengths): the caller
// scans again entry by entry, which reports what is wrong.
bool BlockIter::ScanForward(const Slice& target) {
  const Comparator::Kind kind = comparator_->kind();
  const bool internal = kind == Comparator::Kind::kInternalBytewise;
  const uintptr_t t = reinterpret_cast<uintptr_t>(target.data());
  const uintptr_t buf = reinterpret_cast<uintptr_t>(key_buf_);
  if (global_seqno_ != 0 ||
      (kind != Comparator::Kind::kBytewise && !internal) ||
      (internal && target.size() < 8) ||
      (t + target.size() > buf && t < buf + key_capacity_)) {
    // No shortcut: entry by entry from here.
    while (ParseNextKey()) {
      if (CompareInline(comparator_, key_, target) >= 0) return true;
    }
    return true;
  }
  const size_t trailer = internal ? 8 : 0;
  const size_t target_order = target.size() - trailer;  // its user key
  const char* const limit = data_ + restart_offset_;
  for (;;) {
    // Here the iterator is at an entry < target, rebuilt.
    size_t m = CommonPrefix(raw_key_, target);
    if (raw_key_.size() < trailer || m >= raw_key_.size() - trailer ||
        m >= target_order) {
      while (ParseNextKey()) {
        if (CompareInline(comparator_, key_, target) >= 0) return true;
      }
      return true;
    }
    size_t prev_len = raw_key_.size();
    uint32_t off = NextEntryOffset();
    bool rebuild = false;  // the entry at off must be rebuilt and compared
    bool answer = false;   // the entry at off is the answer
    while (!rebuild && !answer) {
      const char* p = data_ + off;
      if (p >= limit) {  // past the last entry: no key >= target here
        MarkInvalid();
        return true;
      }
      if (limit - p < 3) return false;
      const uint32_t s = static_cast<uint8_t>(p[0]);
      const uint32_t ns = static_cast<uint8_t>(p[1]);
      const uint32_t vl = static_cast<uint8_t>(p[2]);
      if ((s | ns | vl) >= 128 ||
          static_cast<size_t>(limit - p) < 3 + ns + vl || s > prev_len) {
        return false;
      }
      if (s > m) {
        // Same byte m as the last key: < target.
        prev_len = s + ns;
        off += 3 + ns + vl;
        continue;
      }
      // The entry's first s bytes are target's.
      if (s < m) {
        answer = ns > 0 &&
                 static_cast<uint8_t>(p[3]) > static_cast<uint8_t>(target[s]);
        rebuild = !answer;
        continue;
      }
      // s == m: its user key's bytes from m on against target's.
      if (ns <= trailer) {
        rebuild = true;
        continue;
      }
      // Mostly the first byte decides (then the new m is the old one).
      const uint8_t first = static_cast<uint8_t>(p[3]);
      const uint8_t target_first = static_cast<uint8_t>(target[m]);
      if (first != target_first) {
        if (first > target_first) {
          answer = true;
        } else {
          prev_len = s + ns;
          off += 3 + ns + vl;
        }
        continue;
      }
      const Slice rest(p + 3, ns - trailer);
      const Slice target_rest(target.data() + m, target_order - m);
      const int r = rest.compare(target_rest);
      if (r > 0) {
        answer = true;
      } else if (r == 0) {
        rebuild = true;  // the same user key: the trailers decide
      } else {
        // < target; the bytes it shares with target, if they end inside
        // both user keys, are the new m.
        const size_t shared_rest = CommonPrefix(rest, target_rest);
        if (shared_rest >= rest.size()) {
          rebuild = true;  // its user key is a prefix of target's
          continue;
        }
        m += shared_rest;
        prev_len = s + ns;
        off += 3 + ns + vl;
      }
    }
    // Rebuild the entry at off: its shared bytes are target's.
    raw_key_ = Slice(target.data(), m);
    value_ = Slice(data_ + off, 0);
    if (!ParseNextKey()) return true;  // corruption: status_ says so
    // Compared even when the shortcut said "answer": a block whose shared
    // lengths are not the longest then still seeks right.
    if (CompareInline(comparator_, key_, target) >= 0) return true;
  }
}

void BlockIter::SeekToRestartEntry(uint32_t index) {
  if (!status_.ok() || data_ == nullptr) return;
  ClearPrevCache();
  if (index >= num_restarts_) {
    MarkInvalid();
    return;
  }
  SeekToRestartPoint(index);
  ParseNextKey();
}

void BlockIter::SeekToFirst() {
  if (!status_.ok() || data_ == nullptr) return;
  ClearPrevCache();
  SeekToRestartPoint(0);
  ParseNextKey();
}

void BlockIter::SeekToLast() {
  if (!status_.ok() || data_ == nullptr) return;
  ClearPrevCache();
  SeekToRestartPoint(num_restarts_ - 1);
  while (ParseNextKey() && NextEntryOffset() < restart_offset_) {
    // Keep skipping.
  }
}

}  // namespace shale
