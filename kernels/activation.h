// kernels/activation.h — the scalar formulas of the sigmoid family, written once for the host and
// the GPU (BAREYOLO_HOST_DEVICE), in float or double:
//   sigmoid  s = 1 / (1 + e^-x)                     from its output: dx = dy s (1 - s)
//   SiLU     y = x s                                dx = dy s (1 + x (1 - s))
//   BCE with logits, YOLOv5's pos_weight w (see kernels/ops.h):
//            l = (1 - t) x + (w t + 1 - t) softplus(-x),  softplus(-x) = max(-x, 0) + log1p(e^-|x|)
//            dl/dx = (1 - t) s - w t (1 - s)
// The CPU ops' scalar loops (kernels/cpu/activation_spans.h, elementwise.cpp), the CUDA kernels
// (kernels/cuda/*.cu, models/eval/decode.cu) and the loss in double (models/loss/loss_terms.h,
// host and GPU) all call these, so every device evaluates the same expression in the same order.
// On the GPU they are expf and log1pf, not the fast intrinsics (__expf), so results stay within a
// few ulps of the CPU's. The CPU's float spans use an 8-lane form of the same sigmoid
// (kernels/cpu/vector_math.h), which has its own bits.
#pragma once

#include <math.h>

#include "kernels/view.h"  // BAREYOLO_HOST_DEVICE

namespace bareyolo {

namespace detail {
// The C library's function for each type by its own name (expf for float), on the host as in
// CUDA device code: the same functions std::exp's float and double overloads call on the host.
BAREYOLO_HOST_DEVICE inline float exp_of(float x) { return ::expf(x); }
BAREYOLO_HOST_DEVICE inline double exp_of(double x) { return ::exp(x); }
BAREYOLO_HOST_DEVICE inline float log1p_of(float x) { return ::log1pf(x); }
BAREYOLO_HOST_DEVICE inline double log1p_of(double x) { return ::log1p(x); }
BAREYOLO_HOST_DEVICE inline float fabs_of(float x) { return ::fabsf(x); }
BAREYOLO_HOST_DEVICE inline double fabs_of(double x) { return ::fabs(x); }
}  // namespace detail

template <class T>
BAREYOLO_HOST_DEVICE inline T sigmoid(T x) {
  return T(1) / (T(1) + detail::exp_of(-x));
}
// dL/dx from s = sigmoid(x), the op's saved output, and dy = dL/ds.
template <class T>
BAREYOLO_HOST_DEVICE inline T sigmoid_gradient_from_output(T s, T dy) {
  return dy * s * (T(1) - s);
}

template <class T>
BAREYOLO_HOST_DEVICE inline T silu(T x) {
  return x * sigmoid(x);
}
// dL/dx at x from dy = dL/d silu(x).
template <class T>
BAREYOLO_HOST_DEVICE inline T silu_gradient(T x, T dy) {
  const T s = sigmoid(x);
  return dy * s * (T(1) + x * (T(1) - s));
}

// log(1 + e^-x), which never overflows. max(-x, 0) as std::max picks it (-x unless -x < 0, so
// also for -0 and NaN).
template <class T>
BAREYOLO_HOST_DEVICE inline T softplus_of_negative(T x) {
  const T neg = -x;
  return (neg < T(0) ? T(0) : neg) + detail::log1p_of(detail::exp_of(-detail::fabs_of(x)));
}
// BCE of logit x against target t, with pos_weight.
template <class T>
BAREYOLO_HOST_DEVICE inline T bce(T x, T t, T pos_weight) {
  return (T(1) - t) * x + (pos_weight * t + T(1) - t) * softplus_of_negative(x);
}
// d bce / dx.
template <class T>
BAREYOLO_HOST_DEVICE inline T bce_grad(T x, T t, T pos_weight) {
  const T s = sigmoid(x);
  return (T(1) - t) * s - pos_weight * t * (T(1) - s);
}

}  // namespace bareyolo
