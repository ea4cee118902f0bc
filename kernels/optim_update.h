// kernels/optim_update.h — the per-element arithmetic of the optimizer ops (kernels/ops.h), written
// once for the CPU loops (kernels/cpu/optim.cpp) and the CUDA kernels (kernels/cuda/optim.cu):
//   SGD    g = grad + weight_decay * param;  velocity = momentum * velocity + g
//          param -= lr * (nesterov ? g + momentum * velocity : velocity)
//   EMA    average = decay * average + (1 - decay) * value
//   clip   factor = max_norm / (sqrt(sum of squares) + 1e-6), applied when below 1 (PyTorch's
//          clip_grad_norm_)
// The settings arrive in double and are rounded once to the parameters' type T, as both devices
// did; each element is then updated in T.
#pragma once

#include <math.h>

#include "kernels/ops.h"   // SgdParams
#include "kernels/view.h"  // BAREYOLO_HOST_DEVICE

namespace bareyolo::ops {

// One parameter group's SGD settings in T.
template <class T>
struct SgdFactors {
  T lr = 0, momentum = 0, decay = 0;
  bool nesterov = true;

  static SgdFactors of(const SgdParams& p) {
    return {T(p.lr), T(p.momentum), T(p.weight_decay), p.nesterov};
  }
  // One element's step: w and v updated in place from its gradient g.
  BAREYOLO_HOST_DEVICE void step(T& w, T& v, T g) const {
    const T step_grad = g + decay * w;
    v = momentum * v + step_grad;
    w -= lr * (nesterov ? step_grad + momentum * v : v);
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
