// DBImpl: whole files in and out - SST ingestion and checkpoints.
//
// Ingestion. Each file is checked (made by SstFileWriter, readable, files
// of one call disjoint), then, holding the write queue so no write slips
// in between: memtables overlapping a file are flushed, the files get one
// new sequence number, are hard-linked into the DB under new file numbers
// and placed each at the deepest level with no overlapping data at or
// above it (L0 if L0 overlaps), so newer data stays above older data.
// One MANIFEST edit installs them all, then the sources are unlinked.
//
// Checkpoint. Flush, then with file deletions held off: hard-link the live
// SSTs, copy the MANIFEST up to its current length and the live WALs up to
// their last complete record, write CURRENT and a fresh IDENTITY - all in
// dir.tmp, renamed to dir at the end, so a crash never leaves a half copy
// under the final name.

#include <algorithm>
#include <random>

#include "db/db_impl.h"
#include "db/db_impl_internal.h"
#include "db/filename.h"
#include "db/memtable.h"
#include "db/sst_file_writer.h"
#include "db/table_cache.h"
#include "db/version_set.h"
#include "table/table.h"
#include "util/env.h"

namespace shale {

namespace {

// Copies the first limit bytes of src (all of it if shorter) to dst and
// syncs dst.
Status CopyFilePrefix(Env* env, const std::string& src, const std::string& dst,
                      uint64_t limit) {
  std::unique_ptr<SequentialFile> in;
  Status s = env->NewSequentialFile(src, &in);
  if (!s.ok()) return s;
  std::unique_ptr<WritableFile> out;
  s = env->NewWritableFile(dst, &out);
  if (!s.ok()) return s;
  std::unique_ptr<char[]> buf(new char[64 << 10]);
  uint64_t left = limit;
  while (left > 0 && s.ok()) {
    Slice chunk;
    s = in->Read(std::min<uint64_t>(left, 64 << 10), &chunk, buf.get());
    if (!s.ok() || chunk.empty()) break;
    s = out->Append(chunk);
    left -= chunk.size();
  }
  if (s.ok()) s = out->Sync();
  Status c = out->Close();
  if (s.ok()) s = c;
  return s;
}

// Hard-links src to dst, copying when the file system cannot link.
Status LinkOrCopy(Env* env, const std::string& src, const std::string& dst) {
  Status s = env->LinkFile(src, dst);
  if (s.ok()) return s;
  return CopyFilePrefix(env, src, dst, UINT64_MAX);
}

std::string ParentDir(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// An external file being ingested.
struct ExternalFile {
  std::string path;
  FileMetaData meta;  // bounds with sequence 0 until assigned
  std::string smallest_user_key;
  std::string largest_user_key;
  int level = 0;
};

// True if m holds an entry or tombstone touching [smallest, largest].
bool MemTableOverlaps(MemTable* m, const InternalKeyComparator& icmp,
                      const Slice& smallest, const Slice& largest) {
  std::unique_ptr<Iterator> it(m->NewIterator());
  it->Seek(
      InternalKey(smallest, kMaxSequenceNumber, kValueTypeForSeek).Encode());
  if (it->Valid() &&
      icmp.CompareUserKeys(ExtractUserKey(it->key()), largest) <= 0) {
    return true;
  }
  auto tombstones = m->GetFragmentedTombstones();
  if (tombstones != nullptr) {
    for (const auto& f : tombstones->fragments()) {
      if (icmp.CompareUserKeys(f.start, largest) <= 0 &&
          icmp.CompareUserKeys(f.end, smallest) > 0) {
        return true;
      }
    }
  }
  return false;
}

}  // namespace

Status DBImpl::Ingest(const std::vector<std::string>& paths) {
  if (paths.empty()) return Status::OK();
  // Check every file before touching the DB.
  std::vector<ExternalFile> files(paths.size());
  for (size_t i = 0; i < paths.size(); i++) {
    ExternalFile& ext = files[i];
    ext.path = paths[i];
    uint64_t size = 0;
    Status s = env_->GetFileSize(ext.path, &size);
    if (!s.ok()) return s;
    std::unique_ptr<RandomAccessFile> file;
    s = env_->NewRandomAccessFile(ext.path, &file);
    if (!s.ok()) return s;
    TableOptions topts = table_options_;
    topts.block_cache = nullptr;
    topts.statistics = nullptr;
    std::unique_ptr<Table> table;
    s = Table::Open(topts, std::move(file), size, 0, 0, ext.path, &table);
    if (!s.ok()) return s;
    const TableProperties& props = table->properties();
    auto marker = props.user_properties.find(kExternalSstProperty);
    if (marker == props.user_properties.end() ||
        marker->second != kExternalSstVersion) {
      return Status::InvalidArgument("ingest: " + ext.path +
                                     " was not made by the SST writer");
    }
    if (props.comparator_name != icmp_.Name()) {
      return Status::InvalidArgument(
          "ingest: " + ext.path + " uses comparator " + props.comparator_name);
    }
    FileMetaData& meta = ext.meta;
    meta.file_size = size;
    TableReadOptions ro;
    std::unique_ptr<Iterator> it(table->NewIterator(ro));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      ParsedInternalKey k;
      if (!ParseInternalKey(it->key(), &k) || k.sequence != 0 ||
          k.type != kTypeValue) {
        return Status::Corruption(
            "ingest: " + ext.path + " holds an unexpected key",
            EscapeKey(it->key()));
      }
      meta.UpdateBoundaries(it->key(), 0, icmp_);
      meta.num_entries++;
    }
    if (!it->status().ok()) return it->status();
    std::unique_ptr<Iterator> rt(table->NewRangeTombstoneIterator(ro));
    for (rt->SeekToFirst(); rt->Valid(); rt->Next()) {
      meta.UpdateBoundaries(rt->key(), 0, icmp_);
      const InternalKey sentinel(rt->value(), kMaxSequenceNumber,
                                 kTypeRangeDeletion);
      if (icmp_.Compare(sentinel.Encode(), meta.largest.Encode()) > 0) {
        meta.largest = sentinel;
      }
      meta.num_range_deletions++;
    }
    if (!rt->status().ok()) return rt->status();
    if (meta.num_entries == 0 && meta.num_range_deletions == 0) {
      return Status::InvalidArgument("ingest: " + ext.path + " is empty");
    }
    ext.smallest_user_key = meta.smallest.user_key().ToString();
    ext.largest_user_key = meta.largest.user_key().ToString();
  }
  // One sequence number for all: the files must not overlap each other.
  std::sort(files.begin(), files.end(),
            [this](const ExternalFile& a, const ExternalFile& b) {
              return icmp_.Compare(a.meta.smallest.Encode(),
                                   b.meta.smallest.Encode()) < 0;
            });
  for (size_t i = 1; i < files.size(); i++) {
    if (icmp_.Compare(files[i - 1].meta.largest.Encode(),
                      files[i].meta.smallest.Encode()) >= 0) {
      return Status::InvalidArgument("ingest: " + files[i - 1].path + " and " +
                                     files[i].path + " overlap");
    }
  }

  MutexLock l(&mutex_);
  if (closing_) return Status::Closed("ingest: the database is closing");
  Writer w(&mutex_);
  EnterExclusiveWrite(&w);
  Status s = bg_error_;
  // Memtables holding keys in the files' ranges are flushed first: the
  // files go into the tree, which reads check after the memtables.
  uint64_t flush_target = 0;
  for (const ExternalFile& ext : files) {
    if (!s.ok()) break;
    const Slice lo(ext.smallest_user_key), hi(ext.largest_user_key);
    if (MemTableOverlaps(mem_, icmp_, lo, hi)) {
      flush_target = std::max(flush_target, mem_->id());
      s = SwitchMemtable();
    }
    for (MemTable* m : imm_) {
      if (MemTableOverlaps(m, icmp_, lo, hi)) {
        flush_target = std::max(flush_target, m->id());
      }
    }
  }
  if (s.ok() && flush_target != 0) {
    bg_work_cv_.SignalAll();
    while (s.ok() && !imm_.empty() && imm_.front()->id() <= flush_target) {
      bg_done_cv_.Wait();
      s = bg_error_;
      if (shutting_down_.load(std::memory_order_relaxed)) {
        s = Status::Closed("ingest: the database is closing");
      }
    }
  }
  std::vector<std::string> linked;
  const SequenceNumber seq = LastSequence() + 1;
  for (ExternalFile& ext : files) {
    if (!s.ok()) break;
    FileMetaData& meta = ext.meta;
    meta.number = NewPendingOutput();
    meta.global_seqno = seq;
    meta.smallest_seqno = meta.largest_seqno = seq;
    // The bounds carry the sequence number the entries will read with.
    ParsedInternalKey lo, hi;
    ParseInternalKey(meta.smallest.Encode(), &lo);
    ParseInternalKey(meta.largest.Encode(), &hi);
    meta.smallest = InternalKey(lo.user_key, seq, lo.type);
    if (hi.sequence != kMaxSequenceNumber) {
      meta.largest = InternalKey(hi.user_key, seq, hi.type);
    }
    const std::string dst = TableFileName(dbname_, meta.number);
    mutex_.Unlock();
    s = LinkOrCopy(env_, ext.path, dst);
    mutex_.Lock();
    if (s.ok()) linked.push_back(dst);
  }
  if (s.ok()) {
    mutex_.Unlock();
    s = env_->SyncDir(dbname_);
    mutex_.Lock();
  }
  if (s.ok()) {
    // Place each file at the deepest level with no overlapping data at or
    // above it, judged on the version the edit will apply to (nothing but
    // this edit can install a version between here and LogAndApply's
    // queue, and what queues before it only moves data down within ranges
    // seen here).
    VersionEdit edit;
    const Version* v = versions_->current();
    for (ExternalFile& ext : files) {
      const Slice ulo(ext.smallest_user_key), uhi(ext.largest_user_key);
      int level = 0;
      if (!v->OverlapInLevel(0, &ulo, &uhi)) {
        level = options_.num_levels - 1;
        for (int l = 1; l < options_.num_levels; l++) {
          if (v->OverlapInLevel(l, &ulo, &uhi)) {
            level = l - 1;
            break;
          }
        }
      }
      ext.level = level;
      edit.AddFile(level, ext.meta);
    }
    edit.SetLastSequence(seq);
    s = versions_->LogAndApply(&edit);
  }
  for (const ExternalFile& ext : files) {
    if (ext.meta.number != 0) pending_outputs_.erase(ext.meta.number);
  }
  if (s.ok()) {
    last_sequence_.store(seq, std::memory_order_release);
    InstallSuperVersion();
    // The files are the DB's now: the sources go (they were linked).
    for (const ExternalFile& ext : files) env_->RemoveFile(ext.path);
    bg_work_cv_.SignalAll();
  } else {
    for (const std::string& dst : linked) env_->RemoveFile(dst);
  }
  ExitExclusiveWrite(&w);
  return s;
}

Status DBImpl::Checkpoint(const std::string& dir) {
  if (dir.empty()) return Status::InvalidArgument("checkpoint: empty path");
  if (env_->FileExists(dir)) {
    return Status::InvalidArgument("checkpoint: " + dir + " already exists");
  }
  struct LiveFile {
    std::string src;
    std::string dst;
    uint64_t length;  // bytes to copy; UINT64_MAX: link the whole file
  };
  std::vector<LiveFile> live;
  std::string manifest_name;
  const std::string tmp = dir + ".tmp";
  {
    MutexLock l(&mutex_);
    if (closing_) return Status::Closed("checkpoint: the database is closing");
    Status s = FlushAndWait();
    if (!s.ok()) return s;
    // With the write queue held and no MANIFEST write in flight, the file
    // set, the MANIFEST length and the WAL lengths form one state.
    Writer w(&mutex_);
    EnterExclusiveWrite(&w);
    while (versions_->ManifestWriteInProgress()) {
      mutex_.Unlock();
      env_->SleepForMicroseconds(1000);
      mutex_.Lock();
    }
    file_deletions_disabled_++;
    const Version* v = versions_->current();
    for (int level = 0; level < options_.num_levels; level++) {
      for (const FileMetaData* f : v->files(level)) {
        live.push_back(LiveFile{TableFileName(dbname_, f->number),
                                TableFileName(tmp, f->number), UINT64_MAX});
      }
    }
    const uint64_t manifest = versions_->ManifestFileNumber();
    manifest_name =
        DescriptorFileName(dbname_, manifest).substr(dbname_.size() + 1);
    live.push_back(LiveFile{DescriptorFileName(dbname_, manifest),
                            DescriptorFileName(tmp, manifest),
                            versions_->ManifestFileSize()});
    // Every WAL the MANIFEST's log number still needs.
    std::set<uint64_t> logs = {log_number_};
    std::vector<std::string> children;
    s = env_->GetChildren(dbname_, &children);
    for (const std::string& child : children) {
      uint64_t number;
      FileType type;
      if (ParseFileName(child, &number, &type) && type == FileType::kLogFile &&
          number >= versions_->LogNumber()) {
        logs.insert(number);
      }
    }
    for (uint64_t number : logs) {
      uint64_t length = 0;
      if (number == log_number_) {
        length = log_->good_length();
      } else if (!env_->GetFileSize(LogFileName(dbname_, number), &length)
                      .ok()) {
        continue;
      }
      live.push_back(LiveFile{LogFileName(dbname_, number),
                              LogFileName(tmp, number), length});
    }
    ExitExclusiveWrite(&w);
    if (!s.ok()) {
      file_deletions_disabled_--;
      return s;
    }
  }

  Status s;
  if (env_->FileExists(tmp)) s = DBImpl::Destroy(tmp, env_);
  if (s.ok()) s = env_->CreateDir(tmp);
  for (const LiveFile& f : live) {
    if (!s.ok()) break;
    s = f.length == UINT64_MAX ? LinkOrCopy(env_, f.src, f.dst)
                               : CopyFilePrefix(env_, f.src, f.dst, f.length);
  }
  if (s.ok()) {
    s = WriteStringToFile(env_, manifest_name + "\n", CurrentFileName(tmp),
                          true);
  }
  if (s.ok()) {
    std::random_device rd;
    char id[40];
    snprintf(id, sizeof(id), "%08x%08x%08x%08x\n", rd(), rd(), rd(), rd());
    s = WriteStringToFile(env_, id, IdentityFileName(tmp), true);
  }
  if (s.ok()) s = env_->SyncDir(tmp);
  if (s.ok()) s = env_->RenameFile(tmp, dir);
  if (s.ok()) s = env_->SyncDir(ParentDir(dir));
  if (!s.ok()) DBImpl::Destroy(tmp, env_);
  {
    MutexLock l(&mutex_);
    file_deletions_disabled_--;
  }
  return s;
}

}  // namespace shale
