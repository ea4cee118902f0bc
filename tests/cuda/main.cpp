// tests/cuda/main.cpp — the runner for the CUDA-vs-CPU tests (tests/cuda/*.cpp). Without a
// usable GPU it exits with 77, which ctest reports as *skipped* (SKIP_RETURN_CODE): the
// tests are compiled everywhere but never counted as passed where they could not run — and
// where a GPU is required (kernels/cuda/runtime/runtime.h: gpu_required) it exits 1. The
// cuDNN algorithms the tests' Solvers save go to a folder of the run's own, not the user's cache
// (engine/algorithm_cache.h).
#define DOCTEST_CONFIG_IMPLEMENT

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "kernels/cuda/runtime/runtime.h"
#include "tests/support/doctest_runner.h"
#include "tests/support/skip.h"

int main(int argc, char** argv) {
  using namespace bareyolo;
  if (!testing::only_listing_tests(argc, argv) && cuda::device_count() == 0) {
    // Where a GPU must be (a driver installed, or BAREYOLO_REQUIRE_GPU), its absence is a
    // failure: a broken driver or library must never read as skipped.
    if (cuda::gpu_required()) {
      std::printf("FAILED: a GPU is required here (%s), but none is usable: %s\n",
                  cuda::gpu_required_reason().c_str(), cuda::unavailable_reason().c_str());
      return 1;
    }
    std::printf("skipped: %s\n", cuda::unavailable_reason().c_str());
    return testing::kSkipExitCode;
  }
  const std::filesystem::path cache =
      std::filesystem::temp_directory_path() / ("bareyolo-cuda-tests-" + std::to_string(getpid()));
  ::setenv("BAREYOLO_CACHE_DIR", cache.c_str(), 1);
  const int status = testing::run_doctest(argc, argv);
  std::error_code ignored;
  std::filesystem::remove_all(cache, ignored);
  return status;
}
