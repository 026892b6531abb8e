#include "db/builder.h"

#include "db/compaction_iterator.h"
#include "db/filename.h"
#include "db/table_cache.h"
#include "table/table_builder.h"
#include "util/env.h"

namespace shale {

Status BuildTable(const std::string& dbname, Env* env,
                  const TableOptions& table_options, TableCache* table_cache,
                  Iterator* iter,
                  const FragmentedRangeTombstoneList* tombstones,
                  const std::vector<SequenceNumber>& snapshots,
                  FileMetaData* meta) {
  const auto* icmp =
      static_cast<const InternalKeyComparator*>(table_options.comparator);
  meta->file_size = 0;
  const std::string fname = TableFileName(dbname, meta->number);
  std::unique_ptr<WritableFile> file;
  Status s = env->NewWritableFile(fname, &file);
  if (!s.ok()) return s;
  TableBuilder builder(table_options, file.get());
  CompactionIterator citer(iter, icmp, &snapshots, tombstones,
                           /*bottommost=*/false);
  for (citer.SeekToFirst(); citer.Valid(); citer.Next()) {
    builder.Add(citer.key(), citer.value());
    meta->UpdateBoundaries(citer.key(), citer.parsed().sequence, *icmp);
    meta->num_entries++;
  }
  s = citer.status();
  if (s.ok() && tombstones != nullptr) {
    TombstonesToTable(*tombstones, nullptr, nullptr, snapshots,
                      /*bottommost=*/false, &builder, meta);
  }
  const bool empty = meta->num_entries == 0 && meta->num_range_deletions == 0;
  if (s.ok() && !empty) {
    s = builder.Finish();
    if (s.ok()) s = file->Sync();
    if (s.ok()) s = file->Close();
    if (s.ok()) {
      meta->file_size = builder.FileSize();
      s = table_cache->Verify(meta);
    }
  } else {
    builder.Abandon();
    file->Close();
  }
  if (!s.ok() || empty) {
    meta->file_size = 0;
    env->RemoveFile(fname);
  }
  return s;
}

}  // namespace shale
