// kernels/cpu/gemm/gemm_dot_avx2.cpp — the AVX2 dot-product tile (contract: gemm_kernels.h).
//
// 4 x 3 dot products of rows contiguous over p: per 8 steps of p, 3 vector loads of B rows
// kept in registers and 4 of A rows, one at a time, feed 12 FMAs into 12 ymm accumulators
// (lane l of an accumulator sums the steps p = l mod 8): 12 + 3 + 1 = all 16 registers.
// 4 x 3 rather than 3 x 4 because backward weight's rows are c_out (16, 32: multiples of 4)
// and its columns c_in * 3 * 3 (multiples of 3). A tail of fewer than 8 steps is loaded
// masked, as zeros. At the end each accumulator's lanes are summed by one fixed tree of
// horizontal adds, so the order of every addition is a function of kc alone.
#include <immintrin.h>

#include "kernels/cpu/gemm/gemm_kernels.h"

namespace bareyolo::cpu::gemm_detail {

namespace {

constexpr int kRows = kAvx2DotRows, kCols = kAvx2DotCols;

// The first `count` lanes set (count in [0, 8]), as maskload wants them.
__attribute__((always_inline)) inline __m256i first_lanes(int64_t count) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count)), lane);
}

// acc[i * kCols + j] += a[i][p + l] * b[j][p + l] in lane l, for the lanes in mask. The
// empty asm statements pin each loaded vector in a register (else GCC folds the B loads
// into the FMAs as memory operands and loads each one four times).
template <bool kMasked>
__attribute__((always_inline)) inline void dot_step(const float* const* a, const float* const* b,
                                                    int64_t p, __m256i mask, __m256* acc) {
  auto load = [&](const float* row) {
    if constexpr (kMasked) return _mm256_maskload_ps(row + p, mask);
    return _mm256_loadu_ps(row + p);
  };
  __m256 bv[kCols];
#pragma GCC unroll 3
  for (int j = 0; j < kCols; ++j) {
    bv[j] = load(b[j]);
    asm("" : "+x"(bv[j]));
  }
#pragma GCC unroll 4
  for (int i = 0; i < kRows; ++i) {
    __m256 av = load(a[i]);
    asm("" : "+x"(av));
#pragma GCC unroll 3
    for (int j = 0; j < kCols; ++j)
      acc[i * kCols + j] = _mm256_fmadd_ps(av, bv[j], acc[i * kCols + j]);
  }
}

// The lane totals of four accumulators: element t of the result is the sum of acc[t]'s 8
// lanes (two rounds of pairwise horizontal adds within each 128-bit half, then the halves).
__attribute__((always_inline)) inline __m128 lane_totals(__m256 a, __m256 b, __m256 c, __m256 d) {
  const __m256 quads = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
  return _mm_add_ps(_mm256_castps256_ps128(quads), _mm256_extractf128_ps(quads, 1));
}

}  // namespace

void dot_tile_avx2_4x3(int64_t kc, const float* const* a_rows, const float* const* b_rows,
                       float* sums) {
  constexpr int kTiles = kRows * kCols;
  static_assert(kTiles == 12, "the reduction below handles 3 groups of 4 accumulators");
  const float* a[kRows];
  const float* b[kCols];
  for (int i = 0; i < kRows; ++i) a[i] = a_rows[i];
  for (int j = 0; j < kCols; ++j) b[j] = b_rows[j];
  __m256 acc[kTiles];
#pragma GCC unroll 12
  for (int t = 0; t < kTiles; ++t) acc[t] = _mm256_setzero_ps();

  int64_t p = 0;
  for (; p + 8 <= kc; p += 8) dot_step<false>(a, b, p, __m256i{}, acc);
  if (p < kc) dot_step<true>(a, b, p, first_lanes(kc - p), acc);

#pragma GCC unroll 3
  for (int t = 0; t < kTiles; t += 4)
    _mm_storeu_ps(sums + t, lane_totals(acc[t], acc[t + 1], acc[t + 2], acc[t + 3]));
}

}  // namespace bareyolo::cpu::gemm_detail
