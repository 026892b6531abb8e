// BuildTable: writes a memtable's surviving entries and range tombstones to
// a new L0 file (a flush).

#ifndef SHALE_DB_BUILDER_H_
#define SHALE_DB_BUILDER_H_

#include <memory>
#include <string>
#include <vector>

#include "db/range_tombstone.h"
#include "db/version_edit.h"
#include "table/options.h"
#include "util/iterator.h"
#include "util/status.h"

namespace shale {

class Env;
class TableCache;

// Writes the entries of iter (internal keys, in order) and tombstones (may
// be nullptr) that survive the snapshot stripes (compaction_iterator.h) to
// the file meta->number, syncs it and checks it opens. Fills meta. If
// nothing survives, no file is left and meta->file_size is 0. On failure
// the file is removed.
Status BuildTable(const std::string& dbname, Env* env,
                  const TableOptions& table_options, TableCache* table_cache,
                  Iterator* iter,
                  const FragmentedRangeTombstoneList* tombstones,
                  const std::vector<SequenceNumber>& snapshots,
                  FileMetaData* meta);

}  // namespace shale

#endif  // SHALE_DB_BUILDER_H_
