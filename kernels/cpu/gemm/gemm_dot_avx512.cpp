// kernels/cpu/gemm/gemm_dot_avx512.cpp — the AVX-512 dot-product tile (contract: gemm_kernels.h).
// Compiled for avx512f function by function; gemm.cpp calls it only when the CPU has it.
//
// 4 x 6 dot products of rows contiguous over p: per 16 steps of p, 4 vector loads of A rows
// and 6 of B rows feed 24 FMAs into 24 zmm accumulators (lane l of an accumulator sums the
// steps p = l mod 16). A tail of fewer than 16 steps is loaded masked, as zeros. At the end
// the accumulators' lanes are summed by one fixed tree of shuffles and adds, so the order of
// every addition is a function of kc alone.
#include <immintrin.h>

#include "kernels/cpu/gemm/gemm_kernels.h"

// GCC 12's AVX-512 shuffle and unpack intrinsics start from _mm512_undefined_ps(), which
// initialises itself and trips -Wuninitialized when inlined here (GCC bug 105593), and
// -Wmaybe-uninitialized in a sanitizer build (RelWithDebInfo). Clang has neither the bug nor
// the second warning's name.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace bareyolo::cpu::gemm_detail {

namespace {

constexpr int kRows = kAvx512DotRows, kCols = kAvx512DotCols;

// Per 128-bit lane: (a0 + a2, b0 + b2, a1 + a3, b1 + b3).
__attribute__((target("avx512f"), always_inline)) inline __m512 pair_sums(__m512 a, __m512 b) {
  return _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
}

// Per 128-bit lane, from pair_sums(a, b) and pair_sums(c, d): the lane's sums of a, b, c, d.
__attribute__((target("avx512f"), always_inline)) inline __m512 quad_sums(__m512 ab, __m512 cd) {
  const __m512d lo = _mm512_unpacklo_pd(_mm512_castps_pd(ab), _mm512_castps_pd(cd));
  const __m512d hi = _mm512_unpackhi_pd(_mm512_castps_pd(ab), _mm512_castps_pd(cd));
  return _mm512_add_ps(_mm512_castpd_ps(lo), _mm512_castpd_ps(hi));  // a float add
}

// acc[i * kCols + j] += a[i][p + l] * b[j][p + l] in lane l, for the lanes in mask.
// One B vector at a time against the kRows A vectors: 24 accumulators, 4 A vectors and
// one B vector take 29 of the 32 registers. The empty asm statements pin each loaded vector
// in a register: without them GCC folds the loads into the FMAs as memory operands and
// loads every vector once per use, which made the loop load-bound.
__attribute__((target("avx512f"), always_inline)) inline void dot_step(const float* const* a,
                                                                       const float* const* b,
                                                                       int64_t p, __mmask16 mask,
                                                                       __m512* acc) {
  __m512 av[kRows];
#pragma GCC unroll 4
  for (int i = 0; i < kRows; ++i) {
    av[i] = _mm512_maskz_loadu_ps(mask, a[i] + p);
    asm("" : "+v"(av[i]));
  }
#pragma GCC unroll 6
  for (int j = 0; j < kCols; ++j) {
    __m512 bv = _mm512_maskz_loadu_ps(mask, b[j] + p);
    asm("" : "+v"(bv));
#pragma GCC unroll 4
    for (int i = 0; i < kRows; ++i)
      acc[i * kCols + j] = _mm512_fmadd_ps(av[i], bv, acc[i * kCols + j]);
  }
}

// Per 128-bit lane, the lane sums of the four accumulators behind pair_sums(a, b) and
// pair_sums(c, d), then those lanes added up: element t of the result (t < 4 * count / 4)
// is the sum of acc[t]'s 16 lanes. count is 16 (a full result) or 8 (the first 8 elements).
template <int count>
__attribute__((target("avx512f"), always_inline)) inline __m512 lane_totals(const __m512* acc) {
  __m512 pairs[count / 2], quads[count / 4];
#pragma GCC unroll 8
  for (int t = 0; t < count / 2; ++t) pairs[t] = pair_sums(acc[2 * t], acc[2 * t + 1]);
#pragma GCC unroll 4
  for (int t = 0; t < count / 4; ++t) quads[t] = quad_sums(pairs[2 * t], pairs[2 * t + 1]);
  // Lanes (0 + 2, 1 + 3) of quads 0 and 1 (and of quads 2 and 3).
  const __m512 low = _mm512_add_ps(_mm512_shuffle_f32x4(quads[0], quads[1], 0x44),
                                   _mm512_shuffle_f32x4(quads[0], quads[1], 0xEE));
  __m512 high = low;
  if constexpr (count == 16)
    high = _mm512_add_ps(_mm512_shuffle_f32x4(quads[2], quads[3], 0x44),
                         _mm512_shuffle_f32x4(quads[2], quads[3], 0xEE));
  // Lane q = quads[q]'s total: lanes (0, 2) plus lanes (1, 3) of low and high.
  return _mm512_add_ps(_mm512_shuffle_f32x4(low, high, 0x88),
                       _mm512_shuffle_f32x4(low, high, 0xDD));
}

}  // namespace

__attribute__((target("avx512f"))) void dot_tile_avx512_4x6(int64_t kc, const float* const* a_rows,
                                                            const float* const* b_rows,
                                                            float* sums) {
  constexpr int kTiles = kRows * kCols;
  static_assert(kTiles == 24, "the reduction below handles 16 + 8 accumulators");
  const float* a[kRows];
  const float* b[kCols];
  for (int i = 0; i < kRows; ++i) a[i] = a_rows[i];
  for (int j = 0; j < kCols; ++j) b[j] = b_rows[j];
  __m512 acc[kTiles];
#pragma GCC unroll 24
  for (int t = 0; t < kTiles; ++t) acc[t] = _mm512_setzero_ps();

  int64_t p = 0;
  for (; p + 16 <= kc; p += 16) dot_step(a, b, p, __mmask16(0xFFFF), acc);
  if (p < kc) dot_step(a, b, p, __mmask16((1u << (kc - p)) - 1), acc);

  _mm512_storeu_ps(sums, lane_totals<16>(acc));
  _mm256_storeu_ps(sums + 16, _mm512_castps512_ps256(lane_totals<8>(acc + 16)));
}

}  // namespace bareyolo::cpu::gemm_detail
