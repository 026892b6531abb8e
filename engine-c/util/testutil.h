// Helpers for the engine's tests.

#ifndef SHALE_UTIL_TESTUTIL_H_
#define SHALE_UTIL_TESTUTIL_H_

#include <string>

namespace shale::test {

// Returns a fresh, empty directory for a test to use, under
// $SHALE_TEST_TMPDIR (set by ctest), $TMPDIR or /tmp. name distinguishes
// tests; the process ID keeps parallel runs apart.
std::string TempDir(const std::string& name);

// Recursively removes dir (best effort).
void RemoveDirRecursively(const std::string& dir);

}  // namespace shale::test

#endif  // SHALE_UTIL_TESTUTIL_H_
