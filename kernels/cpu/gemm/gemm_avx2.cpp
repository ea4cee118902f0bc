// kernels/cpu/gemm/gemm_avx2.cpp — the AVX2 + FMA float micro-kernel (contract: gemm_kernels.h).
//
// 6 x 16 is the classic Haswell-to-Zen shape: 12 accumulators fill 12 of the 16 ymm
// registers and hide the FMA latency (4 cycles x 2 pipes = 8 chains needed), leaving room
// for the two B vectors and one broadcast. Per step it does 12 FMAs for 8 loads, within
// what two load ports sustain.
#include <immintrin.h>

#include "kernels/cpu/gemm/gemm_kernels.h"

namespace bareyolo::cpu::gemm_detail {

namespace {

// A 6 x (8 * kVectors) tile; the B panel steps kAvx2Cols floats whatever kVectors is.
template <int kVectors>
__attribute__((always_inline)) inline void multiply_tile(int64_t kc, const float* a_panel,
                                                         const float* b_panel, float alpha,
                                                         float beta, float* c, int64_t ldc) {
  constexpr int kRows = kAvx2Rows;
  __m256 acc[kRows][kVectors];
#pragma GCC unroll 6
  for (int i = 0; i < kRows; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < kVectors; ++v) acc[i][v] = _mm256_setzero_ps();

  for (int64_t p = 0; p < kc; ++p) {
    __m256 b_vectors[kVectors];
#pragma GCC unroll 2
    for (int v = 0; v < kVectors; ++v) b_vectors[v] = _mm256_load_ps(b_panel + 8 * v);
#pragma GCC unroll 6
    for (int i = 0; i < kRows; ++i) {
      __m256 a_value = _mm256_broadcast_ss(a_panel + i);
#pragma GCC unroll 2
      for (int v = 0; v < kVectors; ++v)
        acc[i][v] = _mm256_fmadd_ps(a_value, b_vectors[v], acc[i][v]);
    }
    a_panel += kRows;
    b_panel += kAvx2Cols;
  }

  __m256 alpha_v = _mm256_set1_ps(alpha), beta_v = _mm256_set1_ps(beta);
#pragma GCC unroll 6
  for (int i = 0; i < kRows; ++i) {
    float* row = c + i * ldc;
#pragma GCC unroll 2
    for (int v = 0; v < kVectors; ++v) {
      __m256 value = _mm256_mul_ps(alpha_v, acc[i][v]);
      if (beta != 0.0f) value = _mm256_fmadd_ps(beta_v, _mm256_loadu_ps(row + 8 * v), value);
      _mm256_storeu_ps(row + 8 * v, value);
    }
  }
}

}  // namespace

void micro_kernel_avx2_6x16(int64_t kc, const float* a_panel, const float* b_panel, float alpha,
                            float beta, float* c, int64_t ldc) {
  multiply_tile<2>(kc, a_panel, b_panel, alpha, beta, c, ldc);
}

void micro_kernel_avx2_6x8(int64_t kc, const float* a_panel, const float* b_panel, float alpha,
                           float beta, float* c, int64_t ldc) {
  multiply_tile<1>(kc, a_panel, b_panel, alpha, beta, c, ldc);
}

}  // namespace bareyolo::cpu::gemm_detail
