#include "db/compaction.h"

#include <algorithm>
#include <cmath>

#include "db/version_set.h"
#include "util/comparator.h"

namespace shale {

Compaction::Compaction(Version* input_version, int level, int output_level,
                       const Options& options,
                       const InternalKeyComparator* icmp)
    : level_(level),
      output_level_(output_level),
      input_version_(input_version),
      icmp_(icmp),
      target_output_file_size_(options.target_file_size_base),
      max_grandparent_overlap_(10 * options.target_file_size_base) {
  input_version_->Ref();
}

Compaction::~Compaction() { input_version_->Unref(); }

uint64_t Compaction::input_bytes() const {
  uint64_t sum = 0;
  for (const auto& files : inputs_) {
    for (const FileMetaData* f : files) sum += f->file_size;
  }
  return sum;
}

void Compaction::SetupBounds() {
  bool first = true;
  for (const auto& files : inputs_) {
    for (const FileMetaData* f : files) {
      const Slice lo = f->smallest.user_key(), hi = f->largest.user_key();
      if (first || icmp_->CompareUserKeys(lo, smallest_user_key_) < 0) {
        smallest_user_key_ = lo.ToString();
      }
      if (first || icmp_->CompareUserKeys(hi, largest_user_key_) > 0) {
        largest_user_key_ = hi.ToString();
      }
      first = false;
    }
  }
  const Slice lo(smallest_user_key_), hi(largest_user_key_);
  SetupCutter(output_level_, lo, hi, &cutters_[0]);
  bottommost_ = true;
  for (int l = output_level_ + 1; l < input_version_->num_levels(); l++) {
    if (input_version_->OverlapInLevel(l, &lo, &hi)) {
      bottommost_ = false;
      break;
    }
  }
}

void Compaction::SetupDeepRange() {
  const Slice lo(deep_lower_), hi(deep_largest_);
  SetupCutter(output_level_ + 1, lo, hi, &cutters_[1]);
  deep_bottommost_ = true;
  for (int l = output_level_ + 2; l < input_version_->num_levels(); l++) {
    if (input_version_->OverlapInLevel(l, &lo, &hi)) {
      deep_bottommost_ = false;
      break;
    }
  }
}

void Compaction::SetupCutter(int output_level, const Slice& lo, const Slice& hi,
                             OutputCutter* cutter) const {
  *cutter = OutputCutter();
  if (output_level + 1 < input_version_->num_levels()) {
    input_version_->GetOverlappingInputs(output_level + 1, &lo, &hi,
                                         &cutter->grandparents);
  }
  // At the bottom of the data there is nothing to line up with.
  cutter->align = !cutter->grandparents.empty();
  cutter->max_file_size =
      cutter->align ? 2 * target_output_file_size_ : target_output_file_size_;
}

bool Compaction::IsTrivialMove() const {
  if (level_ == output_level_) return false;  // a rewrite in place
  if (inputs_[0].empty() || !inputs_[1].empty() || has_deep_range_) {
    return false;
  }
  // L0 files may overlap each other: only one moves at a time, or several
  // that the picker found disjoint. Files of a deeper level are disjoint,
  // so several move together.
  if (level_ == 0 && inputs_[0].size() != 1 && !l0_disjoint_) return false;
  uint64_t overlap = 0;
  for (const FileMetaData* f : cutters_[0].grandparents) {
    overlap += f->file_size;
  }
  return overlap <= max_grandparent_overlap_;
}

void Compaction::AddInputDeletions(VersionEdit* edit) const {
  // (A file deleted and added at one level in one edit would be kept: the
  // outputs always have new numbers, so this does not arise.)
  for (const FileMetaData* f : inputs_[0]) edit->DeleteFile(level_, f->number);
  for (const FileMetaData* f : inputs_[1]) {
    edit->DeleteFile(output_level_, f->number);
  }
  for (const FileMetaData* f : inputs_[2]) {
    edit->DeleteFile(output_level_ + 1, f->number);
  }
}

bool Compaction::ShouldStopBefore(const Slice& internal_key, bool output_open,
                                  uint64_t output_bytes, bool deep) {
  OutputCutter& cut = cutters_[deep ? 1 : 0];
  if (!output_open) {
    // A new output (after a cut here or an end forced by the deep range).
    cut.overlapped_bytes = 0;
    cut.boundaries_passed = 0;
  }
  // Step past the grandparents that end before the key, counting the
  // bytes and boundaries the open output has passed.
  int crossed = 0;
  while (cut.grandparent_index < cut.grandparents.size() &&
         icmp_->Compare(
             internal_key,
             cut.grandparents[cut.grandparent_index]->largest.Encode()) > 0) {
    if (output_open) {
      cut.overlapped_bytes +=
          cut.grandparents[cut.grandparent_index]->file_size;
      crossed++;
    }
    cut.grandparent_index++;
  }
  bool stop = false;
  if (output_open) {
    if (output_bytes >= cut.max_file_size ||
        cut.overlapped_bytes > max_grandparent_overlap_) {
      stop = true;  // (without alignment the maximum is the target)
    } else if (cut.align && crossed > 0) {
      // The output so far ends inside the grandparents it has passed: a
      // clean place to end it. Each boundary already let pass raises the
      // bar by 5% (more boundaries are likely to come before the target,
      // so wait for a fuller file), from 50% of the target up to 90%.
      const uint64_t percent =
          50 + 5 * static_cast<uint64_t>(std::min(cut.boundaries_passed, 8));
      stop = output_bytes >= target_output_file_size_ / 100 * percent;
    }
    cut.boundaries_passed += crossed;
  }
  if (stop) {
    cut.overlapped_bytes = 0;
    cut.boundaries_passed = 0;
  }
  return stop;
}

void Compaction::MarkFilesBeingCompacted(bool value) {
  for (auto& files : inputs_) {
    for (FileMetaData* f : files) {
      assert(f->being_compacted != value);
      f->being_compacted = value;
    }
  }
}

std::string Compaction::DebugString() const {
  std::string r = "L" + std::to_string(level_) + "->L" +
                  std::to_string(output_level_) + " [";
  for (int which = 0; which < 2; which++) {
    for (const FileMetaData* f : inputs_[which]) {
      r += std::to_string(f->number) + " ";
    }
    if (which == 0) r += "+ ";
  }
  r += "]";
  if (has_deep_range_) {
    r += " deep to L" + std::to_string(output_level_ + 1) + " [";
    for (const FileMetaData* f : inputs_[2]) {
      r += std::to_string(f->number) + " ";
    }
    r += "]";
  }
  return r;
}

// ------------------------------------------------------- CompactionPicker

uint64_t CompactionPicker::MaxBytesForLevel(int level) const {
  double result = static_cast<double>(options_.max_bytes_for_level_base);
  for (int l = 1; l < level; l++) {
    result *= options_.max_bytes_for_level_multiplier;
  }
  return static_cast<uint64_t>(std::min(result, 1e19));
}

void CompactionPicker::ComputeScores(const Version* v, double* scores) const {
  const int levels = options_.num_levels;
  for (int level = 0; level < levels; level++) scores[level] = 0;
  int l0_files = 0;
  for (const FileMetaData* f : v->files(0)) {
    if (!f->being_compacted) l0_files++;
  }
  scores[0] = static_cast<double>(l0_files) /
              options_.level0_file_num_compaction_trigger;
  // The last level has nowhere to go.
  for (int level = 1; level + 1 < levels; level++) {
    uint64_t bytes = 0;
    for (const FileMetaData* f : v->files(level)) {
      if (!f->being_compacted) bytes += f->file_size;
    }
    scores[level] = static_cast<double>(bytes) / MaxBytesForLevel(level);
  }
}

uint64_t CompactionPicker::EstimatePendingBytes(const Version* v) const {
  uint64_t pending = 0;
  if (v->NumFiles(0) >= options_.level0_file_num_compaction_trigger) {
    pending += v->NumLevelBytes(0);
  }
  for (int level = 1; level + 1 < options_.num_levels; level++) {
    const uint64_t bytes = v->NumLevelBytes(level);
    const uint64_t target = MaxBytesForLevel(level);
    if (bytes > target) pending += bytes - target;
  }
  return pending;
}

bool CompactionPicker::AnyBeingCompacted(
    const std::vector<FileMetaData*>& files) const {
  for (const FileMetaData* f : files) {
    if (f->being_compacted) return true;
  }
  return false;
}

bool CompactionPicker::OutputRangeConflicts(
    const Compaction* c, const std::vector<Compaction*>& running) const {
  // A level and the user keys [lo, hi] a compaction may write there.
  struct Span {
    int level;
    Slice lo, hi;
  };
  auto spans = [](const Compaction* x, Span out[2]) {
    out[0] =
        Span{x->output_level_, x->smallest_user_key_, x->largest_user_key_};
    if (!x->has_deep_range_) return 1;
    out[1] = Span{x->output_level_ + 1, x->deep_lower_, x->deep_largest_};
    return 2;
  };
  Span mine[2], theirs[2];
  const int n = spans(c, mine);
  for (const Compaction* r : running) {
    const int m = spans(r, theirs);
    for (int i = 0; i < n; i++) {
      for (int j = 0; j < m; j++) {
        if (mine[i].level != theirs[j].level) continue;
        if (icmp_->CompareUserKeys(mine[i].hi, theirs[j].lo) < 0 ||
            icmp_->CompareUserKeys(mine[i].lo, theirs[j].hi) > 0) {
          continue;
        }
        return true;
      }
    }
  }
  return false;
}

Compaction* CompactionPicker::Finish(
    Compaction* c, const std::vector<Compaction*>& running) const {
  std::unique_ptr<Compaction> owned(c);
  c->SetupBounds();  // bounds of the level inputs
  const Slice lo(c->smallest_user_key()), hi(c->largest_user_key());
  if (c->output_level_ != c->level_) {
    c->input_version_->GetOverlappingInputs(c->output_level_, &lo, &hi,
                                            &c->inputs_[1]);
  }
  if (AnyBeingCompacted(c->inputs_[1])) return nullptr;
  c->SetupBounds();  // bounds of everything
  if (!c->manual_ && c->level_ > 0 && !c->inputs_[1].empty()) {
    ExpandLevelInputs(c);
  }
  if (OutputRangeConflicts(c, running)) return nullptr;
  if (!c->manual_ && c->level_ == 0) ChooseDeepRange(c, running);
  c->MarkFilesBeingCompacted(true);
  return owned.release();
}

bool CompactionPicker::ChooseDeepRange(
    Compaction* c, const std::vector<Compaction*>& running) const {
  Version* v = c->input_version_;
  const int deep_level = c->output_level_ + 1;
  const std::vector<FileMetaData*>& l1 = c->inputs_[1];
  if (c->level_ != 0 || deep_level >= v->num_levels() || l1.empty()) {
    return false;
  }
  // The range ends right after a user key; only the bytewise order can
  // name that key (the key with a zero byte appended).
  if (icmp_->user_comparator() != BytewiseComparator()) return false;
  uint64_t l0_bytes = 0, l1_input_bytes = 0, l1_bytes = 0;
  for (const FileMetaData* f : c->inputs_[0]) l0_bytes += f->file_size;
  for (const FileMetaData* f : l1) l1_input_bytes += f->file_size;
  for (const FileMetaData* f : v->files(c->output_level_)) {
    if (!f->being_compacted) l1_bytes += f->file_size;
  }
  const uint64_t target = MaxBytesForLevel(c->output_level_);
  if (l0_bytes + l1_bytes <= target) return false;
  const double excess = static_cast<double>(l0_bytes + l1_bytes - target);
  // The L0 data lands in the key range of the L1 inputs; assume it spreads
  // as they do.
  const double scale =
      static_cast<double>(l0_bytes + l1_input_bytes) /
      static_cast<double>(std::max<uint64_t>(l1_input_bytes, 1));

  // The shortest run of L1 inputs from each start that holds the excess.
  struct Candidate {
    size_t begin, end;  // l1[begin, end)
    double ratio;       // L2 bytes under the run per byte of the run
  };
  std::vector<Candidate> candidates;
  std::vector<FileMetaData*> below;
  uint64_t run_bytes = 0;
  size_t end = 0;
  for (size_t begin = 0; begin < l1.size(); begin++) {
    while (end < l1.size() && run_bytes * scale < excess) {
      run_bytes += l1[end++]->file_size;
    }
    if (run_bytes * scale < excess) break;  // later runs hold less
    const Slice lo = l1[begin]->smallest.user_key();
    const Slice hi = l1[end - 1]->largest.user_key();
    v->GetOverlappingInputs(deep_level, &lo, &hi, &below);
    uint64_t below_bytes = 0;
    for (const FileMetaData* f : below) below_bytes += f->file_size;
    candidates.push_back(
        Candidate{begin, end, below_bytes / std::max(run_bytes * scale, 1.0)});
    run_bytes -= l1[begin]->file_size;
  }
  std::stable_sort(
      candidates.begin(), candidates.end(),
      [](const Candidate& a, const Candidate& b) { return a.ratio < b.ratio; });

  std::vector<FileMetaData*> level1;
  for (const Candidate& cand : candidates) {
    std::string lo = l1[cand.begin]->smallest.user_key().ToString();
    std::string hi = l1[cand.end - 1]->largest.user_key().ToString();
    // Widen to the L2 files met, whole, until no further file is met.
    while (true) {
      const Slice l(lo), h(hi);
      v->GetOverlappingInputs(deep_level, &l, &h, &below);
      if (below.empty()) break;
      bool widened = false;
      if (icmp_->CompareUserKeys(below.front()->smallest.user_key(), l) < 0) {
        lo = below.front()->smallest.user_key().ToString();
        widened = true;
      }
      if (icmp_->CompareUserKeys(below.back()->largest.user_key(), h) > 0) {
        hi = below.back()->largest.user_key().ToString();
        widened = true;
      }
      if (!widened) break;
    }
    if (AnyBeingCompacted(below)) continue;
    // Every L1 file the range meets must be an input: one left in place
    // would sit above L2 outputs holding newer data for its keys.
    const Slice l(lo), h(hi);
    v->GetOverlappingInputs(c->output_level_, &l, &h, &level1);
    bool all_inputs = true;
    for (const FileMetaData* f : level1) {
      all_inputs &= std::find(l1.begin(), l1.end(), f) != l1.end();
    }
    if (!all_inputs) continue;
    c->inputs_[2] = below;
    c->has_deep_range_ = true;
    c->deep_lower_ = lo;
    c->deep_largest_ = hi;
    c->deep_upper_ = hi;
    c->deep_upper_.push_back('\0');
    c->SetupBounds();
    c->SetupDeepRange();
    if (!OutputRangeConflicts(c, running)) return true;
    c->inputs_[2].clear();
    c->has_deep_range_ = false;
    c->SetupBounds();
  }
  return false;
}

void CompactionPicker::ExpandLevelInputs(Compaction* c) const {
  Version* v = c->input_version_;
  const std::vector<FileMetaData*>& files = v->files(c->level_);
  const Slice lo(c->smallest_user_key()), hi(c->largest_user_key());
  // Level files are sorted and disjoint, and the inputs are a run of them:
  // widen the run while the next file lies wholly inside [lo, hi].
  const auto first =
      std::find(files.begin(), files.end(), c->inputs_[0].front());
  if (first == files.end()) return;
  size_t begin = first - files.begin();
  size_t end = begin + c->inputs_[0].size();  // one past the run
  auto inside = [&](const FileMetaData* f) {
    return !f->being_compacted &&
           icmp_->CompareUserKeys(f->smallest.user_key(), lo) >= 0 &&
           icmp_->CompareUserKeys(f->largest.user_key(), hi) <= 0;
  };
  const uint64_t limit = 25 * options_.target_file_size_base;
  uint64_t bytes = c->input_bytes();
  while (begin > 0 && inside(files[begin - 1]) &&
         bytes + files[begin - 1]->file_size <= limit) {
    bytes += files[--begin]->file_size;
  }
  while (end < files.size() && inside(files[end]) &&
         bytes + files[end]->file_size <= limit) {
    bytes += files[end++]->file_size;
  }
  if (end - begin == c->inputs_[0].size()) return;
  // The added files lie inside the output-level files already read, so
  // they bring no new ones; the check guards the invariant all the same.
  std::vector<FileMetaData*> expanded(files.begin() + begin,
                                      files.begin() + end);
  const Slice elo = expanded.front()->smallest.user_key();
  const Slice ehi = expanded.back()->largest.user_key();
  std::vector<FileMetaData*> below;
  v->GetOverlappingInputs(c->output_level_, &elo, &ehi, &below);
  if (below != c->inputs_[1]) return;
  c->inputs_[0] = std::move(expanded);
  c->SetupBounds();
}

Compaction* CompactionPicker::Pick(Version* v,
                                   const std::vector<Compaction*>& running,
                                   bool flush_pending) const {
  if (options_.disable_auto_compactions) return nullptr;
  const int levels = options_.num_levels;
  double scores[kMaxLevels];
  ComputeScores(v, scores);
  int order[kMaxLevels];
  for (int i = 0; i < levels; i++) order[i] = i;
  std::stable_sort(order, order + levels,
                   [&](int a, int b) { return scores[a] > scores[b]; });
  // L0 waits for a flush under way (below) only while it is shallower
  // than twice the trigger, so writes never slow down for it.
  const int l0_wait_limit =
      std::min(2 * options_.level0_file_num_compaction_trigger,
               options_.level0_slowdown_writes_trigger);
  const bool l0_may_wait = v->NumFiles(0) < l0_wait_limit;

  // Trivial moves first: they cost a MANIFEST record, and the data they
  // move down is data that a compaction into this level (from L0 above
  // all) would otherwise have to read and rewrite.
  for (int i = 0; i < levels; i++) {
    const int level = order[i];
    if (scores[level] < 1) break;
    Compaction* c = level == 0 ? PickL0TrivialMove(v, running)
                               : PickTrivialMove(v, level, running);
    if (c != nullptr) return c;
  }
  // An L0 compaction that will take L1 over its target rewrites there L1
  // files that must leave L1 right after. Those that can leave for free
  // (nothing under them in L2) leave first.
  if (scores[0] >= 1 && scores[1] < 1 && levels > 2) {
    uint64_t bytes = 0;
    for (int level = 0; level < 2; level++) {
      for (const FileMetaData* f : v->files(level)) {
        if (!f->being_compacted) bytes += f->file_size;
      }
    }
    if (bytes > MaxBytesForLevel(1)) {
      Compaction* c = PickTrivialMove(v, 1, running);
      if (c != nullptr) return c;
    }
  }
  for (int i = 0; i < levels; i++) {
    const int level = order[i];
    if (scores[level] < 1) break;
    if (level == 0) {
      bool l0_busy = false;
      for (const Compaction* r : running) l0_busy |= r->level() == 0;
      if (l0_busy || AnyBeingCompacted(v->files(0))) continue;
      // An L0 compaction rewrites all the L1 files under L0 (usually the
      // whole of L1) however few L0 files it takes. While a flush is about
      // to add another L0 file, wait for it and take it too.
      if (flush_pending && l0_may_wait) continue;
      auto* c = new Compaction(v, 0, 1, options_, icmp_);
      c->inputs_[0] = v->files(0);
      Compaction* result = Finish(c, running);
      if (result != nullptr) return result;
      continue;
    }
    Compaction* c = PickLevelCompaction(v, level, running);
    if (c != nullptr) return c;
  }
  return nullptr;
}

Compaction* CompactionPicker::PickL0TrivialMove(
    Version* v, const std::vector<Compaction*>& running) const {
  const std::vector<FileMetaData*>& l0 = v->files(0);
  if (l0.empty() || AnyBeingCompacted(l0)) return nullptr;
  for (const Compaction* r : running) {
    if (r->level() == 0) return nullptr;
  }
  auto disjoint = [&](const FileMetaData* a, const FileMetaData* b) {
    return icmp_->CompareUserKeys(a->largest.user_key(),
                                  b->smallest.user_key()) < 0 ||
           icmp_->CompareUserKeys(b->largest.user_key(),
                                  a->smallest.user_key()) < 0;
  };
  std::vector<FileMetaData*> moving;
  std::string lo, hi;  // the span of the files in moving
  for (FileMetaData* f : l0) {
    for (const FileMetaData* m : moving) {
      if (!disjoint(f, m)) return nullptr;
    }
    if (moving.empty() ||
        icmp_->CompareUserKeys(f->smallest.user_key(), lo) < 0) {
      lo = f->smallest.user_key().ToString();
    }
    if (moving.empty() ||
        icmp_->CompareUserKeys(f->largest.user_key(), hi) > 0) {
      hi = f->largest.user_key().ToString();
    }
    moving.push_back(f);
  }
  const Slice s(lo), l(hi);
  if (v->OverlapInLevel(1, &s, &l)) return nullptr;
  if (moving.empty()) return nullptr;
  auto* c = new Compaction(v, 0, 1, options_, icmp_);
  c->inputs_[0] = std::move(moving);
  c->l0_disjoint_ = true;
  Compaction* result = Finish(c, running);
  if (result == nullptr) return nullptr;
  // Too much overlap in L2 makes it a rewrite after all; the L0
  // compaction decides about that.
  if (result->IsTrivialMove()) return result;
  result->MarkFilesBeingCompacted(false);
  delete result;
  return nullptr;
}

Compaction* CompactionPicker::PickTrivialMove(
    Version* v, int level, const std::vector<Compaction*>& running) const {
  for (FileMetaData* f : v->files(level)) {
    if (f->being_compacted) continue;
    const Slice lo = f->smallest.user_key(), hi = f->largest.user_key();
    if (v->OverlapInLevel(level + 1, &lo, &hi)) continue;
    auto* c = new Compaction(v, level, level + 1, options_, icmp_);
    c->inputs_[0].push_back(f);
    ExtendTrivialMove(v, level, &c->inputs_[0]);
    Compaction* result = Finish(c, running);
    if (result == nullptr) continue;
    // Too much overlap two levels down makes it a rewrite after all; the
    // scored pass below decides about those.
    if (result->IsTrivialMove()) return result;
    result->MarkFilesBeingCompacted(false);
    delete result;
  }
  return nullptr;
}

Compaction* CompactionPicker::PickLevelCompaction(
    Version* v, int level, const std::vector<Compaction*>& running) const {
  // The file whose compaction rewrites the fewest bytes below per byte of
  // its own.
  struct Candidate {
    FileMetaData* file;
    double ratio;
    bool alone;  // nothing in level + 1 overlaps it
  };
  std::vector<Candidate> candidates;
  std::vector<FileMetaData*> overlap;
  for (FileMetaData* f : v->files(level)) {
    if (f->being_compacted) continue;
    const Slice lo = f->smallest.user_key(), hi = f->largest.user_key();
    v->GetOverlappingInputs(level + 1, &lo, &hi, &overlap);
    uint64_t overlap_bytes = 0;
    for (const FileMetaData* o : overlap) overlap_bytes += o->file_size;
    candidates.push_back(
        Candidate{f,
                  static_cast<double>(overlap_bytes) /
                      static_cast<double>(std::max<uint64_t>(f->file_size, 1)),
                  overlap.empty()});
  }
  std::stable_sort(
      candidates.begin(), candidates.end(),
      [](const Candidate& a, const Candidate& b) { return a.ratio < b.ratio; });
  for (const Candidate& cand : candidates) {
    auto* c = new Compaction(v, level, level + 1, options_, icmp_);
    c->inputs_[0].push_back(cand.file);
    if (cand.alone) ExtendTrivialMove(v, level, &c->inputs_[0]);
    Compaction* result = Finish(c, running);
    if (result != nullptr) return result;
  }
  return nullptr;
}

void CompactionPicker::ExtendTrivialMove(
    Version* v, int level, std::vector<FileMetaData*>* inputs) const {
  constexpr size_t kMaxMultiTrivialMove = 4;
  const std::vector<FileMetaData*>& files = v->files(level);
  const auto it = std::find(files.begin(), files.end(), (*inputs)[0]);
  if (it == files.end()) return;
  size_t lo = it - files.begin(), hi = lo;
  const uint64_t max_grandparent_overlap = 10 * options_.target_file_size_base;
  std::vector<FileMetaData*> grandparents;
  // True if files[a..b] may move down together.
  auto can_move = [&](size_t a, size_t b) {
    if (files[a]->being_compacted || files[b]->being_compacted) return false;
    const Slice s = files[a]->smallest.user_key();
    const Slice l = files[b]->largest.user_key();
    if (v->OverlapInLevel(level + 1, &s, &l)) return false;
    if (level + 2 < v->num_levels()) {
      v->GetOverlappingInputs(level + 2, &s, &l, &grandparents);
      uint64_t bytes = 0;
      for (const FileMetaData* g : grandparents) bytes += g->file_size;
      if (bytes > max_grandparent_overlap) return false;
    }
    return true;
  };
  while (hi - lo + 1 < kMaxMultiTrivialMove && hi + 1 < files.size() &&
         can_move(lo, hi + 1)) {
    hi++;
  }
  while (hi - lo + 1 < kMaxMultiTrivialMove && lo > 0 && can_move(lo - 1, hi)) {
    lo--;
  }
  inputs->assign(files.begin() + lo, files.begin() + hi + 1);
}

Compaction* CompactionPicker::PickManual(
    Version* v, int level, const Slice* begin, const Slice* end,
    bool into_same_level, const std::vector<Compaction*>& running,
    bool* busy) const {
  *busy = false;
  std::vector<FileMetaData*> inputs;
  v->GetOverlappingInputs(level, begin, end, &inputs);
  if (inputs.empty()) return nullptr;
  if (AnyBeingCompacted(inputs)) {
    *busy = true;
    return nullptr;
  }
  for (const Compaction* r : running) {
    if (level == 0 && r->level() == 0) {
      *busy = true;
      return nullptr;
    }
  }
  auto* c = new Compaction(v, level, into_same_level ? level : level + 1,
                           options_, icmp_);
  c->manual_ = true;
  c->inputs_[0] = std::move(inputs);
  Compaction* result = Finish(c, running);
  if (result == nullptr) *busy = true;
  return result;
}

}  // namespace shale
