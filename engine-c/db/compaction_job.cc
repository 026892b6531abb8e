#include "db/compaction_job.h"

#include "db/compaction_iterator.h"
#include "db/filename.h"
#include "db/table_cache.h"
#include "db/version_set.h"
#include "table/merging_iterator.h"
#include "table/table_builder.h"
#include "util/env.h"

namespace shale {

CompactionJob::CompactionJob(Compaction* compaction, const std::string& dbname,
                             Env* env, const TableOptions& table_options,
                             TableCache* table_cache,
                             std::vector<SequenceNumber> snapshots,
                             std::function<uint64_t()> new_file_number,
                             const std::atomic<bool>* shutting_down)
    : c_(compaction),
      dbname_(dbname),
      env_(env),
      table_options_(table_options),
      icmp_(
          static_cast<const InternalKeyComparator*>(table_options.comparator)),
      table_cache_(table_cache),
      snapshots_(std::move(snapshots)),
      new_file_number_(std::move(new_file_number)),
      shutting_down_(shutting_down) {}

CompactionJob::~CompactionJob() {
  if (builder_ != nullptr) {
    builder_->Abandon();
    builder_.reset();
    file_->Close();
    env_->RemoveFile(TableFileName(dbname_, current_.number));
  }
}

int CompactionJob::SegmentOf(const Slice& user_key) const {
  if (num_segments_ == 1) return 0;
  if (icmp_->CompareUserKeys(user_key, c_->deep_lower()) < 0) return 0;
  if (icmp_->CompareUserKeys(user_key, c_->deep_upper()) < 0) return 1;
  return 2;
}

const std::string* CompactionJob::SegmentLower(int s) const {
  if (s == 0) return nullptr;
  return s == 1 ? &c_->deep_lower() : &c_->deep_upper();
}

const std::string* CompactionJob::SegmentUpper(int s) const {
  if (s == num_segments_ - 1) return nullptr;
  return s == 0 ? &c_->deep_lower() : &c_->deep_upper();
}

// True if a fragment of list meets [lower, upper) (nullptr: unbounded).
static bool TombstonesMeet(const FragmentedRangeTombstoneList& list,
                           const std::string* lower, const std::string* upper) {
  const InternalKeyComparator& icmp = list.icmp();
  for (const auto& f : list.fragments()) {
    if (lower != nullptr && icmp.CompareUserKeys(f.end, *lower) <= 0) continue;
    if (upper != nullptr && icmp.CompareUserKeys(f.start, *upper) >= 0) break;
    return true;
  }
  return false;
}

Status CompactionJob::OpenOutput() {
  current_ = FileMetaData();
  current_.number = new_file_number_();
  Status s =
      env_->NewWritableFile(TableFileName(dbname_, current_.number), &file_);
  if (!s.ok()) return s;
  builder_ = std::make_unique<TableBuilder>(table_options_, file_.get());
  return Status::OK();
}

Status CompactionJob::FinishOutput(const Slice* upper) {
  const Slice lower(lower_);
  const bool deep = segment_ == 1;
  if (tombstones_ != nullptr) {
    TombstonesToTable(*tombstones_, has_lower_ ? &lower : nullptr, upper,
                      snapshots_,
                      deep ? c_->deep_bottommost() : c_->bottommost(),
                      builder_.get(), &current_);
  }
  const std::string fname = TableFileName(dbname_, current_.number);
  Status s;
  if (current_.num_entries == 0 && current_.num_range_deletions == 0) {
    // Nothing survived in this span.
    builder_->Abandon();
    builder_.reset();
    file_->Close();
    env_->RemoveFile(fname);
    return Status::OK();
  }
  s = builder_->Finish();
  if (s.ok()) s = file_->Sync();
  if (s.ok()) s = file_->Close();
  current_.file_size = builder_->FileSize();
  builder_.reset();
  file_.reset();
  if (s.ok()) s = table_cache_->Verify(&current_);
  if (!s.ok()) {
    env_->RemoveFile(fname);
    return s;
  }
  bytes_written_ += current_.file_size;
  outputs_.push_back(
      Output{c_->output_level() + (deep ? 1 : 0), std::move(current_)});
  return Status::OK();
}

Status CompactionJob::EndSegment() {
  const std::string* upper = SegmentUpper(segment_);
  Status s;
  if (builder_ == nullptr && tombstones_ != nullptr &&
      TombstonesMeet(*tombstones_, has_lower_ ? &lower_ : nullptr, upper)) {
    s = OpenOutput();  // tombstones and no surviving entries
  }
  if (s.ok() && builder_ != nullptr) {
    const Slice u = upper != nullptr ? Slice(*upper) : Slice();
    s = FinishOutput(upper != nullptr ? &u : nullptr);
  }
  if (!s.ok()) return s;
  segment_++;
  if (segment_ < num_segments_) {
    lower_ = *SegmentLower(segment_);
    has_lower_ = true;
  }
  return Status::OK();
}

Status CompactionJob::Run() {
  TableReadOptions ro;
  ro.verify_checksums = true;
  ro.fill_cache = false;  // a compaction's reads would flush the cache

  std::vector<Iterator*> iters;
  std::vector<std::shared_ptr<const FragmentedRangeTombstoneList>> lists;
  Status s;
  for (int which = 0; which < 3 && s.ok(); which++) {
    const std::vector<FileMetaData*>& files = c_->inputs(which);
    if (files.empty()) continue;
    if (which == 0 && c_->level() == 0) {
      for (FileMetaData* f : files) {
        iters.push_back(table_cache_->NewIterator(ro, f));
      }
    } else {
      iters.push_back(
          NewConcatenatingIterator(icmp_, &files, table_cache_, ro));
    }
    for (FileMetaData* f : files) {
      bytes_read_ += f->file_size;
      std::shared_ptr<const FragmentedRangeTombstoneList> list;
      s = table_cache_->GetRangeTombstones(f, &list);
      if (!s.ok()) break;
      if (list != nullptr) lists.push_back(std::move(list));
    }
  }
  std::unique_ptr<Iterator> input(
      NewMergingIterator(icmp_, iters.data(), static_cast<int>(iters.size())));
  if (!s.ok()) return s;
  tombstones_ = MergeTombstones(lists, *icmp_);

  CompactionIterator citer(input.get(), icmp_, &snapshots_, tombstones_.get(),
                           c_->bottommost());
  citer.set_zero_sequences(c_->output_level() > 0);
  if (c_->has_deep_range()) {
    num_segments_ = 3;
    citer.set_deep_range(&c_->deep_lower(), &c_->deep_upper(),
                         c_->deep_bottommost());
  }
  std::string prev_user_key;
  bool has_prev = false;
  for (citer.SeekToFirst(); citer.Valid(); citer.Next()) {
    if (shutting_down_->load(std::memory_order_acquire)) {
      return Status::Closed("compaction stopped: the database is closing");
    }
    const Slice key = citer.key();
    const Slice user_key = citer.parsed().user_key;
    const bool new_user_key =
        !has_prev || icmp_->CompareUserKeys(user_key, prev_user_key) != 0;
    if (new_user_key) {
      // A segment's outputs end at its upper bound.
      const int segment = SegmentOf(user_key);
      while (segment_ < segment) {
        s = EndSegment();
        if (!s.ok()) return s;
      }
      // Outputs end only between user keys.
      const bool open = builder_ != nullptr;
      if (c_->ShouldStopBefore(key, open, open ? builder_->FileSize() : 0,
                               segment_ == 1)) {
        s = FinishOutput(&user_key);
        if (!s.ok()) return s;
        lower_.assign(user_key.data(), user_key.size());
        has_lower_ = true;
      }
      prev_user_key.assign(user_key.data(), user_key.size());
      has_prev = true;
    }
    if (builder_ == nullptr) {
      s = OpenOutput();
      if (!s.ok()) return s;
    }
    builder_->Add(key, citer.value());
    current_.UpdateBoundaries(key, citer.parsed().sequence, *icmp_);
    current_.num_entries++;
  }
  s = citer.status();
  entries_dropped_ = citer.num_dropped();
  while (s.ok() && segment_ < num_segments_) s = EndSegment();
  return s;
}

}  // namespace shale
