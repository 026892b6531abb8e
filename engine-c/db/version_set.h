// Versions: which SST files make up the database, level by level.
//
// A Version is an immutable file set. Readers (point lookups, iterators,
// compactions) hold a reference to the Version they started on, so the
// files in it are not deleted under them even after compaction has replaced
// them. The VersionSet holds the current Version, every older Version
// still referenced, and the MANIFEST: a log of VersionEdits whose replay
// rebuilds the current file set. CURRENT names the live MANIFEST and is
// switched by an atomic rename.
//
// Level invariants. L0 files may overlap one another; they are kept newest
// first (by largest sequence number). In L1 and below, files are sorted by
// smallest key and do not overlap: each file's largest internal key sorts
// before the next file's smallest. For any key, newer versions are in
// lower-numbered levels.
//
// Thread safety: Version and VersionSet are guarded by the DB mutex, except
// that a referenced Version's file lists may be read without it (they never
// change) and its lookups run without it.

#ifndef SHALE_DB_VERSION_SET_H_
#define SHALE_DB_VERSION_SET_H_

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "db/dbformat.h"
#include "db/options.h"
#include "db/version_edit.h"
#include "log/log_writer.h"
#include "table/options.h"
#include "table/table.h"
#include "util/iterator.h"
#include "util/mutex.h"
#include "util/thread_annotations.h"

namespace shale {

class GetContext;
struct FilterProbe;
class RangeDelAggregator;
class TableCache;
class VersionSet;
class WritableFile;

// Returns the index of the first file in files (sorted, non-overlapping)
// whose largest key is >= key; files.size() if there is none.
size_t FindFile(const InternalKeyComparator& icmp,
                const std::vector<FileMetaData*>& files, const Slice& key);

// An iterator over the entries of files (sorted, non-overlapping: one
// level's files or a run of them), opening each file only when reached.
// files must outlive the iterator.
Iterator* NewConcatenatingIterator(const InternalKeyComparator* icmp,
                                   const std::vector<FileMetaData*>* files,
                                   TableCache* table_cache,
                                   const TableReadOptions& options);

// One key of a MultiGet on a Version.
struct MultiGetKey {
  const LookupKey* lookup;
  GetContext* ctx;
  bool done = false;
  Status status;
  FilterProbe probe;  // the key is hashed for the first filter only
};

class Version {
 public:
  Version(const Version&) = delete;
  Version& operator=(const Version&) = delete;

  // REQUIRES: DB mutex held.
  void Ref();
  void Unref();

  // Looks the key up in the files, newest data first, feeding ctx. Returns
  // an I/O or corruption error met on the way (ctx then undecided).
  // REQUIRES: this Version is referenced. May run without the DB mutex.
  Status Get(const TableReadOptions& options, const LookupKey& key,
             GetContext* ctx);

  // Get for many keys, each file probed once for all the keys it may hold
  // (Table::MultiGet; a file with one key is read as Get reads it). keys
  // are sorted by user key. Sets done/status. *keys is scratch: its
  // entries are left in no particular order.
  void MultiGet(const TableReadOptions& options,
                std::vector<MultiGetKey*>* keys);

  // Appends iterators over the files whose key range meets [lower, upper)
  // (nullptr: unbounded): one per L0 file, one per non-empty level. Adds
  // the files' range tombstones to range_del (may be nullptr).
  Status AddIterators(const TableReadOptions& options, const Slice* lower,
                      const Slice* upper, std::vector<Iterator*>* iters,
                      RangeDelAggregator* range_del);

  // AddIterators for a read of the entries in [target, upper) that share
  // target's filter key (user keys; upper nullptr: unbounded): one iterator per
  // file whose key range meets the span and whose filter may hold that key;
  // files it rules out are not read. Every file meeting the span adds its range
  // tombstones, filter or not.
  Status AddPrefixIterators(const TableReadOptions& options,
                            const Slice& target, const Slice* upper,
                            std::vector<Iterator*>* iters,
                            RangeDelAggregator* range_del);

  // The point form of AddPrefixIterators, for a read that wants one entry:
  // calls callback(arg, 0, key, value) with the first entry at or after
  // lookup's internal key in each file whose key range meets [lookup's
  // user key, upper) and whose filter may hold its filter key, building no
  // iterator; the slices are valid during the call only. Every file meeting
  // the span adds its range tombstones to range_del.
  Status PrefixFirstEntries(const TableReadOptions& options,
                            const LookupKey& lookup, const Slice* upper,
                            void* arg,
                            void (*callback)(void* arg, size_t index,
                                             const Slice& key,
                                             const Slice& value),
                            RangeDelAggregator* range_del);

  // Files in level whose user key range meets [begin, end] (nullptr:
  // unbounded). In L0, the range is widened to cover every file that
  // overlaps a file it picks, transitively.
  void GetOverlappingInputs(int level, const Slice* begin, const Slice* end,
                            std::vector<FileMetaData*>* inputs) const;

  // True if a file in level overlaps the user key range [smallest,largest].
  bool OverlapInLevel(int level, const Slice* smallest,
                      const Slice* largest) const;

  int NumFiles(int level) const {
    return static_cast<int>(files_[level].size());
  }
  uint64_t NumLevelBytes(int level) const;
  const std::vector<FileMetaData*>& files(int level) const {
    return files_[level];
  }
  int num_levels() const;

  // Estimated file bytes holding keys in [begin, end), and their number of
  // entries. end == nullptr means no upper bound.
  void ApproximateSize(const Slice& begin, const Slice* end, uint64_t* bytes,
                       uint64_t* keys);

  std::string DebugString() const;

 private:
  friend class VersionSet;
  friend class VersionBuilder;

  explicit Version(VersionSet* vset) : vset_(vset) {}
  ~Version();

  // Runs a Get step on one file; returns true when ctx is decided.
  bool GetFromFile(const TableReadOptions& options, FileMetaData* f,
                   const LookupKey& key, FilterProbe* probe, GetContext* ctx,
                   Status* s);

  VersionSet* const vset_;
  Version* next_ = this;  // the VersionSet's list of live versions
  Version* prev_ = this;
  int refs_ = 0;
  std::vector<FileMetaData*> files_[kMaxLevels];
};

class VersionSet {
 public:
  // mu is the DB mutex, which guards the VersionSet.
  VersionSet(const std::string& dbname, const Options* options, Env* env,
             TableCache* table_cache, const InternalKeyComparator* icmp,
             Mutex* mu);
  VersionSet(const VersionSet&) = delete;
  VersionSet& operator=(const VersionSet&) = delete;
  ~VersionSet();

  // Writes the first MANIFEST and CURRENT of a new database.
  Status CreateNew();

  // Reads CURRENT and the MANIFEST it names and installs the file set.
  Status Recover();

  // Applies edit to the current version, logs it to the MANIFEST (starting
  // a new MANIFEST when there is none, after a failed write, or when it has
  // grown large) and installs the result as current. The caller sets the
  // edit's last sequence. Releases the DB mutex while writing; edits are
  // applied one at a time. REQUIRES: the DB mutex is held. (Not annotated:
  // callers hold it as DBImpl::mutex_, which the analysis cannot tie to
  // mu_; the body asserts it.)
  Status LogAndApply(VersionEdit* edit) NO_THREAD_SAFETY_ANALYSIS;

  Version* current() const { return current_; }
  uint64_t NewFileNumber() { return next_file_number_++; }
  // Makes sure numbers up to number are never handed out.
  void MarkFileNumberUsed(uint64_t number) {
    if (next_file_number_ <= number) next_file_number_ = number + 1;
  }
  uint64_t LogNumber() const { return log_number_; }
  uint64_t ManifestFileNumber() const { return manifest_file_number_; }
  // Bytes of the MANIFEST written so far (for checkpoints).
  uint64_t ManifestFileSize() const;
  SequenceNumber RecoveredLastSequence() const { return last_sequence_; }
  // True while a LogAndApply is writing.
  bool ManifestWriteInProgress() const { return manifest_writing_; }

  // Adds the number of every file of every live version to *live.
  void AddLiveFiles(std::set<uint64_t>* live) const;

  const InternalKeyComparator* icmp() const { return icmp_; }
  TableCache* table_cache() const { return table_cache_; }
  const Options* options() const { return options_; }

 private:
  friend class Version;

  void AppendVersion(Version* v);
  Status WriteSnapshot(log::Writer* log);
  Status SetCurrentFile(uint64_t manifest_number);
  Status ReadManifest(const std::string& fname, VersionEdit* summary,
                      Version* v);

  Env* const env_;
  const std::string dbname_;
  const Options* const options_;
  TableCache* const table_cache_;
  const InternalKeyComparator* const icmp_;

  uint64_t next_file_number_ = 2;
  uint64_t manifest_file_number_ = 0;
  uint64_t log_number_ = 0;
  SequenceNumber last_sequence_ = 0;

  Mutex* const mu_;
  std::unique_ptr<WritableFile> descriptor_file_;
  std::unique_ptr<log::Writer> descriptor_log_;
  bool manifest_writing_ = false;  // a LogAndApply is between its locks
  CondVar manifest_cv_;            // signalled when it clears

  Version dummy_versions_;  // head of the circular list of versions
  Version* current_ = nullptr;
};

}  // namespace shale

#endif  // SHALE_DB_VERSION_SET_H_
