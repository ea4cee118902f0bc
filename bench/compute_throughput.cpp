// bench/compute_throughput.cpp — see compute_throughput.h.
#include "bench/compute_throughput.h"

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

namespace bareyolo::bench {

namespace {

// Ten independent chains: an FMA's latency (4 cycles) times the two FMA pipes of a core is 8,
// so ten keep both pipes busy every cycle, in registers (the loop over them unrolls). The
// chains' sum is returned and used, so the compiler keeps every FMA (it may not reassociate
// float arithmetic).
constexpr int kChains = 10;
float fma_chains(long iterations) {
  __m256 chain[kChains];
  for (int k = 0; k < kChains; ++k) chain[k] = _mm256_set1_ps(1.0f + 0.01f * k);
  const __m256 scale = _mm256_set1_ps(0.999999f), shift = _mm256_set1_ps(1e-6f);
  for (long it = 0; it < iterations; ++it)
    for (int k = 0; k < kChains; ++k) chain[k] = _mm256_fmadd_ps(chain[k], scale, shift);
  __m256 sum = chain[0];
  for (int k = 1; k < kChains; ++k) sum = _mm256_add_ps(sum, chain[k]);
  return _mm_cvtss_f32(_mm256_castps256_ps128(sum));
}

}  // namespace

double fma_gflop_s(int threads) {
  constexpr long kIterations = 15'000'000;  // ~40 ms at ~100 GFLOP/s per thread
  const auto start = std::chrono::steady_clock::now();
  std::vector<float> sums(threads);  // each thread's chains' sum, kept so that it is computed
  std::vector<std::thread> helpers;
  for (int t = 1; t < threads; ++t)
    helpers.emplace_back([&sums, t] { sums[t] = fma_chains(kIterations); });
  sums[0] = fma_chains(kIterations);
  for (std::thread& helper : helpers) helper.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return 2.0 * 8 * kChains * double(kIterations) * threads / seconds / 1e9;  // 2 FLOP per lane
}

ComputeScaling measure_compute_scaling() {
  // 1 and 2 threads take turns, so that a slow moment of the host falls on both alike.
  constexpr int kPairs = 7;
  std::vector<double> one, two, ratios;
  for (int pair = 0; pair < kPairs; ++pair) {
    one.push_back(fma_gflop_s(1));
    two.push_back(fma_gflop_s(2));
    ratios.push_back(two.back() / one.back());
  }
  auto median = [](std::vector<double> values) {
    std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end());
    return values[values.size() / 2];
  };
  return {median(one), median(two), median(ratios)};
}

}  // namespace bareyolo::bench
