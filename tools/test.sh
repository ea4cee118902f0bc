#!/usr/bin/env bash
# tools/test.sh — run the tests (after tools/setup.sh).
#
#  1. the static checks: every include goes down a layer (tools/check_layers.sh), only the
#     dispatch layer chooses a device's code (tools/check_dispatch.sh), only the Solver runs
#     an optimizer step (tools/check_solver.sh), every source is formatted as .clang-format
#     says (tools/check_format.sh), the README stays a front page whose paths and links
#     resolve and docs/README.md indexes every docs/ file (tools/check_docs.sh), and no test
#     case's name would break ctest's discovery (tools/check_test_names.sh, on build/'s tests);
#  2. every test of the Release build in build/ (CUDA tests report *skipped* without a GPU);
#  3. the fast tests again (the unit tests, and the fuzz targets replaying their corpora and
#     regressions) in a CPU-only AddressSanitizer + UndefinedBehaviorSanitizer build
#     (build-asan/), which stops at the first report.
# Pass --release-only to skip step 3.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

echo "== Static checks"
tools/check_layers.sh
tools/check_dispatch.sh
tools/check_solver.sh
tools/check_format.sh
tools/check_docs.sh
tools/check_test_names.sh build

echo "== Release build: all tests"
ctest --test-dir build --output-on-failure -j "$jobs"

if [ "${1:-}" = "--release-only" ]; then exit 0; fi

echo "== ASan+UBSan build (CPU only): fast tests"
# -O1 with line tables only: the build takes two thirds of -O2 -g's time, the tests 16 s more,
# and a report still names the file and line. The standard headers precompiled and the tests'
# own sources at -O0 (CMakeLists.txt: bareyolo_precompile, bareyolo_test_glue). Built with
# clang (tools/setup.sh installs it for the fuzzers) where it is installed: a second compiler
# reads the CPU sources this step builds, and here on 2 cores it builds them in 294 s to GCC
# 12's 487, and runs the fast tests in 137 s to 164.
cxx=$(command -v clang++ || command -v c++)
# A folder configured with another compiler is started afresh: told of a new compiler, CMake
# deletes its cache and forgets every other setting given here, the sanitizers included.
if [ -f build-asan/CMakeCache.txt ] &&
  [ "$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' build-asan/CMakeCache.txt)" != "$cxx" ]; then
  rm -rf build-asan
fi
cmake -S . -B build-asan -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DWITH_CUDA=OFF -DBAREYOLO_SANITIZE=ON -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
  -DBAREYOLO_PRECOMPILE_HEADERS=ON > build-asan.log
cmake --build build-asan -j "$jobs" --target unit_tests fuzz_replays >> build-asan.log ||
  { tail -n 50 build-asan.log; exit 1; }
ctest --test-dir build-asan -L fast --output-on-failure -j "$jobs"
