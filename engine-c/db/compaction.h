// Compaction: what one compaction reads and where it writes, and the
// picker that chooses the next compaction (leveled, RocksDB-style).
//
// Picking. Each level gets a score: L0 its file count over
// level0_file_num_compaction_trigger, Ln (n >= 1) its bytes over its target
// max_bytes_for_level_base * multiplier^(n-1). The level with the highest
// score >= 1 compacts first. From L0 every L0 file goes (they overlap each
// other); from Ln one file goes, the one whose overlap with Ln+1 is
// smallest relative to its own size (RocksDB's kMinOverlappingRatio,
// which keeps write amplification low), together with the Ln+1 files it
// overlaps. A file with nothing to merge with below moves down without
// being rewritten, and so do up to three of its neighbours that have
// nothing below them either.
//
// Concurrency. Input files are marked being_compacted. A candidate is
// skipped if any file it would read is being compacted, or if its output
// range overlaps the output range of a running compaction into the same
// level; only one compaction reads L0 at a time.
//
// Thread safety: a Compaction is built and released under the DB mutex and
// read by one job without it.

#ifndef SHALE_DB_COMPACTION_H_
#define SHALE_DB_COMPACTION_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "db/dbformat.h"
#include "db/options.h"
#include "db/version_edit.h"

namespace shale {

class Version;
class VersionEdit;

class Compaction {
 public:
  ~Compaction();
  Compaction(const Compaction&) = delete;
  Compaction& operator=(const Compaction&) = delete;

  int level() const { return level_; }
  int output_level() const { return output_level_; }
  // which 0: files from level(), 1: from output_level().
  const std::vector<FileMetaData*>& inputs(int which) const {
    return inputs_[which];
  }
  size_t num_input_files() const {
    return inputs_[0].size() + inputs_[1].size();
  }
  uint64_t input_bytes() const;
  uint64_t max_output_file_size() const { return max_output_file_size_; }
  // Nothing older than the inputs lies below the output level.
  bool bottommost() const { return bottommost_; }
  bool manual() const { return manual_; }
  Version* input_version() const { return input_version_; }

  // User key range of all inputs.
  const std::string& smallest_user_key() const { return smallest_user_key_; }
  const std::string& largest_user_key() const { return largest_user_key_; }

  // A single file with nothing to merge with: move it down a level.
  bool IsTrivialMove() const;

  // Adds the deletion of every input file to edit.
  void AddInputDeletions(VersionEdit* edit) const;

  // True if the output file should end before internal_key because it
  // already overlaps too much of the level below the output level (which
  // would make its own compaction expensive). Call with each key in order.
  bool ShouldStopBefore(const Slice& internal_key);

  // Marks (or clears) the inputs as being compacted. REQUIRES: DB mutex.
  void MarkFilesBeingCompacted(bool value);

  std::string DebugString() const;

 private:
  friend class CompactionPicker;

  Compaction(Version* input_version, int level, int output_level,
             const Options& options, const InternalKeyComparator* icmp);
  void SetupBounds();

  const int level_;
  const int output_level_;
  Version* const input_version_;  // referenced while the compaction lives
  const InternalKeyComparator* const icmp_;
  uint64_t max_output_file_size_;
  uint64_t max_grandparent_overlap_;
  bool bottommost_ = false;
  bool manual_ = false;
  std::vector<FileMetaData*> inputs_[2];
  // Files of output_level + 1 overlapping the compaction.
  std::vector<FileMetaData*> grandparents_;
  size_t grandparent_index_ = 0;
  bool seen_key_ = false;
  uint64_t overlapped_bytes_ = 0;
  std::string smallest_user_key_;
  std::string largest_user_key_;
};

// Chooses compactions. Stateless apart from its configuration; the running
// compactions are passed in.
class CompactionPicker {
 public:
  CompactionPicker(const Options& options, const InternalKeyComparator* icmp)
      : options_(options), icmp_(icmp) {}

  // The target size of level (>= 1).
  uint64_t MaxBytesForLevel(int level) const;

  // The score of each level of v (see the file comment), ignoring files
  // already being compacted.
  void ComputeScores(const Version* v, double* scores) const;

  // Bytes that compaction still has to move to bring every level under its
  // target (an estimate, for stats and stalls).
  uint64_t EstimatePendingBytes(const Version* v) const;

  // The next automatic compaction of v, or nullptr if none is needed or
  // possible now. The result references v and has its inputs marked.
  // REQUIRES: DB mutex held.
  Compaction* Pick(Version* v, const std::vector<Compaction*>& running) const;

  // A compaction of the files of level overlapping [begin, end] (nullptr:
  // unbounded) into level + 1 - or, with into_same_level, rewritten in
  // place (for the bottom level: drops what no snapshot needs any more) -
  // or nullptr if level has none there or some are busy (*busy is then
  // set). REQUIRES: DB mutex held.
  Compaction* PickManual(Version* v, int level, const Slice* begin,
                         const Slice* end, bool into_same_level,
                         const std::vector<Compaction*>& running,
                         bool* busy) const;

 private:
  // Completes c (level inputs chosen): adds the overlapping output-level
  // files, checks for conflicts. Returns nullptr (deleting c) on conflict.
  Compaction* Finish(Compaction* c,
                     const std::vector<Compaction*>& running) const;
  bool AnyBeingCompacted(const std::vector<FileMetaData*>& files) const;
  // *inputs is one file of level (>= 1) that overlaps nothing in level + 1.
  // Widens it to up to kMaxMultiTrivialMove neighbouring files whose range
  // together still overlaps nothing below, so one trivial move takes them
  // all (RocksDB's TryExtendNonL0TrivialMove). Draining a level that way
  // leaves the next compaction into it fewer files to rewrite.
  void ExtendTrivialMove(Version* v, int level,
                         std::vector<FileMetaData*>* inputs) const;
  bool OutputRangeConflicts(const Compaction* c,
                            const std::vector<Compaction*>& running) const;

  const Options options_;
  const InternalKeyComparator* const icmp_;
};

}  // namespace shale

#endif  // SHALE_DB_COMPACTION_H_
