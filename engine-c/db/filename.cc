#include "db/filename.h"

#include <cstdio>

namespace shale {

namespace {

std::string MakeFileName(const std::string& dbname, uint64_t number,
                         const char* suffix) {
  char buf[100];
  snprintf(buf, sizeof(buf), "/%06llu.%s",
           static_cast<unsigned long long>(number), suffix);
  return dbname + buf;
}

// Parses a run of decimal digits at the front of *in into *v; false on
// no digits or overflow.
bool ConsumeDecimal(Slice* in, uint64_t* v) {
  uint64_t value = 0;
  size_t i = 0;
  for (; i < in->size(); i++) {
    const char c = (*in)[i];
    if (c < '0' || c > '9') break;
    const uint64_t digit = c - '0';
    if (value > (UINT64_MAX - digit) / 10) return false;
    value = value * 10 + digit;
  }
  if (i == 0) return false;
  in->remove_prefix(i);
  *v = value;
  return true;
}

}  // namespace

std::string LogFileName(const std::string& dbname, uint64_t number) {
  return MakeFileName(dbname, number, "log");
}

std::string TableFileName(const std::string& dbname, uint64_t number) {
  return MakeFileName(dbname, number, "sst");
}

std::string DescriptorFileName(const std::string& dbname, uint64_t number) {
  char buf[100];
  snprintf(buf, sizeof(buf), "/MANIFEST-%06llu",
           static_cast<unsigned long long>(number));
  return dbname + buf;
}

std::string CurrentFileName(const std::string& dbname) {
  return dbname + "/CURRENT";
}

std::string LockFileName(const std::string& dbname) { return dbname + "/LOCK"; }

std::string TempFileName(const std::string& dbname, uint64_t number) {
  return MakeFileName(dbname, number, "dbtmp");
}

std::string IdentityFileName(const std::string& dbname) {
  return dbname + "/IDENTITY";
}

bool ParseFileName(const std::string& filename, uint64_t* number,
                   FileType* type) {
  Slice rest(filename);
  *number = 0;
  if (rest == "CURRENT") {
    *type = FileType::kCurrentFile;
  } else if (rest == "LOCK") {
    *type = FileType::kLockFile;
  } else if (rest == "IDENTITY") {
    *type = FileType::kIdentityFile;
  } else if (rest.starts_with("MANIFEST-")) {
    rest.remove_prefix(9);
    if (!ConsumeDecimal(&rest, number) || !rest.empty()) return false;
    *type = FileType::kDescriptorFile;
  } else {
    if (!ConsumeDecimal(&rest, number)) return false;
    if (rest == ".log") {
      *type = FileType::kLogFile;
    } else if (rest == ".sst") {
      *type = FileType::kTableFile;
    } else if (rest == ".dbtmp") {
      *type = FileType::kTempFile;
    } else {
      return false;
    }
  }
  return true;
}

}  // namespace shale
