// kernels/cpu/optim.cpp — the optimizer's arithmetic over flat buffers (whole parameter
// arenas): SGD with Nesterov momentum and weight decay, Adam and AdamW, each element with its
// group's settings; the EMA of weights; and the two halves of gradient-norm clipping (sum of
// squares, scale to the norm), each element by kernels/optim_update.h's formulas, which the
// CUDA kernels share. Pointwise loops on the thread pool; the sum of squares
// reduces per chunk in double and combines the chunks in order, so it is the same for any
// thread count.
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cpu/loops.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/ops.h"
#include "kernels/optim_update.h"
#include "kernels/route.h"

namespace bareyolo::ops {

namespace {

// The checks every grouped update shares: the buffers' shapes, one group per element, and
// groups that exist.
template <class T>
Device check_update(const char* op, View<T> param, View<const uint8_t> group_of, int group_count) {
  cpu::require_same_shape(op, param, group_of);
  if (group_count < 1 || group_count > kMaxParameterGroups)
    throw std::invalid_argument(std::string(op) + ": " + std::to_string(group_count) +
                                " parameter groups; 1 to " + std::to_string(kMaxParameterGroups));
  return detail::common_device(op, param, group_of);
}

// A one-element view: the sum of squares that clipping passes from one op to the next.
template <class T>
void require_one_element(const char* op, View<T> v) {
  if (v.shape.numel() != 1)
    throw std::invalid_argument(std::string(op) + ": the sum of squares is " + v.shape.str() +
                                "; it must be one double");
}

}  // namespace

template <class T>
void sgd_step(View<T> param, View<const T> grad, View<T> velocity, View<const uint8_t> group_of,
              const SgdFactors<T>* groups, int group_count) {
  cpu::require_same_shape("sgd_step", param, grad);
  cpu::require_same_shape("sgd_step", param, velocity);
  check_update("sgd_step", param, group_of, group_count);
  BAREYOLO_ROUTE_TO_CUDA(sgd_step, detail::common_device("sgd_step", param, grad, velocity), param,
                         grad, velocity, group_of, groups, group_count);
  const std::vector<SgdFactors<T>> factors(groups, groups + group_count);
  cpu::parallel_over_elements(param.shape, [&](int64_t n, int64_t begin, int64_t end) {
    T* w = param.image(n);
    const T* g = grad.image(n);
    T* v = velocity.image(n);
    const uint8_t* group = group_of.image(n);
    for (int64_t i = begin; i < end; ++i) factors.at(group[i]).step(w[i], v[i], g[i]);
  });
}

template <class T>
void adam_step(View<T> param, View<const T> grad, View<T> exp_avg, View<T> exp_avg_sq,
               View<const uint8_t> group_of, const AdamFactors<T>* groups, int group_count) {
  cpu::require_same_shape("adam_step", param, grad);
  cpu::require_same_shape("adam_step", param, exp_avg);
  cpu::require_same_shape("adam_step", param, exp_avg_sq);
  check_update("adam_step", param, group_of, group_count);
  BAREYOLO_ROUTE_TO_CUDA(adam_step,
                         detail::common_device("adam_step", param, grad, exp_avg, exp_avg_sq),
                         param, grad, exp_avg, exp_avg_sq, group_of, groups, group_count);
  const std::vector<AdamFactors<T>> factors(groups, groups + group_count);
  cpu::parallel_over_elements(param.shape, [&](int64_t n, int64_t begin, int64_t end) {
    T* w = param.image(n);
    const T* g = grad.image(n);
    T* m = exp_avg.image(n);
    T* v = exp_avg_sq.image(n);
    const uint8_t* group = group_of.image(n);
    for (int64_t i = begin; i < end; ++i) factors.at(group[i]).step(w[i], m[i], v[i], g[i]);
  });
}

template <class T>
void ema_update(View<T> average, View<const T> value, const EmaFactors<T>* factors) {
  cpu::require_same_shape("ema_update", average, value);
  BAREYOLO_ROUTE_TO_CUDA(ema_update, detail::common_device("ema_update", average, value), average,
                         value, factors);
  const EmaFactors<T> ema = *factors;
  cpu::parallel_over_elements(average.shape, [&](int64_t n, int64_t begin, int64_t end) {
    T* a = average.image(n);
    const T* x = value.image(n);
    for (int64_t i = begin; i < end; ++i) a[i] = ema.blend(a[i], x[i]);
  });
}

template <class T>
void sum_of_squares(View<const T> x, View<double> result) {
  require_one_element("sum_of_squares", result);
  BAREYOLO_ROUTE_TO_CUDA(sum_of_squares, detail::common_device("sum_of_squares", x, result), x,
                         result);
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
  result.data[0] = total;
}

template <class T>
void clip_to_norm(View<T> x, View<const double> sum_of_squares, double max_norm) {
  require_one_element("clip_to_norm", sum_of_squares);
  BAREYOLO_ROUTE_TO_CUDA(clip_to_norm, detail::common_device("clip_to_norm", x, sum_of_squares), x,
                         sum_of_squares, max_norm);
  const double factor = clip_factor(sum_of_squares.data[0], max_norm);
  if (factor >= 1) return;
  const T f = T(factor);
  cpu::parallel_over_elements(x.shape, [&](int64_t n, int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) x.image(n)[i] *= f;
  });
}

#define BAREYOLO_INSTANTIATE_OPTIM(T)                                                       \
  template void sgd_step<T>(View<T>, View<const T>, View<T>, View<const uint8_t>,           \
                            const SgdFactors<T>*, int);                                     \
  template void adam_step<T>(View<T>, View<const T>, View<T>, View<T>, View<const uint8_t>, \
                             const AdamFactors<T>*, int);                                   \
  template void ema_update<T>(View<T>, View<const T>, const EmaFactors<T>*);                \
  template void sum_of_squares<T>(View<const T>, View<double>);                             \
  template void clip_to_norm<T>(View<T>, View<const double>, double);
BAREYOLO_INSTANTIATE_OPTIM(float)
BAREYOLO_INSTANTIATE_OPTIM(double)

}  // namespace bareyolo::ops
