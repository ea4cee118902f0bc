#!/usr/bin/env bash
# tools/check_test_names.sh — fails when a test case's name would break ctest's discovery.
#
# doctest_discover_tests (CMakeLists.txt) hands every test case's name to CMake as one element
# of a list, and CMake splits lists at ';' except inside square brackets: a name holding ';'
# becomes two ctest entries that match no case, and a '[' without its ']' swallows the names
# after it into one entry (`ctest -N` then fails). Both slipped in once and showed only in a
# full ctest run, as failures that did not name the cause; this check names it, before ctest.
#
# Usage (from anywhere): tools/check_test_names.sh BUILD_DIR — reads the names the test
# binaries built in BUILD_DIR report (--list-test-cases); exits 0 when every name is safe, 1
# with one line per unsafe name otherwise.
set -euo pipefail
build=$(cd "${1:?usage: tools/check_test_names.sh BUILD_DIR}" && pwd)

unsafe=0 binaries=0
for binary in unit_tests dist_tests dataset_tests cuda_tests; do
  [ -x "$build/$binary" ] || continue
  binaries=$((binaries + 1))
  names=$("$build/$binary" --list-test-cases) ||
    { echo "check_test_names: $binary --list-test-cases failed"; exit 1; }
  while IFS= read -r name; do
    case "$name" in '[doctest]'* | '====='* | '') continue ;; esac
    # Square brackets must close in order: depth never below 0 and 0 at the end.
    depth=0 why=""
    [[ "$name" == *';'* ]] && why="holds ';'"
    for ((i = 0; i < ${#name}; i++)); do
      case "${name:i:1}" in
        '[') depth=$((depth + 1)) ;;
        ']') depth=$((depth - 1)); [ "$depth" -ge 0 ] || break ;;
      esac
    done
    [ "$depth" -eq 0 ] || why="${why:+$why and }has unbalanced square brackets"
    if [ -n "$why" ]; then
      echo "$binary: test case \"$name\" $why: CMake's list splitting would break it in ctest;" \
        "rename it"
      unsafe=$((unsafe + 1))
    fi
  done <<< "$names"
done

if [ "$binaries" -eq 0 ]; then
  echo "check_test_names: no test binary in $build (build it first)"
  exit 1
fi
if [ "$unsafe" -gt 0 ]; then
  echo "check_test_names: $unsafe test case name(s) would break ctest's discovery"
  exit 1
fi
echo "check_test_names: the test cases of $binaries binaries have names ctest can take"
