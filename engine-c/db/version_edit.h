// VersionEdit: one change to the set of live files (files added to and
// removed from levels) plus the counters recovery needs. The MANIFEST is a
// log (log/ record format) of encoded edits; replaying them in order
// rebuilds the file set.
//
// Encoding (docs/formats.md, "MANIFEST"):
//
//   edit  := field*
//   field := tag: varint32, then by tag:
//     1  kComparator      varstring            user comparator name
//     2  kLogNumber       varint64             WALs below this are flushed
//     3  kNextFileNumber  varint64
//     4  kLastSequence    varint64
//     5  kFormatVersion   varint32             1; written first in each
//                                              MANIFEST
//     6  kDeletedFile     varint32 level, varint64 file number
//     7  kNewFile         varint32 level, varstring file
//   file  := number: varint64, size: varint64,
//            smallest: varstring, largest: varstring   (internal keys)
//            smallest_seqno: varint64, largest_seqno: varint64,
//            num_entries: varint64, num_range_deletions: varint64,
//            global_seqno: varint64,
//            (fields added by later versions follow; older readers skip
//             them because the file is length-prefixed)
//
// DO NOT CHANGE the tag values or the meaning of a field; an unknown tag is
// Corruption (a reader cannot know whether it could ignore it).
//
// Thread safety: a VersionEdit is used by one thread at a time.

#ifndef SHALE_DB_VERSION_EDIT_H_
#define SHALE_DB_VERSION_EDIT_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "db/dbformat.h"
#include "util/status.h"

namespace shale {

constexpr uint32_t kManifestFormatVersion = 1;

// What the engine knows about one SST file.
class Table;

struct FileMetaData {
  uint64_t number = 0;
  uint64_t file_size = 0;
  // Bounds of every entry and range tombstone in the file. A range
  // tombstone's end bound is (end, kMaxSequenceNumber, kTypeRangeDeletion),
  // which sorts before every real entry of user key end.
  InternalKey smallest;
  InternalKey largest;
  SequenceNumber smallest_seqno = kMaxSequenceNumber;
  SequenceNumber largest_seqno = 0;
  uint64_t num_entries = 0;
  uint64_t num_range_deletions = 0;
  // Non-zero for an ingested file: every entry reads with this sequence
  // number (Table::Open's global_seqno).
  SequenceNumber global_seqno = 0;

  // In memory only. Guarded by the DB mutex.
  int refs = 0;
  bool being_compacted = false;
  // The table cache's handle (a Cache::Handle*) on the open table, pinned
  // for the file's lifetime when the table cache is unbounded
  // (max_open_files = -1) so that reads skip the cache lookup. Set once,
  // by compare-and-swap, and released by TableCache::Unpin.
  std::atomic<void*> pinned{nullptr};
  // The table of that pinned handle, set once the pin is taken and cleared
  // before it is released: a point read goes to the table straight from
  // here, without the table cache.
  std::atomic<const Table*> pinned_table{nullptr};

  FileMetaData() = default;
  FileMetaData(const FileMetaData& f) { *this = f; }
  FileMetaData& operator=(const FileMetaData& f) {
    number = f.number;
    file_size = f.file_size;
    smallest = f.smallest;
    largest = f.largest;
    smallest_seqno = f.smallest_seqno;
    largest_seqno = f.largest_seqno;
    num_entries = f.num_entries;
    num_range_deletions = f.num_range_deletions;
    global_seqno = f.global_seqno;
    refs = f.refs;
    being_compacted = f.being_compacted;
    // The pinned table is not copied: it belongs to one FileMetaData.
    return *this;
  }

  // Widens the bounds to include an entry.
  void UpdateBoundaries(const Slice& ikey, SequenceNumber seq,
                        const InternalKeyComparator& icmp);
};

class VersionEdit {
 public:
  VersionEdit() = default;

  void Clear() { *this = VersionEdit(); }

  void SetComparatorName(const Slice& name) {
    has_comparator_ = true;
    comparator_ = name.ToString();
  }
  void SetLogNumber(uint64_t num) {
    has_log_number_ = true;
    log_number_ = num;
  }
  void SetNextFile(uint64_t num) {
    has_next_file_number_ = true;
    next_file_number_ = num;
  }
  void SetLastSequence(SequenceNumber seq) {
    has_last_sequence_ = true;
    last_sequence_ = seq;
  }
  void SetFormatVersion(uint32_t v) {
    has_format_version_ = true;
    format_version_ = v;
  }

  // Adds file f at level. REQUIRES: f is not in any level of the version
  // the edit applies to, unless a DeleteFile in this edit removes it.
  void AddFile(int level, const FileMetaData& f) {
    new_files_.emplace_back(level, f);
  }
  void DeleteFile(int level, uint64_t number) {
    deleted_files_.emplace_back(level, number);
  }

  void EncodeTo(std::string* dst) const;
  Status DecodeFrom(const Slice& src);
  std::string DebugString() const;

  bool has_comparator() const { return has_comparator_; }
  const std::string& comparator() const { return comparator_; }
  bool has_log_number() const { return has_log_number_; }
  uint64_t log_number() const { return log_number_; }
  bool has_next_file_number() const { return has_next_file_number_; }
  uint64_t next_file_number() const { return next_file_number_; }
  bool has_last_sequence() const { return has_last_sequence_; }
  SequenceNumber last_sequence() const { return last_sequence_; }
  bool has_format_version() const { return has_format_version_; }
  uint32_t format_version() const { return format_version_; }
  const std::vector<std::pair<int, uint64_t>>& deleted_files() const {
    return deleted_files_;
  }
  const std::vector<std::pair<int, FileMetaData>>& new_files() const {
    return new_files_;
  }

 private:
  std::string comparator_;
  uint64_t log_number_ = 0;
  uint64_t next_file_number_ = 0;
  SequenceNumber last_sequence_ = 0;
  uint32_t format_version_ = 0;
  bool has_comparator_ = false;
  bool has_log_number_ = false;
  bool has_next_file_number_ = false;
  bool has_last_sequence_ = false;
  bool has_format_version_ = false;

  std::vector<std::pair<int, uint64_t>> deleted_files_;
  std::vector<std::pair<int, FileMetaData>> new_files_;
};

}  // namespace shale

#endif  // SHALE_DB_VERSION_EDIT_H_
