// kernels/cpu/gemm/gemm_avx512.cpp — the AVX-512 float micro-kernel (contract: gemm_kernels.h).
// Compiled for avx512f function by function; gemm.cpp calls it only when the CPU has it.
//
// 8 x 32: 16 zmm accumulators out of 32 registers. Eight rows, not the six of the AVX2
// kernel, because the products here have M = Cout or Cin*k*k, multiples of 8 for yolov5n
// (16..256, 144..2304), so no row of a tile is wasted. Per step: 16 FMAs for 2 vector loads
// and 8 broadcasts, a light load on the ports even where (Zen 4) a zmm FMA issues at one per
// cycle; 16 independent chains cover the 4-cycle FMA latency.
#include <immintrin.h>

#include "kernels/cpu/gemm/gemm_kernels.h"

namespace bareyolo::cpu::gemm_detail {

namespace {

// An 8 x (16 * kVectors) tile; the B panel steps kAvx512Cols floats whatever kVectors is.
template <int kVectors>
__attribute__((target("avx512f"), always_inline)) inline void multiply_tile(int64_t kc,
                                                                            const float* a_panel,
                                                                            const float* b_panel,
                                                                            float alpha, float beta,
                                                                            float* c, int64_t ldc) {
  constexpr int kRows = kAvx512Rows;
  __m512 acc[kRows][kVectors];
#pragma GCC unroll 8
  for (int i = 0; i < kRows; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < kVectors; ++v) acc[i][v] = _mm512_setzero_ps();

  for (int64_t p = 0; p < kc; ++p) {
    __m512 b_vectors[kVectors];
#pragma GCC unroll 2
    for (int v = 0; v < kVectors; ++v) b_vectors[v] = _mm512_load_ps(b_panel + 16 * v);
#pragma GCC unroll 8
    for (int i = 0; i < kRows; ++i) {
      __m512 a_value = _mm512_set1_ps(a_panel[i]);
#pragma GCC unroll 2
      for (int v = 0; v < kVectors; ++v)
        acc[i][v] = _mm512_fmadd_ps(a_value, b_vectors[v], acc[i][v]);
    }
    a_panel += kRows;
    b_panel += kAvx512Cols;
  }

  __m512 alpha_v = _mm512_set1_ps(alpha), beta_v = _mm512_set1_ps(beta);
#pragma GCC unroll 8
  for (int i = 0; i < kRows; ++i) {
    float* row = c + i * ldc;
#pragma GCC unroll 2
    for (int v = 0; v < kVectors; ++v) {
      __m512 value = _mm512_mul_ps(alpha_v, acc[i][v]);
      if (beta != 0.0f) value = _mm512_fmadd_ps(beta_v, _mm512_loadu_ps(row + 16 * v), value);
      _mm512_storeu_ps(row + 16 * v, value);
    }
  }
}

}  // namespace

__attribute__((target("avx512f"))) void micro_kernel_avx512_8x32(int64_t kc, const float* a_panel,
                                                                 const float* b_panel, float alpha,
                                                                 float beta, float* c,
                                                                 int64_t ldc) {
  multiply_tile<2>(kc, a_panel, b_panel, alpha, beta, c, ldc);
}

__attribute__((target("avx512f"))) void micro_kernel_avx512_8x16(int64_t kc, const float* a_panel,
                                                                 const float* b_panel, float alpha,
                                                                 float beta, float* c,
                                                                 int64_t ldc) {
  multiply_tile<1>(kc, a_panel, b_panel, alpha, beta, c, ldc);
}

}  // namespace bareyolo::cpu::gemm_detail
