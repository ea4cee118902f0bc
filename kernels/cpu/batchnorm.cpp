// kernels/cpu/batchnorm.cpp — batch normalisation on the CPU: the four phase ops that
// SyncBatchNorm interleaves with its all-reduces, and the train/eval ops built from them.
//
// Per channel c, over the count = n*h*w elements of the batch:
//   mean = sum(x) / count,  M2 = sum((x - mean)^2),  invstd = 1 / sqrt(M2 / count + eps)
//   (invstd and the running statistics' update: kernels/batchnorm_statistics.h)
//   xhat = (x - mean) * invstd,  y = xhat * gamma + beta
//   dx  += gamma * invstd * (dy - sum(dy) / count - xhat * sum(dy * xhat) / count)
//   dgamma += sum(dy * xhat),  dbeta += sum(dy)
// The moments take two passes per plane (mean first, then squared deviations from it) instead
// of sum(x^2) - count * mean^2, which cancels catastrophically when |mean| >> std, and the
// planes' are merged exactly (batchnorm_channel.h). The
// per-channel pieces (double lane sums, one task per channel, the per-plane formulas) live
// in kernels/cpu/batchnorm_channel.h, shared with the fused BatchNorm + SiLU ops.
//
// Views on a GPU go to kernels/cuda/batchnorm.cu after the shape checks here; there every
// per-channel pointer is device memory.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/batchnorm_statistics.h"
#include "kernels/cpu/batchnorm_channel.h"
#include "kernels/cpu/widened.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/ops.h"
#include "kernels/route.h"

namespace bareyolo::ops {

namespace {

using cpu::batchnorm::BackwardApply;
using cpu::batchnorm::BackwardSums;
using cpu::batchnorm::channel_moments;
using cpu::batchnorm::EvalBackwardApply;
using cpu::batchnorm::for_each_channel;
using cpu::batchnorm::Moments;
using cpu::batchnorm::Normalize;
using cpu::batchnorm::plane_moments;
using cpu::batchnorm::values_per_channel;

void require_same_shape(const char* op, const char* name, Shape4 shape, Shape4 x_shape) {
  if (!(shape == x_shape))
    throw std::invalid_argument(std::string(op) + ": " + name + " has shape " + shape.str() +
                                " but x has shape " + x_shape.str() + "; they must match");
}

// Calls visit(plane of views[0], plane of views[1], ...) for channel c of each of the
// `batch` images, in image order. The views may have different batch strides.
template <class Visit, class... Views>
void for_each_plane(int64_t batch, int64_t c, Visit visit, const Views&... views) {
  for (int64_t i = 0; i < batch; ++i) visit(views.channel(i, c)...);
}

// 1 / sqrt(variance + eps) for each channel.
template <class T>
std::vector<T> inverse_std(const T* variance, int64_t channels, double eps) {
  std::vector<T> invstd(static_cast<size_t>(channels));
  for (int64_t c = 0; c < channels; ++c)
    invstd[c] = static_cast<T>(batchnorm::inverse_std(variance[c], eps));
  return invstd;
}

// backward_sums over channel c of x and dy.
template <class T>
BackwardSums<T> channel_backward_sums(View<const T> x, View<const T> dy, int64_t c, T mean,
                                      T invstd) {
  return cpu::batchnorm::backward_sums(
      x.shape.n, x.shape.plane(), mean, invstd, [&](int64_t i) { return x.channel(i, c); },
      [&](int64_t i) { return dy.channel(i, c); });
}

}  // namespace

template <class T>
void batchnorm_moments(View<const T> x, ComputeType<T>* mean, ComputeType<T>* m2) {
  values_per_channel("batchnorm_moments", x.shape, 1);
  BAREYOLO_ROUTE_TO_CUDA(batchnorm_moments, x.device, x, mean, m2);
  const int64_t plane = x.shape.plane();
  for_each_channel(x.shape.c, [&](int64_t c) {
    const Moments total = channel_moments(
        x.shape.n, [&](int64_t i) { return plane_moments(x.channel(i, c), plane); });
    mean[c] = static_cast<T>(total.mean);
    m2[c] = static_cast<T>(total.m2);
  });
}

template <class T>
void batchnorm_apply(View<const T> x, const ComputeType<T>* mean, const ComputeType<T>* invstd,
                     const ComputeType<T>* gamma, const ComputeType<T>* beta, View<T> y) {
  const Device device = detail::common_device("batchnorm_apply", x, y);
  require_same_shape("batchnorm_apply", "y", y.shape, x.shape);
  BAREYOLO_ROUTE_TO_CUDA(batchnorm_apply, device, x, mean, invstd, gamma, beta, y);
  const int64_t plane = x.shape.plane();
  for_each_channel(x.shape.c, [&](int64_t c) {
    const Normalize<T> normalize(mean[c], invstd[c], gamma[c], beta[c]);
    for_each_plane(
        x.shape.n, c, [&](const T* xs, T* ys) { normalize(xs, ys, plane); }, x, y);
  });
}

template <class T>
void batchnorm_backward_reduce(View<const T> x, View<const T> dy, const ComputeType<T>* mean,
                               const ComputeType<T>* invstd, ComputeType<T>* sum_dy,
                               ComputeType<T>* sum_dy_xhat) {
  const Device device = detail::common_device("batchnorm_backward_reduce", x, dy);
  require_same_shape("batchnorm_backward_reduce", "dy", dy.shape, x.shape);
  BAREYOLO_ROUTE_TO_CUDA(batchnorm_backward_reduce, device, x, dy, mean, invstd, sum_dy,
                         sum_dy_xhat);
  for_each_channel(x.shape.c, [&](int64_t c) {
    const BackwardSums<T> sums = channel_backward_sums(x, dy, c, mean[c], invstd[c]);
    sum_dy[c] = sums.dy;
    sum_dy_xhat[c] = sums.dy_xhat;
  });
}

template <class T>
void batchnorm_backward_apply(View<const T> x, View<const T> dy, const ComputeType<T>* mean,
                              const ComputeType<T>* invstd, const ComputeType<T>* gamma,
                              const ComputeType<T>* sum_dy, const ComputeType<T>* sum_dy_xhat,
                              int64_t count, View<T> dx) {
  const Device device = detail::common_device("batchnorm_backward_apply", x, dy, dx);
  require_same_shape("batchnorm_backward_apply", "dy", dy.shape, x.shape);
  require_same_shape("batchnorm_backward_apply", "dx", dx.shape, x.shape);
  BAREYOLO_ROUTE_TO_CUDA(batchnorm_backward_apply, device, x, dy, mean, invstd, gamma, sum_dy,
                         sum_dy_xhat, count, dx);
  const int64_t plane = x.shape.plane();
  for_each_channel(x.shape.c, [&](int64_t c) {
    const BackwardApply<T> apply(gamma[c], invstd[c], mean[c], {sum_dy[c], sum_dy_xhat[c]}, count);
    for_each_plane(
        x.shape.n, c, [&](const T* xs, const T* dys, T* dxs) { apply.add(xs, dys, dxs, plane); }, x,
        dy, dx);
  });
}

template <class T>
void batchnorm_forward_train(View<const T> x, const ComputeType<T>* gamma,
                             const ComputeType<T>* beta, BatchNormParams p,
                             ComputeType<T>* running_mean, ComputeType<T>* running_var,
                             ComputeType<T>* save_mean, ComputeType<T>* save_invstd, View<T> y) {
  const Device device = detail::common_device("batchnorm_forward_train", x, y);
  values_per_channel("batchnorm_forward_train", x.shape, 2);  // see train_statistics
  require_same_shape("batchnorm_forward_train", "y", y.shape, x.shape);
  BAREYOLO_ROUTE_TO_CUDA(batchnorm_forward_train, device, x, gamma, beta, p, running_mean,
                         running_var, save_mean, save_invstd, y);
  batchnorm_train_statistics(x, p, running_mean, running_var, save_mean, save_invstd);
  batchnorm_apply(x, save_mean, save_invstd, gamma, beta, y);
}

template <class T>
void batchnorm_train_statistics(View<const T> x, BatchNormParams p, ComputeType<T>* running_mean,
                                ComputeType<T>* running_var, ComputeType<T>* save_mean,
                                ComputeType<T>* save_invstd) {
  // At least two values per channel: the unbiased variance divides by count - 1.
  const int64_t count = values_per_channel("batchnorm_train_statistics", x.shape, 2);
  BAREYOLO_ROUTE_TO_CUDA(batchnorm_train_statistics, x.device, x, p, running_mean, running_var,
                         save_mean, save_invstd);
  std::vector<T> m2(static_cast<size_t>(x.shape.c));
  batchnorm_moments(x, save_mean, m2.data());
  batchnorm_statistics_from_moments(save_mean, m2.data(), x.shape.c, count, p, x.device,
                                    running_mean, running_var, save_mean, save_invstd);
}

template <class T>
void batchnorm_statistics_from_moments(const T* mean, const T* m2, int64_t channels, int64_t count,
                                       BatchNormParams p, Device device, T* running_mean,
                                       T* running_var, T* save_mean, T* save_invstd) {
  if (count < 2)
    throw std::invalid_argument("batchnorm_statistics_from_moments: " + std::to_string(count) +
                                " values per channel; at least 2 are needed");
  BAREYOLO_ROUTE_TO_CUDA(batchnorm_statistics_from_moments, device, mean, m2, channels, count, p,
                         device.index, running_mean, running_var, save_mean, save_invstd);
  for (int64_t c = 0; c < channels; ++c) {
    const batchnorm::ChannelStatistics statistics =
        batchnorm::channel_statistics(mean[c], m2[c], count, running_mean[c], running_var[c], p);
    save_mean[c] = mean[c];
    save_invstd[c] = static_cast<T>(statistics.invstd);
    running_mean[c] = static_cast<T>(statistics.running_mean);
    running_var[c] = static_cast<T>(statistics.running_var);
  }
}

template <class T>
void batchnorm_running_inverse_std(const T* running_var, int64_t channels, double eps,
                                   Device device, T* invstd) {
  BAREYOLO_ROUTE_TO_CUDA(batchnorm_running_inverse_std, device, running_var, channels, eps,
                         device.index, invstd);
  const std::vector<T> values = inverse_std(running_var, channels, eps);
  std::copy(values.begin(), values.end(), invstd);
}

template <class T>
void batchnorm_backward_train(View<const T> x, View<const T> dy, const ComputeType<T>* gamma,
                              const ComputeType<T>* save_mean, const ComputeType<T>* save_invstd,
                              View<T> dx, ComputeType<T>* dgamma, ComputeType<T>* dbeta) {
  const Device device = detail::common_device("batchnorm_backward_train", x, dy, dx);
  const int64_t count = values_per_channel("batchnorm_backward_train", x.shape, 1);
  require_same_shape("batchnorm_backward_train", "dy", dy.shape, x.shape);
  require_same_shape("batchnorm_backward_train", "dx", dx.shape, x.shape);
  BAREYOLO_ROUTE_TO_CUDA(batchnorm_backward_train, device, x, dy, gamma, save_mean, save_invstd, dx,
                         dgamma, dbeta);
  // The reduce and apply phases channel by channel in one task: the channel's planes are
  // still in cache for the second pass.
  const int64_t plane = x.shape.plane();
  for_each_channel(x.shape.c, [&](int64_t c) {
    const BackwardSums<T> sums = channel_backward_sums(x, dy, c, save_mean[c], save_invstd[c]);
    const BackwardApply<T> apply(gamma[c], save_invstd[c], save_mean[c], sums, count);
    for_each_plane(
        x.shape.n, c, [&](const T* xs, const T* dys, T* dxs) { apply.add(xs, dys, dxs, plane); }, x,
        dy, dx);
    dgamma[c] += sums.dy_xhat;
    dbeta[c] += sums.dy;
  });
}

template <class T>
void batchnorm_forward_eval(View<const T> x, const ComputeType<T>* gamma,
                            const ComputeType<T>* beta, const ComputeType<T>* running_mean,
                            const ComputeType<T>* running_var, BatchNormParams p, View<T> y) {
  const Device device = detail::common_device("batchnorm_forward_eval", x, y);
  require_same_shape("batchnorm_forward_eval", "y", y.shape, x.shape);
  BAREYOLO_ROUTE_TO_CUDA(batchnorm_forward_eval, device, x, gamma, beta, running_mean, running_var,
                         p, y);
  const std::vector<T> invstd = inverse_std(running_var, x.shape.c, p.eps);
  batchnorm_apply(x, running_mean, invstd.data(), gamma, beta, y);
}

template <class T>
void batchnorm_backward_eval(View<const T> x, View<const T> dy, const ComputeType<T>* gamma,
                             const ComputeType<T>* running_mean, const ComputeType<T>* running_var,
                             BatchNormParams p, View<T> dx, ComputeType<T>* dgamma,
                             ComputeType<T>* dbeta) {
  const Device device = detail::common_device("batchnorm_backward_eval", x, dy, dx);
  require_same_shape("batchnorm_backward_eval", "dy", dy.shape, x.shape);
  require_same_shape("batchnorm_backward_eval", "dx", dx.shape, x.shape);
  BAREYOLO_ROUTE_TO_CUDA(batchnorm_backward_eval, device, x, dy, gamma, running_mean, running_var,
                         p, dx, dgamma, dbeta);
  const int64_t channels = x.shape.c, plane = x.shape.plane();
  const std::vector<T> invstd = inverse_std(running_var, channels, p.eps);
  std::vector<T> sum_dy(static_cast<size_t>(channels)), sum_dy_xhat(sum_dy.size());
  batchnorm_backward_reduce(x, dy, running_mean, invstd.data(), sum_dy.data(), sum_dy_xhat.data());
  for_each_channel(channels, [&](int64_t c) {
    const EvalBackwardApply<T> apply(gamma[c], invstd[c]);
    for_each_plane(
        x.shape.n, c, [&](const T* dys, T* dxs) { apply.add(dys, dxs, plane); }, dy, dx);
    dgamma[c] += sum_dy_xhat[c];
    dbeta[c] += sum_dy[c];
  });
}

#define BAREYOLO_INSTANTIATE_BATCHNORM(T)                                                          \
  template void batchnorm_moments<T>(View<const T>, ComputeType<T>*, ComputeType<T>*);             \
  template void batchnorm_apply<T>(View<const T>, const ComputeType<T>*, const ComputeType<T>*,    \
                                   const ComputeType<T>*, const ComputeType<T>*, View<T>);         \
  template void batchnorm_backward_reduce<T>(View<const T>, View<const T>, const ComputeType<T>*,  \
                                             const ComputeType<T>*, ComputeType<T>*,               \
                                             ComputeType<T>*);                                     \
  template void batchnorm_backward_apply<T>(                                                       \
      View<const T>, View<const T>, const ComputeType<T>*, const ComputeType<T>*,                  \
      const ComputeType<T>*, const ComputeType<T>*, const ComputeType<T>*, int64_t, View<T>);      \
  template void batchnorm_forward_train<T>(                                                        \
      View<const T>, const ComputeType<T>*, const ComputeType<T>*, BatchNormParams,                \
      ComputeType<T>*, ComputeType<T>*, ComputeType<T>*, ComputeType<T>*, View<T>);                \
  template void batchnorm_backward_train<T>(View<const T>, View<const T>, const ComputeType<T>*,   \
                                            const ComputeType<T>*, const ComputeType<T>*, View<T>, \
                                            ComputeType<T>*, ComputeType<T>*);                     \
  template void batchnorm_forward_eval<T>(View<const T>, const ComputeType<T>*,                    \
                                          const ComputeType<T>*, const ComputeType<T>*,            \
                                          const ComputeType<T>*, BatchNormParams, View<T>);        \
  template void batchnorm_backward_eval<T>(                                                        \
      View<const T>, View<const T>, const ComputeType<T>*, const ComputeType<T>*,                  \
      const ComputeType<T>*, BatchNormParams, View<T>, ComputeType<T>*, ComputeType<T>*);          \
  template void batchnorm_train_statistics<T>(View<const T>, BatchNormParams, ComputeType<T>*,     \
                                              ComputeType<T>*, ComputeType<T>*, ComputeType<T>*);  \
  template void batchnorm_statistics_from_moments<T>(const T*, const T*, int64_t, int64_t,         \
                                                     BatchNormParams, Device, T*, T*, T*, T*);     \
  template void batchnorm_running_inverse_std<T>(const T*, int64_t, double, Device, T*);
BAREYOLO_INSTANTIATE_BATCHNORM(float)
BAREYOLO_INSTANTIATE_BATCHNORM(double)

// ---- bf16 storage (mixed precision): the float ops on widened copies (kernels/cpu/widened.h);
// every per-channel value is float.

template <>
void batchnorm_moments<bf16>(View<const bf16> x, float* mean, float* m2) {
  values_per_channel("batchnorm_moments", x.shape, 1);
  BAREYOLO_ROUTE_FLOAT_OP_TO_CUDA(batchnorm_moments, x.device, x, mean, m2);
  batchnorm_moments<float>(cpu::Widened(x), mean, m2);
}

template <>
void batchnorm_apply<bf16>(View<const bf16> x, const float* mean, const float* invstd,
                           const float* gamma, const float* beta, View<bf16> y) {
  const Device device = detail::common_device("batchnorm_apply", x, y);
  require_same_shape("batchnorm_apply", "y", y.shape, x.shape);
  BAREYOLO_ROUTE_FLOAT_OP_TO_CUDA(batchnorm_apply, device, x, mean, invstd, gamma, beta, y);
  cpu::Widened out(y.shape);
  batchnorm_apply<float>(cpu::Widened(x), mean, invstd, gamma, beta, out);
  out.store(y);
}

template <>
void batchnorm_backward_reduce<bf16>(View<const bf16> x, View<const bf16> dy, const float* mean,
                                     const float* invstd, float* sum_dy, float* sum_dy_xhat) {
  const Device device = detail::common_device("batchnorm_backward_reduce", x, dy);
  require_same_shape("batchnorm_backward_reduce", "dy", dy.shape, x.shape);
  BAREYOLO_ROUTE_FLOAT_OP_TO_CUDA(batchnorm_backward_reduce, device, x, dy, mean, invstd, sum_dy,
                                  sum_dy_xhat);
  batchnorm_backward_reduce<float>(cpu::Widened(x), cpu::Widened(dy), mean, invstd, sum_dy,
                                   sum_dy_xhat);
}

template <>
void batchnorm_backward_apply<bf16>(View<const bf16> x, View<const bf16> dy, const float* mean,
                                    const float* invstd, const float* gamma, const float* sum_dy,
                                    const float* sum_dy_xhat, int64_t count, View<bf16> dx) {
  const Device device = detail::common_device("batchnorm_backward_apply", x, dy, dx);
  require_same_shape("batchnorm_backward_apply", "dy", dy.shape, x.shape);
  require_same_shape("batchnorm_backward_apply", "dx", dx.shape, x.shape);
  BAREYOLO_ROUTE_FLOAT_OP_TO_CUDA(batchnorm_backward_apply, device, x, dy, mean, invstd, gamma,
                                  sum_dy, sum_dy_xhat, count, dx);
  cpu::Widened dx_float(dx);
  batchnorm_backward_apply<float>(cpu::Widened(x), cpu::Widened(dy), mean, invstd, gamma, sum_dy,
                                  sum_dy_xhat, count, dx_float);
  dx_float.store(dx);
}

template <>
void batchnorm_forward_train<bf16>(View<const bf16> x, const float* gamma, const float* beta,
                                   BatchNormParams p, float* running_mean, float* running_var,
                                   float* save_mean, float* save_invstd, View<bf16> y) {
  const Device device = detail::common_device("batchnorm_forward_train", x, y);
  values_per_channel("batchnorm_forward_train", x.shape, 2);
  require_same_shape("batchnorm_forward_train", "y", y.shape, x.shape);
  BAREYOLO_ROUTE_FLOAT_OP_TO_CUDA(batchnorm_forward_train, device, x, gamma, beta, p, running_mean,
                                  running_var, save_mean, save_invstd, y);
  cpu::Widened out(y.shape);
  batchnorm_forward_train<float>(cpu::Widened(x), gamma, beta, p, running_mean, running_var,
                                 save_mean, save_invstd, out);
  out.store(y);
}

template <>
void batchnorm_train_statistics<bf16>(View<const bf16> x, BatchNormParams p, float* running_mean,
                                      float* running_var, float* save_mean, float* save_invstd) {
  values_per_channel("batchnorm_train_statistics", x.shape, 2);
  BAREYOLO_ROUTE_FLOAT_OP_TO_CUDA(batchnorm_train_statistics, x.device, x, p, running_mean,
                                  running_var, save_mean, save_invstd);
  batchnorm_train_statistics<float>(cpu::Widened(x), p, running_mean, running_var, save_mean,
                                    save_invstd);
}

template <>
void batchnorm_backward_train<bf16>(View<const bf16> x, View<const bf16> dy, const float* gamma,
                                    const float* save_mean, const float* save_invstd, View<bf16> dx,
                                    float* dgamma, float* dbeta) {
  const Device device = detail::common_device("batchnorm_backward_train", x, dy, dx);
  values_per_channel("batchnorm_backward_train", x.shape, 1);
  require_same_shape("batchnorm_backward_train", "dy", dy.shape, x.shape);
  require_same_shape("batchnorm_backward_train", "dx", dx.shape, x.shape);
  BAREYOLO_ROUTE_FLOAT_OP_TO_CUDA(batchnorm_backward_train, device, x, dy, gamma, save_mean,
                                  save_invstd, dx, dgamma, dbeta);
  cpu::Widened dx_float(dx);
  batchnorm_backward_train<float>(cpu::Widened(x), cpu::Widened(dy), gamma, save_mean, save_invstd,
                                  dx_float, dgamma, dbeta);
  dx_float.store(dx);
}

template <>
void batchnorm_forward_eval<bf16>(View<const bf16> x, const float* gamma, const float* beta,
                                  const float* running_mean, const float* running_var,
                                  BatchNormParams p, View<bf16> y) {
  const Device device = detail::common_device("batchnorm_forward_eval", x, y);
  require_same_shape("batchnorm_forward_eval", "y", y.shape, x.shape);
  BAREYOLO_ROUTE_FLOAT_OP_TO_CUDA(batchnorm_forward_eval, device, x, gamma, beta, running_mean,
                                  running_var, p, y);
  cpu::Widened out(y.shape);
  batchnorm_forward_eval<float>(cpu::Widened(x), gamma, beta, running_mean, running_var, p, out);
  out.store(y);
}

template <>
void batchnorm_backward_eval<bf16>(View<const bf16> x, View<const bf16> dy, const float* gamma,
                                   const float* running_mean, const float* running_var,
                                   BatchNormParams p, View<bf16> dx, float* dgamma, float* dbeta) {
  const Device device = detail::common_device("batchnorm_backward_eval", x, dy, dx);
  require_same_shape("batchnorm_backward_eval", "dy", dy.shape, x.shape);
  require_same_shape("batchnorm_backward_eval", "dx", dx.shape, x.shape);
  BAREYOLO_ROUTE_FLOAT_OP_TO_CUDA(batchnorm_backward_eval, device, x, dy, gamma, running_mean,
                                  running_var, p, dx, dgamma, dbeta);
  cpu::Widened dx_float(dx);
  batchnorm_backward_eval<float>(cpu::Widened(x), cpu::Widened(dy), gamma, running_mean,
                                 running_var, p, dx_float, dgamma, dbeta);
  dx_float.store(dx);
}

}  // namespace bareyolo::ops
