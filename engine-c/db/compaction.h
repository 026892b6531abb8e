// Compaction: what one compaction reads and where it writes, and the
// picker that chooses the next compaction (leveled, RocksDB-style).
//
// Picking. Each level gets a score: L0 its file count over
// level0_file_num_compaction_trigger, Ln (n >= 1) its bytes over its target
// max_bytes_for_level_base * multiplier^(n-1). Among the levels with a
// score >= 1, a trivial move (below) is taken first, whatever the scores:
// it writes nothing and shrinks the level that the next compaction would
// otherwise rewrite. Likewise, when an L0 compaction is due that will take
// L1 over its target, L1 files with nothing under them in L2 move down
// before it: they would have to leave L1 right after, and the L0
// compaction would rewrite them first. Then the level with the highest
// score compacts. From
// L0 every L0 file goes (they overlap each other), and while a flush is
// under way the L0 compaction waits for its file (as long as L0 holds
// fewer than twice level0_file_num_compaction_trigger files): it rewrites
// the L1 files under L0 however few L0 files it takes, so one more L0 file
// in it costs little and saves a rewrite of L1 later. From Ln one file goes,
// the one whose overlap with Ln+1 is smallest relative to its own size
// (RocksDB's kMinOverlappingRatio, which keeps write amplification low),
// together with the Ln+1 files it overlaps, and then every Ln neighbour
// that lies inside the key range of those Ln+1 files (they ride along
// without adding a byte to rewrite below). A file with nothing to merge
// with below moves down without being rewritten, and so do up to three of
// its neighbours that have nothing below them either. L0 moves too when
// its files overlap neither each other nor, over their joint span, any L1
// file (a sequential load): all of them go down to L1 by one MANIFEST
// edit (PickL0TrivialMove).
//
// Output files. Outputs are cut near target_file_size_base. When the
// output level is not the bottom of the data, a cut is placed where the
// key stream crosses a boundary between files of the level below the
// output (the grandparents) as soon as the output is half the target or
// more (a little more for each boundary it has already let pass, up to
// 90%), and an output may grow to twice the target waiting for such a
// boundary. An output whose ends line up with the grandparents' does not
// drag a partly-overlapped grandparent file into its own later
// compaction.
//
// Deep range. An L0 compaction that would leave L1 over its target also
// writes one key range straight to L2 (ChooseDeepRange): the L1 range that
// the L1 -> L2 compaction right after it would pick, with the L2 files
// under that range as a third set of inputs. Keys of the range go to L2
// outputs, the others to L1 outputs, so the bytes of the range are written
// once instead of once into L1 and again into L2.
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
  // which 0: files from level(), 1: from output_level(), 2: from
  // output_level() + 1, under the deep range (empty without one).
  const std::vector<FileMetaData*>& inputs(int which) const {
    return inputs_[which];
  }
  size_t num_input_files() const {
    return inputs_[0].size() + inputs_[1].size() + inputs_[2].size();
  }
  uint64_t input_bytes() const;
  // The size outputs aim for, and the size at which one is always cut.
  uint64_t target_output_file_size() const { return target_output_file_size_; }
  uint64_t max_output_file_size() const { return cutters_[0].max_file_size; }
  // Nothing older than the inputs lies below the output level.
  bool bottommost() const { return bottommost_; }

  // The deep range, if any: the user keys in [deep_lower(), deep_upper())
  // are written to output_level() + 1, the others to output_level(). The
  // bounds are user keys; deep_upper() is exclusive (the key right after
  // the last user key of the range). REQUIRES for the accessors:
  // has_deep_range().
  bool has_deep_range() const { return has_deep_range_; }
  const std::string& deep_lower() const { return deep_lower_; }
  const std::string& deep_upper() const { return deep_upper_; }
  // Nothing older than the inputs lies below output_level() + 1 in the
  // deep range.
  bool deep_bottommost() const { return deep_bottommost_; }
  bool manual() const { return manual_; }
  Version* input_version() const { return input_version_; }

  // User key range of all inputs.
  const std::string& smallest_user_key() const { return smallest_user_key_; }
  const std::string& largest_user_key() const { return largest_user_key_; }

  // Files with nothing to merge with (one file of L0, or several that
  // overlap neither each other nor anything in L1; any number of files of
  // a deeper level, which never overlap) and little overlap two levels
  // down: they move down a level without being rewritten.
  bool IsTrivialMove() const;

  // Adds the deletion of every input file to edit.
  void AddInputDeletions(VersionEdit* edit) const;

  // True if the output file being written (output_bytes long so far; 0
  // and output_open false if none is open) should end before internal_key:
  // it reached max_output_file_size(), or it already overlaps too much of
  // the level below the output level (which would make its own compaction
  // expensive), or internal_key is past the end of a grandparent file and
  // the output is large enough to end there (see the file comment). Call
  // with the first internal key of each user key, in order; after a true
  // result the caller must start a new output with internal_key. deep: the
  // key is in the deep range (its outputs are cut against the files of
  // output_level() + 2). The two kinds of output are followed separately,
  // and output_open false starts a new one.
  bool ShouldStopBefore(const Slice& internal_key, bool output_open,
                        uint64_t output_bytes, bool deep = false);

  // Marks (or clears) the inputs as being compacted. REQUIRES: DB mutex.
  void MarkFilesBeingCompacted(bool value);

  std::string DebugString() const;

 private:
  friend class CompactionPicker;

  // Where the outputs into one level are cut: the files of the level
  // below them (the grandparents) and how far the open output has got.
  struct OutputCutter {
    // Files of the level below the outputs, over the outputs' key range.
    std::vector<FileMetaData*> grandparents;
    // Cut at grandparent boundaries (not the bottom of the data).
    bool align = false;
    uint64_t max_file_size = 0;
    size_t grandparent_index = 0;
    // Grandparent bytes and boundaries the open output has passed.
    uint64_t overlapped_bytes = 0;
    int boundaries_passed = 0;
  };

  Compaction(Version* input_version, int level, int output_level,
             const Options& options, const InternalKeyComparator* icmp);
  void SetupBounds();
  // Sets up the cutter and bottommost flag of the deep range, whose bounds
  // and inputs_[2] are set. REQUIRES: SetupBounds() called since.
  void SetupDeepRange();
  // Fills cutter for outputs into output_level over [lo, hi].
  void SetupCutter(int output_level, const Slice& lo, const Slice& hi,
                   OutputCutter* cutter) const;

  const int level_;
  const int output_level_;
  Version* const input_version_;  // referenced while the compaction lives
  const InternalKeyComparator* const icmp_;
  const uint64_t target_output_file_size_;
  const uint64_t max_grandparent_overlap_;
  bool bottommost_ = false;
  bool manual_ = false;
  // The L0 inputs overlap neither each other nor L1 (PickL0TrivialMove).
  bool l0_disjoint_ = false;
  std::vector<FileMetaData*> inputs_[3];
  // [0]: outputs into output_level_, [1]: into output_level_ + 1.
  OutputCutter cutters_[2];
  std::string smallest_user_key_;
  std::string largest_user_key_;
  bool has_deep_range_ = false;
  bool deep_bottommost_ = false;
  std::string deep_lower_;    // inclusive
  std::string deep_largest_;  // inclusive: the last user key of the range
  std::string deep_upper_;    // exclusive: the key right after deep_largest_
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
  // possible now. flush_pending: a memtable is waiting for or in its flush
  // to L0. The result references v and has its inputs marked.
  // REQUIRES: DB mutex held.
  Compaction* Pick(Version* v, const std::vector<Compaction*>& running,
                   bool flush_pending) const;

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
  // files, widens the level inputs (ExpandLevelInputs) unless c is manual,
  // checks for conflicts. Returns nullptr (deleting c) on conflict.
  Compaction* Finish(Compaction* c,
                     const std::vector<Compaction*>& running) const;
  // c reads one or more files of level (>= 1) and the files of level + 1
  // they overlap. Adds the neighbouring level files that lie wholly inside
  // the key range c already covers, as long as none is being compacted,
  // the output-level inputs stay the same and c reads at most 25 target
  // file sizes (RocksDB's default max_compaction_bytes): they reach
  // level + 1 now at no extra cost below, instead of costing a rewrite of
  // the same level + 1 files later.
  void ExpandLevelInputs(Compaction* c) const;
  // c is an automatic L0 -> L1 compaction, its inputs set and checked but
  // not yet marked. If its output would leave L1 over its target, gives it
  // a deep range (see the file comment) and returns true. The range starts
  // as a run of c's L1 inputs that holds, scaled up by the L0 bytes that
  // will join it, at least the bytes L1 would be over its target; among
  // such runs, the one whose L2 files (the bytes it rewrites there) are
  // smallest relative to its own bytes, as PickLevelCompaction chooses a
  // file. The range is then widened to cover its L2 files whole, so the
  // L2 outputs stay disjoint from the L2 files left in place; it is
  // refused if it would then meet an L1 file that is not an input, a file
  // being compacted, or the output range of a running compaction.
  bool ChooseDeepRange(Compaction* c,
                       const std::vector<Compaction*>& running) const;
  // A trivial move of every L0 file, if they overlap neither each other
  // nor, over the span they cover together, any L1 file (as RocksDB's
  // TryPickL0TrivialMove, which takes such files oldest first). A
  // sequential load flushes such files, and they reach L1 by a MANIFEST
  // edit instead of a rewrite. All of L0 or nothing: a lone file moved
  // out of a random load's L0 would only be read back by the next L0
  // compaction, which rewrites the L1 files under it.
  // REQUIRES: DB mutex held.
  Compaction* PickL0TrivialMove(Version* v,
                                const std::vector<Compaction*>& running) const;
  // A trivial move out of level (>= 1), if one is possible: the first file
  // of level that overlaps nothing in level + 1, with its movable
  // neighbours (ExtendTrivialMove). REQUIRES: DB mutex held.
  Compaction* PickTrivialMove(Version* v, int level,
                              const std::vector<Compaction*>& running) const;
  // The compaction of level (>= 1) into level + 1 by the smallest overlap
  // ratio (see the file comment), or nullptr. REQUIRES: DB mutex held.
  Compaction* PickLevelCompaction(
      Version* v, int level, const std::vector<Compaction*>& running) const;
  bool AnyBeingCompacted(const std::vector<FileMetaData*>& files) const;
  // *inputs is one file of level (>= 1) that overlaps nothing in level + 1.
  // Widens it to up to kMaxMultiTrivialMove neighbouring files whose range
  // together still overlaps nothing below, so one trivial move takes them
  // all (RocksDB's TryExtendNonL0TrivialMove). Draining a level that way
  // leaves the next compaction into it fewer files to rewrite.
  void ExtendTrivialMove(Version* v, int level,
                         std::vector<FileMetaData*>* inputs) const;
  // True if an output range of c (its output level over its key range,
  // and the level below over its deep range) meets an output range of a
  // running compaction in the same level.
  bool OutputRangeConflicts(const Compaction* c,
                            const std::vector<Compaction*>& running) const;

  const Options options_;
  const InternalKeyComparator* const icmp_;
};

}  // namespace shale

#endif  // SHALE_DB_COMPACTION_H_
