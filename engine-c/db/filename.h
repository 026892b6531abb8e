// The names of the files in a database directory.
//
//   LOCK              held (flock) by the process that has the DB open
//   IDENTITY          written once when the DB is created
//   CURRENT           the name of the live MANIFEST, switched by rename
//   MANIFEST-NNNNNN   the version edits (file set per level, sequence ...)
//   NNNNNN.log        a write-ahead log
//   NNNNNN.sst        a table file
//   NNNNNN.dbtmp      a file being written, renamed into place when done
//
// NNNNNN is a file number (at least six decimal digits), unique within the
// DB across all kinds.

#ifndef SHALE_DB_FILENAME_H_
#define SHALE_DB_FILENAME_H_

#include <cstdint>
#include <string>

#include "util/slice.h"

namespace shale {

enum class FileType {
  kLogFile,
  kLockFile,
  kTableFile,
  kDescriptorFile,
  kCurrentFile,
  kTempFile,
  kIdentityFile,
};

std::string LogFileName(const std::string& dbname, uint64_t number);
std::string TableFileName(const std::string& dbname, uint64_t number);
std::string DescriptorFileName(const std::string& dbname, uint64_t number);
std::string CurrentFileName(const std::string& dbname);
std::string LockFileName(const std::string& dbname);
std::string TempFileName(const std::string& dbname, uint64_t number);
std::string IdentityFileName(const std::string& dbname);

// Parses a file name (without directory). Returns false for names that are
// not the engine's; *number is 0 for kinds without a number.
bool ParseFileName(const std::string& filename, uint64_t* number,
                   FileType* type);

}  // namespace shale

#endif  // SHALE_DB_FILENAME_H_
