// tests/support/skip.h — for test runners that exit with 77 (ctest: *skipped*) when what their
// tests need is missing: the discovery run at build time only lists the cases and must not skip.
#pragma once

#include <string>

namespace bareyolo::testing {

constexpr int kSkipExitCode = 77;  // SKIP_RETURN_CODE in CMakeLists.txt

// True when doctest was asked only to list the test cases.
inline bool only_listing_tests(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]).rfind("--list", 0) == 0 || std::string(argv[i]) == "-ltc") return true;
  return false;
}

}  // namespace bareyolo::testing
