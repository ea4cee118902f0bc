// tests/datasets/main.cpp — the runner for the tests on the shared real datasets
// (tests/datasets/*.cpp, e.g. coco128 in the datasets folder beside the checkout). Where that
// folder is absent (the GPU machine, a fresh clone) it exits with 77, which ctest reports as
// *skipped* (SKIP_RETURN_CODE). Label caches go to a temporary folder, never into ~/.cache.
#define DOCTEST_CONFIG_IMPLEMENT
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "tests/datasets/datasets_testing.h"
#include "tests/support/doctest_runner.h"
#include "tests/support/skip.h"

int main(int argc, char** argv) {
  using namespace bareyolo;
  std::filesystem::path datasets = testing::shared_datasets();
  if (!testing::only_listing_tests(argc, argv) &&
      !std::filesystem::is_directory(datasets / "coco128")) {
    std::printf("skipped: no %s (set BAREYOLO_DATASETS to the folder holding coco128)\n",
                (datasets / "coco128").c_str());
    return testing::kSkipExitCode;
  }
  std::string cache =
      (std::filesystem::temp_directory_path() / "bareyolo-dataset-tests-XXXXXX").string();
  if (mkdtemp(cache.data()) == nullptr) return 1;
  setenv("BAREYOLO_CACHE_DIR", cache.c_str(), 1);
  const int result = testing::run_doctest(argc, argv);
  std::error_code ignored;
  std::filesystem::remove_all(cache, ignored);
  return result;
}
