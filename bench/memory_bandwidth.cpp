// bench/memory_bandwidth.cpp — see memory_bandwidth.h.
#include "bench/memory_bandwidth.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

namespace bareyolo::bench {

double memory_bandwidth_gb_s(int threads) {
  // 2 x 64 MB: far past any cache, so every pass goes to memory.
  constexpr int64_t kValues = int64_t{16} << 20;
  constexpr int kRepetitions = 5;
  std::vector<float> x(kValues, 1.0f), y(kValues, 0.0f);
  auto stream = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) y[i] = 1.0001f * x[i] + 0.5f;
  };
  double best = 0;
  for (int repetition = 0; repetition < kRepetitions; ++repetition) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> helpers;
    for (int t = 1; t < threads; ++t)
      helpers.emplace_back(stream, kValues * t / threads, kValues * (t + 1) / threads);
    stream(0, kValues / threads);
    for (std::thread& helper : helpers) helper.join();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, 2.0 * sizeof(float) * kValues / seconds / 1e9);
  }
  return best;
}

MemoryScaling measure_memory_scaling() {
  MemoryScaling scaling;
  scaling.one_thread = memory_bandwidth_gb_s(1);
  scaling.two_threads = memory_bandwidth_gb_s(2);
  return scaling;
}

}  // namespace bareyolo::bench
