// tests/main_cuda.cpp — the runner for the CUDA-vs-CPU tests (tests/cuda_*.cpp). Without a
// usable GPU it exits with 77, which ctest reports as *skipped* (SKIP_RETURN_CODE): the
// tests are compiled everywhere but never counted as passed where they could not run.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <string>

#include "kernels/cuda/runtime.h"

int main(int argc, char** argv) {
  bool only_listing = false;  // ctest's discovery lists the cases at build time
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]).rfind("--list", 0) == 0 || std::string(argv[i]) == "-ltc")
      only_listing = true;
  if (!only_listing && bareyolo::cuda::device_count() == 0) {
    std::printf("skipped: %s\n", bareyolo::cuda::unavailable_reason().c_str());
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
