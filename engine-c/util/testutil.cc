#include "util/testutil.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

namespace shale::test {

std::string TempDir(const std::string& name) {
  const char* base = getenv("SHALE_TEST_TMPDIR");
  if (base == nullptr || *base == '\0') base = getenv("TMPDIR");
  if (base == nullptr || *base == '\0') base = "/tmp";
  std::filesystem::path dir =
      std::filesystem::path(base) /
      ("shale-" + name + "-" + std::to_string(getpid()));
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::filesystem::create_directories(dir);
  return dir.string();
}

void RemoveDirRecursively(const std::string& dir) {
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

}  // namespace shale::test
