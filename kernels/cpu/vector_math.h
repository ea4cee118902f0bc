// kernels/cpu/vector_math.h — an 8-lane AVX2 exp, the sigmoid and SiLU built on it, and the
// loop that maps them over a span: the float SiLU/sigmoid kernels. glibc's expf is accurate
// but scalar (the compiler vectorizes it only under -ffast-math), and one call per activation
// made SiLU the second-largest cost of a training step after the GEMM.
//
// exp(x), Cephes style:
//   n = round(x / ln2),  r = x - n ln2       (ln2 split in a short high part and a low part, so
//                                              n * ln2_hi is exact and |r| <= ln2 / 2)
//   e^r = 1 + r + r^2 P(r)                    (degree-5 minimax P: ~1 ulp on [-ln2/2, ln2/2])
//   e^x = e^r * 2^n                           (2^n built in the exponent bits)
// n reaches 128 at x = ln(FLT_MAX), one past the largest exponent, so the scaling is done as
// (2 e^r) * 2^(n-1). Past the float range the result is selected outright: +inf above
// ln(FLT_MAX), +0 below -86.6 (just above ln(2^-125), so 2^(n-1) stays a normal number; the
// results flushed, below 2.5e-38, only ever meet the sigmoid's 1 + e^-x). NaN propagates.
//
// Without AVX2 + FMA (a build for plain x86-64) none of this is defined (BAREYOLO_VECTOR_EXP is
// not) and callers keep their scalar loops over kernels/activation.h's formulas.
#pragma once

#include <cstdint>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

namespace bareyolo::cpu {

#if defined(__AVX2__) && defined(__FMA__)
#define BAREYOLO_VECTOR_EXP 1

inline __m256 exp8(__m256 x) {
  const __m256 max_input = _mm256_set1_ps(88.72283935546875f);  // ln(FLT_MAX), rounded down
  const __m256 min_input = _mm256_set1_ps(-86.6f);              // keeps n >= -125
  // min/max return their second operand when either is NaN, so a NaN x passes through.
  const __m256 clamped = _mm256_max_ps(min_input, _mm256_min_ps(max_input, x));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(clamped, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), clamped);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  const __m256 exp_r =
      _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
  // 2^(n-1): n - 1 + 127 in the exponent field; n - 1 lies in [-126, 127] after the clamp.
  const __m256i biased = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(126));
  const __m256 half_scale = _mm256_castsi256_ps(_mm256_slli_epi32(biased, 23));
  __m256 result = _mm256_mul_ps(_mm256_add_ps(exp_r, exp_r), half_scale);
  result = _mm256_blendv_ps(result, _mm256_set1_ps(__builtin_inff()),
                            _mm256_cmp_ps(x, max_input, _CMP_GT_OQ));
  return _mm256_andnot_ps(_mm256_cmp_ps(x, min_input, _CMP_LT_OQ), result);
}

// numerator / (1 + e^-x) with a true division (rcp's 12 bits would cost the accuracy the
// tests ask): the sigmoid for numerator 1, SiLU for numerator x (one rounding fewer than
// x * sigmoid(x)). Below x = -88.7 the denominator is +inf and the result a signed zero.
inline __m256 divide_by_one_plus_exp_neg8(__m256 numerator, __m256 x) {
  const __m256 one = _mm256_set1_ps(1.0f);
  return _mm256_div_ps(numerator, _mm256_add_ps(one, exp8(_mm256_sub_ps(_mm256_setzero_ps(), x))));
}
inline __m256 sigmoid8(__m256 x) { return divide_by_one_plus_exp_neg8(_mm256_set1_ps(1.0f), x); }
inline __m256 silu8(__m256 x) { return divide_by_one_plus_exp_neg8(x, x); }

// out[i] = f(in[i]...) for i in [0, count), 8 lanes at a time. The tail goes through masked
// loads (zeros in the unused lanes) and a masked store, so every element takes the same path
// and its result does not depend on where a chunk boundary falls. `out` may be one of `in`.
template <class F, class... In>
void map8(int64_t count, F f, float* out, const In*... in) {
  int64_t i = 0;
  for (; i + 8 <= count; i += 8) _mm256_storeu_ps(out + i, f(_mm256_loadu_ps(in + i)...));
  if (i == count) return;
  const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count - i)),
                                          _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  _mm256_maskstore_ps(out + i, mask, f(_mm256_maskload_ps(in + i, mask)...));
}
#endif

}  // namespace bareyolo::cpu
