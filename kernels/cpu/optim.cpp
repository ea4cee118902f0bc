// kernels/cpu/optim.cpp — the optimizer's arithmetic over flat buffers: SGD with Nesterov
// momentum and weight decay, AdamW, the EMA of weights, and the two halves of gradient-norm
// clipping (sum of squares, scale). Pointwise loops on the thread pool; the sum of squares
// reduces per chunk in double and combines the chunks in order, so it is the same for any
// thread count.
#include <cmath>
#include <vector>

#include "kernels/cpu/loops.h"
#include "kernels/ops.h"
#include "kernels/route.h"
#ifdef BAREYOLO_WITH_CUDA
#include "kernels/cuda/cuda_ops.h"
#endif

namespace bareyolo::ops {

template <class T>
void sgd_step(View<T> param, View<const T> grad, View<T> velocity, SgdParams p) {
  cpu::require_same_shape("sgd_step", param, grad);
  cpu::require_same_shape("sgd_step", param, velocity);
  BAREYOLO_ROUTE_TO_CUDA(sgd_step, detail::common_device("sgd_step", param, grad, velocity), param,
                         grad, velocity, p);
  const T lr = T(p.lr), momentum = T(p.momentum), decay = T(p.weight_decay);
  cpu::parallel_over_elements(param.shape, [&](int64_t n, int64_t begin, int64_t end) {
    T* w = param.image(n);
    const T* g = grad.image(n);
    T* v = velocity.image(n);
    for (int64_t i = begin; i < end; ++i) {
      const T step_grad = g[i] + decay * w[i];
      v[i] = momentum * v[i] + step_grad;
      w[i] -= lr * (p.nesterov ? step_grad + momentum * v[i] : v[i]);
    }
  });
}

template <class T>
void adamw_step(View<T> param, View<const T> grad, View<T> exp_avg, View<T> exp_avg_sq,
                AdamWParams p) {
  cpu::require_same_shape("adamw_step", param, grad);
  cpu::require_same_shape("adamw_step", param, exp_avg);
  cpu::require_same_shape("adamw_step", param, exp_avg_sq);
  BAREYOLO_REQUIRE_CPU(adamw_step,
                       detail::common_device("adamw_step", param, grad, exp_avg, exp_avg_sq));
  // The step-dependent factors in double, as PyTorch computes them (Python floats).
  const double bias_correction1 = 1 - std::pow(p.beta1, double(p.step));
  const double bias_correction2_sqrt = std::sqrt(1 - std::pow(p.beta2, double(p.step)));
  const T decay_factor = T(1 - p.lr * p.weight_decay), beta1 = T(p.beta1), beta2 = T(p.beta2);
  const T step_size = T(p.lr / bias_correction1), eps = T(p.eps);
  const T correction2 = T(bias_correction2_sqrt);
  cpu::parallel_over_elements(param.shape, [&](int64_t n, int64_t begin, int64_t end) {
    T* w = param.image(n);
    const T* g = grad.image(n);
    T* m = exp_avg.image(n);
    T* v = exp_avg_sq.image(n);
    for (int64_t i = begin; i < end; ++i) {
      w[i] *= decay_factor;
      m[i] = beta1 * m[i] + (1 - beta1) * g[i];
      v[i] = beta2 * v[i] + (1 - beta2) * g[i] * g[i];
      w[i] -= step_size * m[i] / (std::sqrt(v[i]) / correction2 + eps);
    }
  });
}

template <class T>
void ema_update(View<T> average, View<const T> value, double decay) {
  cpu::require_same_shape("ema_update", average, value);
  BAREYOLO_ROUTE_TO_CUDA(ema_update, detail::common_device("ema_update", average, value), average,
                         value, decay);
  const T d = T(decay), keep = T(1 - decay);
  cpu::parallel_over_elements(average.shape, [&](int64_t n, int64_t begin, int64_t end) {
    T* a = average.image(n);
    const T* x = value.image(n);
    for (int64_t i = begin; i < end; ++i) a[i] = d * a[i] + keep * x[i];
  });
}

template <class T>
double sum_of_squares(View<const T> x) {
  BAREYOLO_ROUTE_TO_CUDA(sum_of_squares, x.device, x);
  const int64_t grain = cpu::kElementGrain;  // one partial sum per chunk of the loop below
  const int64_t per_image = x.shape.image_numel();
  const int64_t chunks_per_image = (per_image + grain - 1) / grain;
  std::vector<double> partial(size_t(x.shape.n * chunks_per_image), 0.0);
  cpu::parallel_over_elements(x.shape, [&](int64_t n, int64_t begin, int64_t end) {
    double sum = 0;
    for (int64_t i = begin; i < end; ++i) sum += double(x.image(n)[i]) * double(x.image(n)[i]);
    partial[size_t(n * chunks_per_image + begin / grain)] = sum;
  });
  double total = 0;
  for (double s : partial) total += s;
  return total;
}

template <class T>
void scale_inplace(View<T> x, double factor) {
  BAREYOLO_ROUTE_TO_CUDA(scale_inplace, x.device, x, factor);
  const T f = T(factor);
  cpu::parallel_over_elements(x.shape, [&](int64_t n, int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) x.image(n)[i] *= f;
  });
}

#define BAREYOLO_INSTANTIATE_OPTIM(T)                                                 \
  template void sgd_step<T>(View<T>, View<const T>, View<T>, SgdParams);              \
  template void adamw_step<T>(View<T>, View<const T>, View<T>, View<T>, AdamWParams); \
  template void ema_update<T>(View<T>, View<const T>, double);                        \
  template double sum_of_squares<T>(View<const T>);                                   \
  template void scale_inplace<T>(View<T>, double);
BAREYOLO_INSTANTIATE_OPTIM(float)
BAREYOLO_INSTANTIATE_OPTIM(double)

}  // namespace bareyolo::ops
