// CompactionJob: runs one Compaction - merges its inputs, keeps what the
// snapshot stripes require (compaction_iterator.h) and writes the result as
// files of at most max_output_file_size, split only between user keys (all
// versions of a key stay in one file), and early where an output would
// overlap too much of the next level or can end on a file boundary of that
// level (Compaction::ShouldStopBefore).
//
// Range tombstones of the inputs are merged, and each output file gets the
// pieces between its split points: file i covers [split_i, split_i+1) of
// the key space, the first from the beginning and the last to the end, so
// every tombstone piece lands in exactly one file and the files stay
// disjoint.
//
// With a deep range (compaction.h) the key space is cut into three
// segments: before the range and after it (outputs into the output level)
// and the range itself (outputs one level further down). An output never
// spans two segments, and each segment's tombstone pieces go to its own
// outputs - to an output of tombstones alone if no key of the segment
// survives - so a tombstone spanning a segment boundary is split there.
// Pieces are dropped under the bottommost flag of their segment's level.
//
// Thread safety: Run() is called by one background thread without the DB
// mutex; the Compaction's inputs are marked being_compacted meanwhile.

#ifndef SHALE_DB_COMPACTION_JOB_H_
#define SHALE_DB_COMPACTION_JOB_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "db/compaction.h"
#include "db/range_tombstone.h"
#include "db/version_edit.h"
#include "table/options.h"
#include "util/status.h"

namespace shale {

class Env;
class TableBuilder;
class TableCache;
class WritableFile;

class CompactionJob {
 public:
  // new_file_number hands out a file number reserved against deletion
  // (it takes the DB mutex). snapshots ascending. Stops early, with
  // Status::Closed, once *shutting_down is set.
  CompactionJob(Compaction* compaction, const std::string& dbname, Env* env,
                const TableOptions& table_options, TableCache* table_cache,
                std::vector<SequenceNumber> snapshots,
                std::function<uint64_t()> new_file_number,
                const std::atomic<bool>* shutting_down);
  ~CompactionJob();
  CompactionJob(const CompactionJob&) = delete;
  CompactionJob& operator=(const CompactionJob&) = delete;

  Status Run();

  struct Output {
    int level;
    FileMetaData meta;
  };
  // After a successful Run: the files written and their levels, in key
  // order.
  const std::vector<Output>& outputs() const { return outputs_; }
  uint64_t bytes_read() const { return bytes_read_; }
  uint64_t bytes_written() const { return bytes_written_; }
  uint64_t entries_dropped() const { return entries_dropped_; }

 private:
  // Segments of the key space (see the file comment): 0 only, or 0 (before
  // the deep range), 1 (the deep range) and 2 (after it).
  int SegmentOf(const Slice& user_key) const;
  // The bounds of segment s (nullptr: unbounded).
  const std::string* SegmentLower(int s) const;
  const std::string* SegmentUpper(int s) const;

  Status OpenOutput();
  // Finishes the current output with the tombstone pieces below upper
  // (nullptr: all remaining).
  Status FinishOutput(const Slice* upper);
  // Ends segment_: finishes its open output, or writes its tombstone
  // pieces alone if none is open, then moves to the next segment.
  Status EndSegment();

  Compaction* const c_;
  const std::string dbname_;
  Env* const env_;
  const TableOptions table_options_;
  const InternalKeyComparator* const icmp_;
  TableCache* const table_cache_;
  const std::vector<SequenceNumber> snapshots_;
  const std::function<uint64_t()> new_file_number_;
  const std::atomic<bool>* const shutting_down_;

  std::shared_ptr<const FragmentedRangeTombstoneList> tombstones_;
  std::unique_ptr<WritableFile> file_;
  std::unique_ptr<TableBuilder> builder_;
  FileMetaData current_;
  std::string lower_;  // where the current output begins
  bool has_lower_ = false;
  int segment_ = 0;  // the segment being written
  int num_segments_ = 1;

  std::vector<Output> outputs_;
  uint64_t bytes_read_ = 0;
  uint64_t bytes_written_ = 0;
  uint64_t entries_dropped_ = 0;
};

}  // namespace shale

#endif  // SHALE_DB_COMPACTION_JOB_H_
