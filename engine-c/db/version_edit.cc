#include "db/version_edit.h"

#include "db/options.h"
#include "util/coding.h"

namespace shale {

namespace {

// Tags of the MANIFEST format. DO NOT CHANGE: they are on disk.
enum Tag : uint32_t {
  kComparator = 1,
  kLogNumber = 2,
  kNextFileNumber = 3,
  kLastSequence = 4,
  kFormatVersion = 5,
  kDeletedFile = 6,
  kNewFile = 7,
};

bool GetLevel(Slice* input, int* level) {
  uint32_t v;
  if (GetVarint32(input, &v) && v < static_cast<uint32_t>(kMaxLevels)) {
    *level = static_cast<int>(v);
    return true;
  }
  return false;
}

bool GetInternalKey(Slice* input, InternalKey* dst) {
  Slice str;
  if (!GetLengthPrefixedSlice(input, &str)) return false;
  ParsedInternalKey parsed;
  if (!ParseInternalKey(str, &parsed)) return false;
  return dst->DecodeFrom(str);
}

}  // namespace

void FileMetaData::UpdateBoundaries(const Slice& ikey, SequenceNumber seq,
                                    const InternalKeyComparator& icmp) {
  if (smallest.empty() || icmp.Compare(ikey, smallest.Encode()) < 0) {
    smallest.DecodeFrom(ikey);
  }
  if (largest.empty() || icmp.Compare(ikey, largest.Encode()) > 0) {
    largest.DecodeFrom(ikey);
  }
  if (seq < smallest_seqno) smallest_seqno = seq;
  if (seq > largest_seqno) largest_seqno = seq;
}

void VersionEdit::EncodeTo(std::string* dst) const {
  if (has_format_version_) {
    PutVarint32(dst, kFormatVersion);
    PutVarint32(dst, format_version_);
  }
  if (has_comparator_) {
    PutVarint32(dst, kComparator);
    PutLengthPrefixedSlice(dst, comparator_);
  }
  if (has_log_number_) {
    PutVarint32(dst, kLogNumber);
    PutVarint64(dst, log_number_);
  }
  if (has_next_file_number_) {
    PutVarint32(dst, kNextFileNumber);
    PutVarint64(dst, next_file_number_);
  }
  if (has_last_sequence_) {
    PutVarint32(dst, kLastSequence);
    PutVarint64(dst, last_sequence_);
  }
  for (const auto& [level, number] : deleted_files_) {
    PutVarint32(dst, kDeletedFile);
    PutVarint32(dst, level);
    PutVarint64(dst, number);
  }
  std::string file;
  for (const auto& [level, f] : new_files_) {
    file.clear();
    PutVarint64(&file, f.number);
    PutVarint64(&file, f.file_size);
    PutLengthPrefixedSlice(&file, f.smallest.Encode());
    PutLengthPrefixedSlice(&file, f.largest.Encode());
    PutVarint64(&file, f.smallest_seqno);
    PutVarint64(&file, f.largest_seqno);
    PutVarint64(&file, f.num_entries);
    PutVarint64(&file, f.num_range_deletions);
    PutVarint64(&file, f.global_seqno);
    PutVarint32(dst, kNewFile);
    PutVarint32(dst, level);
    PutLengthPrefixedSlice(dst, file);
  }
}

Status VersionEdit::DecodeFrom(const Slice& src) {
  Clear();
  Slice input = src;
  const char* msg = nullptr;
  uint32_t tag;
  while (msg == nullptr && GetVarint32(&input, &tag)) {
    switch (tag) {
      case kFormatVersion:
        if (GetVarint32(&input, &format_version_)) {
          has_format_version_ = true;
        } else {
          msg = "format version";
        }
        break;
      case kComparator: {
        Slice str;
        if (GetLengthPrefixedSlice(&input, &str)) {
          comparator_ = str.ToString();
          has_comparator_ = true;
        } else {
          msg = "comparator name";
        }
        break;
      }
      case kLogNumber:
        if (GetVarint64(&input, &log_number_)) {
          has_log_number_ = true;
        } else {
          msg = "log number";
        }
        break;
      case kNextFileNumber:
        if (GetVarint64(&input, &next_file_number_)) {
          has_next_file_number_ = true;
        } else {
          msg = "next file number";
        }
        break;
      case kLastSequence:
        if (GetVarint64(&input, &last_sequence_)) {
          has_last_sequence_ = true;
        } else {
          msg = "last sequence number";
        }
        break;
      case kDeletedFile: {
        int level;
        uint64_t number;
        if (GetLevel(&input, &level) && GetVarint64(&input, &number)) {
          deleted_files_.emplace_back(level, number);
        } else {
          msg = "deleted file";
        }
        break;
      }
      case kNewFile: {
        int level;
        Slice file;
        FileMetaData f;
        if (GetLevel(&input, &level) && GetLengthPrefixedSlice(&input, &file) &&
            GetVarint64(&file, &f.number) && GetVarint64(&file, &f.file_size) &&
            GetInternalKey(&file, &f.smallest) &&
            GetInternalKey(&file, &f.largest) &&
            GetVarint64(&file, &f.smallest_seqno) &&
            GetVarint64(&file, &f.largest_seqno) &&
            GetVarint64(&file, &f.num_entries) &&
            GetVarint64(&file, &f.num_range_deletions) &&
            GetVarint64(&file, &f.global_seqno)) {
          // Anything left in file was added by a later version: skipped.
          new_files_.emplace_back(level, f);
        } else {
          msg = "new file";
        }
        break;
      }
      default:
        return Status::Corruption("version edit has an unknown tag " +
                                  std::to_string(tag));
    }
  }
  if (msg == nullptr && !input.empty()) msg = "invalid tag";
  if (msg != nullptr) return Status::Corruption("version edit", msg);
  if (has_format_version_ && format_version_ > kManifestFormatVersion) {
    return Status::NotSupported("MANIFEST format version " +
                                std::to_string(format_version_) +
                                " is newer than this engine understands (" +
                                std::to_string(kManifestFormatVersion) + ")");
  }
  return Status::OK();
}

std::string VersionEdit::DebugString() const {
  std::string r = "VersionEdit {";
  if (has_comparator_) r += "\n  Comparator: " + comparator_;
  if (has_log_number_) r += "\n  LogNumber: " + std::to_string(log_number_);
  if (has_next_file_number_) {
    r += "\n  NextFile: " + std::to_string(next_file_number_);
  }
  if (has_last_sequence_) {
    r += "\n  LastSeq: " + std::to_string(last_sequence_);
  }
  for (const auto& [level, number] : deleted_files_) {
    r += "\n  DeleteFile: " + std::to_string(level) + " " +
         std::to_string(number);
  }
  for (const auto& [level, f] : new_files_) {
    r += "\n  AddFile: " + std::to_string(level) + " " +
         std::to_string(f.number) + " " + std::to_string(f.file_size) + " " +
         f.smallest.DebugString() + " .. " + f.largest.DebugString();
  }
  r += "\n}\n";
  return r;
}

}  // namespace shale
