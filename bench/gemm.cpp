// bench/gemm.cpp — bench_gemm: cpu::gemm<float> on the products of yolov5n's convolutions at
// 320 x 320, one image, against the FP32 FMA peak of one core measured in the same run.
//
// A convolution with Cout filters of Cin x k x k over an Hout x Wout output is three GEMMs
// (M = Cout, K = Cin*k*k, N = Hout*Wout):
//   forward      Y[M x N]    = W[M x K] * col[K x N]
//   bwd-data     dcol[K x N] = W^T * dY                 (trans_a)
//   bwd-weight   dW[M x K]  += dY[M x N] * col^T        (trans_b, beta = 1)
// Rates are single-thread GFLOP/s (2*M*N*K per product), best of several timed samples.
// The last line is machine-readable:
//   RESULT gemm_gflops=<x> peak_gflops=<y> ratio=<x/y> small_gflops=<s> small_time_share=<t>
// gemm_gflops = total flops / total time over the products of at least kHeadlineMflop;
// small_gflops the same over the smaller ones, and small_time_share their share of the time
// of all the table's products (one of each shape).
//
//   bench_gemm            the full table (a few seconds)
//   bench_gemm --quick    four convolutions and a short peak loop (well under a second)
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/gemm/gemm.h"    // defines: cpu::gemm
#include "kernels/cpu/thread_pool.h"  // defines: ThreadPool

namespace {

using Clock = std::chrono::steady_clock;

constexpr double kHeadlineMflop = 25.0;

struct ConvShape {
  const char* name;
  int64_t cout, cin, kernel, stride, in_size;
  int64_t m() const { return cout; }
  int64_t k() const { return cin * kernel * kernel; }
  int64_t n() const { return (in_size / stride) * (in_size / stride); }
};

// The convolutions of yolov5n at 320 x 320 in network order; those with the same GEMM shape
// as an earlier one are skipped when the table is built.
const ConvShape kYolov5nConvs[] = {
    {"L0 6x6 s2 3->16 @320", 16, 3, 6, 2, 320},
    {"L1 3x3 s2 16->32 @160", 32, 16, 3, 2, 160},
    {"C3 1x1 32->16 @80", 16, 32, 1, 1, 80},
    {"C3 1x1 16->16 @80", 16, 16, 1, 1, 80},
    {"C3 3x3 16->16 @80", 16, 16, 3, 1, 80},
    {"C3 1x1 32->32 @80", 32, 32, 1, 1, 80},
    {"L3 3x3 s2 32->64 @80", 64, 32, 3, 2, 80},
    {"C3 1x1 64->32 @40", 32, 64, 1, 1, 40},
    {"C3 1x1 32->32 @40", 32, 32, 1, 1, 40},
    {"C3 3x3 32->32 @40", 32, 32, 3, 1, 40},
    {"C3 1x1 64->64 @40", 64, 64, 1, 1, 40},
    {"L5 3x3 s2 64->128 @40", 128, 64, 3, 2, 40},
    {"C3 1x1 128->64 @20", 64, 128, 1, 1, 20},
    {"C3 3x3 64->64 @20", 64, 64, 3, 1, 20},
    {"C3 1x1 64->64 @20", 64, 64, 1, 1, 20},
    {"C3 1x1 128->128 @20", 128, 128, 1, 1, 20},
    {"L7 3x3 s2 128->256 @20", 256, 128, 3, 2, 20},
    {"C3 1x1 256->128 @10", 128, 256, 1, 1, 10},
    {"C3 3x3 128->128 @10", 128, 128, 3, 1, 10},
    {"C3 1x1 256->256 @10", 256, 256, 1, 1, 10},
    {"SPPF 1x1 512->256 @10", 256, 512, 1, 1, 10},
    {"head C3 1x1 256->64 @20", 64, 256, 1, 1, 20},
    {"head C3 1x1 128->32 @40", 32, 128, 1, 1, 40},
    {"head 3x3 s2 64->64 @40", 64, 64, 3, 2, 40},
    {"head 3x3 s2 128->128 @20", 128, 128, 3, 2, 20},
    {"Detect 1x1 64->255 @40", 255, 64, 1, 1, 40},
    {"Detect 1x1 128->255 @20", 255, 128, 1, 1, 20},
    {"Detect 1x1 256->255 @10", 255, 256, 1, 1, 10},
};
// The last one's products are below kHeadlineMflop: the quick run reports both kinds.
const char* const kQuickConvs[] = {"L1 3x3 s2 16->32 @160", "C3 3x3 64->64 @20",
                                   "Detect 1x1 64->255 @40", "C3 1x1 128->64 @20"};

struct Product {
  const char* pass;
  bool trans_a, trans_b;
  int64_t m, n, k;
  float beta;
  double flops() const { return 2.0 * static_cast<double>(m) * static_cast<double>(n) * k; }
};

std::vector<Product> products_of(const ConvShape& conv) {
  int64_t m = conv.m(), n = conv.n(), k = conv.k();
  return {{"fwd", false, false, m, n, k, 0.0f},
          {"bwd-data", true, false, k, n, m, 0.0f},
          {"bwd-weight", false, true, m, k, n, 1.0f}};
}

struct Timing {
  int samples;          // best of this many
  double min_sample_s;  // each sample repeats the call until it lasts this long
};

// Best seconds per call of fn().
double best_seconds_per_call(const std::function<void()>& fn, const Timing& timing) {
  fn();  // warm-up: page faults, pack buffers, caches
  double best = 1e30;
  for (int sample = 0; sample < timing.samples; ++sample) {
    int64_t calls = 0;
    Clock::time_point start = Clock::now();
    double elapsed = 0;
    do {
      fn();
      ++calls;
      elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    } while (elapsed < timing.min_sample_s);
    best = std::min(best, elapsed / static_cast<double>(calls));
  }
  return best;
}

// Seconds per call of one product, on operands of random values.
double time_product(const Product& product, const Timing& timing) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  auto random_matrix = [&](int64_t count) {
    std::vector<float> values(static_cast<size_t>(count));
    for (float& v : values) v = dist(rng);
    return values;
  };
  std::vector<float> a = random_matrix(product.m * product.k);
  std::vector<float> b = random_matrix(product.k * product.n);
  std::vector<float> c = random_matrix(product.m * product.n);
  int64_t lda = product.trans_a ? product.m : product.k;
  int64_t ldb = product.trans_b ? product.k : product.n;
  return best_seconds_per_call(
      [&] {
        bareyolo::cpu::gemm<float>(product.trans_a, product.trans_b, product.m, product.n,
                                   product.k, 1.0f, a.data(), lda, b.data(), ldb, product.beta,
                                   c.data(), product.n);
      },
      timing);
}

// ---- FP32 peak: 12 independent FMA chains, each kept in a register by an empty asm ------
// Twelve chains exceed latency x throughput (4 cycles x 1 zmm or 2 ymm FMAs per cycle on
// Zen 4), so the loop is limited by the FMA units, not by a dependency. The chains are named
// variables, not an array (GCC keeps an array that an asm operand names in memory), the loops
// hold no call (a call would spill them), and they return a sum so nothing is dropped.
// A macro, because the intrinsics only inline into functions compiled for their target.
constexpr int kChains = 12;
volatile float g_sink;

#define BAREYOLO_FMA_CHAINS(Vector, fma, add, set1, iterations)                                   \
  Vector c0 = set1(0.5f), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0, c8 = c0, \
         c9 = c0, c10 = c0, c11 = c0;                                                             \
  const Vector scale = set1(0.9999999f), offset = set1(1e-7f);                                    \
  for (int64_t it = 0; it < (iterations); ++it) {                                                 \
    c0 = fma(c0, scale, offset), c1 = fma(c1, scale, offset);                                     \
    c2 = fma(c2, scale, offset), c3 = fma(c3, scale, offset);                                     \
    c4 = fma(c4, scale, offset), c5 = fma(c5, scale, offset);                                     \
    c6 = fma(c6, scale, offset), c7 = fma(c7, scale, offset);                                     \
    c8 = fma(c8, scale, offset), c9 = fma(c9, scale, offset);                                     \
    c10 = fma(c10, scale, offset), c11 = fma(c11, scale, offset);                                 \
    asm volatile("" : "+v"(c0), "+v"(c1), "+v"(c2), "+v"(c3), "+v"(c4), "+v"(c5));                \
    asm volatile("" : "+v"(c6), "+v"(c7), "+v"(c8), "+v"(c9), "+v"(c10), "+v"(c11));              \
  }                                                                                               \
  Vector sum = add(add(add(add(c0, c1), add(c2, c3)), add(add(c4, c5), add(c6, c7))),             \
                   add(add(c8, c9), add(c10, c11)))

__attribute__((target("avx512f"), noinline)) float fma_chains_avx512(int64_t iterations) {
  BAREYOLO_FMA_CHAINS(__m512, _mm512_fmadd_ps, _mm512_add_ps, _mm512_set1_ps, iterations);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum);
  return lanes[0] + lanes[5] + lanes[10] + lanes[15];  // enough to keep every chain alive
}

__attribute__((noinline)) float fma_chains_avx2(int64_t iterations) {
  BAREYOLO_FMA_CHAINS(__m256, _mm256_fmadd_ps, _mm256_add_ps, _mm256_set1_ps, iterations);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, sum);
  return lanes[0] + lanes[3] + lanes[7];  // enough to keep every chain alive
}
#undef BAREYOLO_FMA_CHAINS

double measure_peak_gflops(int64_t iterations, int samples, const char** isa) {
  bool avx512 = __builtin_cpu_supports("avx512f");
  *isa = avx512 ? "AVX-512 (zmm)" : "AVX2 (ymm)";
  const double flops = static_cast<double>(iterations) * kChains * (avx512 ? 16 : 8) * 2;
  double best = 0;
  for (int sample = 0; sample < samples + 1; ++sample) {  // the first one warms the clock up
    Clock::time_point start = Clock::now();
    g_sink = avx512 ? fma_chains_avx512(iterations) : fma_chains_avx2(iterations);
    double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    best = std::max(best, flops / seconds);
  }
  return best * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  Timing timing = quick ? Timing{3, 0.002} : Timing{7, 0.01};
  bareyolo::ThreadPool& pool = bareyolo::ThreadPool::global();
  const int pool_threads = pool.num_threads();

  const char* isa = "";
  double peak_gflops = measure_peak_gflops(quick ? 4'000'000 : 20'000'000, quick ? 4 : 7, &isa);
  std::printf("FP32 peak, one core, %s FMA, 12 chains: %.1f GFLOP/s\n\n", isa, peak_gflops);

  std::vector<const ConvShape*> convs;
  for (const ConvShape& conv : kYolov5nConvs) {
    bool wanted = !quick || std::any_of(std::begin(kQuickConvs), std::end(kQuickConvs),
                                        [&](std::string name) { return name == conv.name; });
    bool seen = std::any_of(convs.begin(), convs.end(), [&](const ConvShape* other) {
      return other->m() == conv.m() && other->n() == conv.n() && other->k() == conv.k();
    });
    if (wanted && !seen) convs.push_back(&conv);
  }

  pool.resize(1);
  std::printf("cpu::gemm<float>, one thread, GFLOP/s (M = Cout, K = Cin*k*k, N = Hout*Wout)\n");
  std::printf("%-26s %5s %6s %5s %8s %9s %9s %10s\n", "convolution", "M", "N", "K", "MFLOP", "fwd",
              "bwd-data", "bwd-weight");
  std::vector<Product> headline;
  double headline_flops = 0, headline_seconds = 0, small_flops = 0, small_seconds = 0;
  int small_products = 0;
  for (const ConvShape* conv : convs) {
    std::printf("%-26s %5lld %6lld %5lld %8.1f", conv->name, static_cast<long long>(conv->m()),
                static_cast<long long>(conv->n()), static_cast<long long>(conv->k()),
                2e-6 * static_cast<double>(conv->m() * conv->n() * conv->k()));
    for (const Product& product : products_of(*conv)) {
      double seconds = time_product(product, timing);
      std::printf(" %9.1f", product.flops() / seconds * 1e-9);
      if (product.flops() >= kHeadlineMflop * 1e6) {
        headline.push_back(product);
        headline_flops += product.flops();
        headline_seconds += seconds;
      } else {
        small_products += 1;
        small_flops += product.flops();
        small_seconds += seconds;
      }
    }
    std::printf("\n");
  }
  double gemm_gflops = headline_flops / headline_seconds * 1e-9;
  std::printf(
      "\nheadline: the %zu products of >= %.0f MFLOP above (flop-weighted: total flops / "
      "total time), one thread: %.1f GFLOP/s = %.0f%% of peak\n",
      headline.size(), kHeadlineMflop, gemm_gflops, 100 * gemm_gflops / peak_gflops);
  const double small_gflops = small_flops / small_seconds * 1e-9;
  const double small_share = small_seconds / (small_seconds + headline_seconds);
  std::printf(
      "left out of it: the %d products below %.0f MFLOP: %.1f GFLOP/s = %.0f%% of peak, "
      "%.0f%% of the time of all the products above\n",
      small_products, kHeadlineMflop, small_gflops, 100 * small_gflops / peak_gflops,
      100 * small_share);

  if (!quick) {
    pool.resize(2);
    double seconds = 0;
    for (const Product& product : headline) seconds += time_product(product, timing);
    std::printf("for information, the same products on a pool of 2 threads: %.1f GFLOP/s\n",
                headline_flops / seconds * 1e-9);
  }
  pool.resize(pool_threads);

  std::printf(
      "RESULT gemm_gflops=%.1f peak_gflops=%.1f ratio=%.3f small_gflops=%.1f "
      "small_time_share=%.3f\n",
      gemm_gflops, peak_gflops, gemm_gflops / peak_gflops, small_gflops, small_share);
  return 0;
}
