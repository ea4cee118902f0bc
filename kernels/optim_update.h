// kernels/optim_update.h — the per-element arithmetic of the optimizer ops (kernels/ops.h), written
// once for the CPU loops (kernels/cpu/optim.cpp) and the CUDA kernels (kernels/cuda/optim.cu):
//   SGD    g = grad + weight_decay * param;  velocity = momentum * velocity + g
//          param -= lr * (nesterov ? g + momentum * velocity : velocity)
//   Adam   g = grad (+ weight_decay * param for Adam; AdamW shrinks param by 1 - lr * weight_decay)
//          m = beta1 * m + (1 - beta1) * g;  v = beta2 * v + (1 - beta2) * g^2
//          param -= lr / (1 - beta1^step) * m / (sqrt(v) / sqrt(1 - beta2^step) + eps)
//   EMA    average = decay * average + (1 - decay) * value
//   clip   factor = max_norm / (sqrt(sum of squares) + 1e-6), applied when below 1 (PyTorch's
//          clip_grad_norm_)
// The settings arrive in double and are rounded once to the parameters' type T, as both devices
// did; each element is then updated in T.
#pragma once

#include <math.h>

#include "kernels/ops.h"   // SgdParams, AdamParams
#include "kernels/view.h"  // BAREYOLO_HOST_DEVICE

namespace bareyolo::ops {

// One parameter group's SGD settings in T (Nesterov's switch as 1 or 0: a struct of four T has
// no padding, so its bytes say all it holds: engine/step_scalars.h compares them).
template <class T>
struct SgdFactors {
  T lr = 0, momentum = 0, decay = 0, nesterov = 1;

  static SgdFactors of(const SgdParams& p) {
    return {T(p.lr), T(p.momentum), T(p.weight_decay), T(p.nesterov ? 1 : 0)};
  }
  // One element's step: w and v updated in place from its gradient g.
  BAREYOLO_HOST_DEVICE void step(T& w, T& v, T g) const {
    const T step_grad = g + decay * w;
    v = momentum * v + step_grad;
    w -= lr * (nesterov != 0 ? step_grad + momentum * v : v);
  }
};

// One parameter group's Adam or AdamW settings in T. The step-dependent bias corrections and
// keep1, keep2 (1 - beta1, 1 - beta2) are computed in double, as PyTorch computes them (Python
// floats), then rounded once: 1 - 0.999f in float is 1.3e-5 below 0.001, and v would be that
// much too small.
template <class T>
struct AdamFactors {
  T shrink = 1, l2 = 0, beta1 = 0, beta2 = 0, keep1 = 1, keep2 = 1, step_size = 0, eps = 0,
    correction2 = 1;

  static AdamFactors of(const AdamParams& p) {
    const double bias_correction1 = 1 - ::pow(p.beta1, double(p.step));
    const double bias_correction2_sqrt = ::sqrt(1 - ::pow(p.beta2, double(p.step)));
    const double decay = p.weight_decay;
    return {T(p.decoupled_weight_decay ? 1 - p.lr * decay : 1),
            T(p.decoupled_weight_decay ? 0 : decay),
            T(p.beta1),
            T(p.beta2),
            T(1 - p.beta1),
            T(1 - p.beta2),
            T(p.lr / bias_correction1),
            T(p.eps),
            T(bias_correction2_sqrt)};
  }
  // One element's step: w and its moments m, v updated in place from its gradient g.
  BAREYOLO_HOST_DEVICE void step(T& w, T& m, T& v, T g) const {
    if (l2 != 0) g += l2 * w;
    w *= shrink;
    m = beta1 * m + keep1 * g;
    v = beta2 * v + keep2 * g * g;
    w -= step_size * m / (::sqrt(v) / correction2 + eps);
  }
};

// The EMA's weights in T: the average keeps `decay` of itself and takes `keep` of the value.
template <class T>
struct EmaFactors {
  T decay, keep;

  static EmaFactors of(double decay) { return {T(decay), T(1 - decay)}; }
  BAREYOLO_HOST_DEVICE T blend(T average, T value) const { return decay * average + keep * value; }
};

// What clip_to_norm scales by; nothing is scaled when it is 1 or more.
BAREYOLO_HOST_DEVICE inline double clip_factor(double sum_of_squares, double max_norm) {
  return max_norm / (::sqrt(sum_of_squares) + 1e-6);
}

}  // namespace bareyolo::ops
