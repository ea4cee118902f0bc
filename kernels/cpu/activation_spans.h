// kernels/cpu/activation_spans.h — SiLU and the sigmoid over one contiguous span: the kernels
// under kernels/cpu/elementwise.cpp's ops and the fused BatchNorm + SiLU ops
// (kernels/cpu/batchnorm_silu.cpp), shared so that both give the same bits.
//
// Each is a scalar template (double, or float without AVX2) over the one scalar formula of
// kernels/activation.h and, for float, an overload on the 8-lane exp of vector_math.h, which is
// where a training step spends its pointwise time.
//   silu_forward_span:   y = x sigmoid(x)
//   silu_backward_span:  dx += dy s (1 + x (1 - s)),  s = sigmoid(x)   (accumulates)
#pragma once

#include <cstdint>

#include "kernels/activation.h"
#include "kernels/cpu/vector_math.h"

namespace bareyolo::cpu {

template <class T>
void silu_forward_span(const T* x, T* y, int64_t count) {
  for (int64_t i = 0; i < count; ++i) y[i] = silu(x[i]);
}
template <class T>
void silu_backward_span(const T* x, const T* dy, T* dx, int64_t count) {
  for (int64_t i = 0; i < count; ++i) dx[i] += silu_gradient(x[i], dy[i]);
}
template <class T>
void sigmoid_forward_span(const T* x, T* y, int64_t count) {
  for (int64_t i = 0; i < count; ++i) y[i] = sigmoid(x[i]);
}

#ifdef BAREYOLO_VECTOR_EXP
inline void silu_forward_span(const float* x, float* y, int64_t count) { map8(count, silu8, y, x); }
// SiLU's gradient times dy is dy s (1 + x (1 - s)): the two factors, dy s and the slope, whose
// product the backward span adds to dx in one rounding (and a fused op writes).
struct SiluGradientFactors8 {
  __m256 dy_s, slope;
};
inline SiluGradientFactors8 silu_gradient_factors8(__m256 x, __m256 dy) {
  const __m256 s = sigmoid8(x), one = _mm256_set1_ps(1.0f);
  return {_mm256_mul_ps(dy, s), _mm256_fmadd_ps(x, _mm256_sub_ps(one, s), one)};
}
inline void silu_backward_span(const float* x, const float* dy, float* dx, int64_t count) {
  map8(
      count,
      [](__m256 v, __m256 grad_out, __m256 grad_in) {
        const SiluGradientFactors8 gradient = silu_gradient_factors8(v, grad_out);
        return _mm256_fmadd_ps(gradient.dy_s, gradient.slope, grad_in);
      },
      dx, x, dy, static_cast<const float*>(dx));
}
inline void sigmoid_forward_span(const float* x, float* y, int64_t count) {
  map8(count, sigmoid8, y, x);
}
#endif

}  // namespace bareyolo::cpu
