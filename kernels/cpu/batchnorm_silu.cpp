// kernels/cpu/batchnorm_silu.cpp — the fused BatchNorm + SiLU ops (kernels/ops.h) on the CPU,
// written as their definition: the composition of the ops they fuse. Forward: batchnorm_apply
// into `bn`, then silu_forward. Backward: silu_backward gives the gradient SiLU passes to BN
// (dbn), in a buffer of this thread's, then the BatchNorm backward op of the same name runs on
// it. The CUDA kernels (kernels/cuda/batchnorm.cu) do each in one pass without storing dbn, and
// are tested against these.
#include <vector>

#include "kernels/cpu/loops.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/ops.h"
#include "kernels/route.h"

namespace bareyolo::ops {

namespace {

// dbn = silu_backward(bn, dy) in a dense buffer of this thread's, reused across calls.
template <class T>
View<const T> silu_gradient(View<const T> bn, View<const T> dy) {
  thread_local std::vector<T> buffer;
  buffer.assign(static_cast<size_t>(bn.shape.numel()), T(0));  // silu_backward accumulates
  const View<T> dbn = dense_view(buffer.data(), bn.shape, bn.device);
  silu_backward<T>(bn, dy, dbn);
  return dbn;
}

template <class T>
Device check_fused(const char* op, View<const T> x, View<const T> bn, View<const T> dy) {
  cpu::require_same_shape(op, x, bn);
  cpu::require_same_shape(op, x, dy);
  return detail::common_device(op, x, bn, dy);
}

}  // namespace

template <class T>
void batchnorm_silu_apply(View<const T> x, const T* mean, const T* invstd, const T* gamma,
                          const T* beta, View<T> bn, View<T> y) {
  cpu::require_same_shape("batchnorm_silu_apply", x, bn);
  cpu::require_same_shape("batchnorm_silu_apply", x, y);
  BAREYOLO_ROUTE_TO_CUDA(batchnorm_silu_apply,
                         detail::common_device("batchnorm_silu_apply", x, bn, y), x, mean, invstd,
                         gamma, beta, bn, y);
  batchnorm_apply<T>(x, mean, invstd, gamma, beta, bn);
  silu_forward<T>(bn, y);
}

template <class T>
void batchnorm_silu_backward_reduce(View<const T> x, View<const T> bn, View<const T> dy,
                                    const T* mean, const T* invstd, T* sum_dy, T* sum_dy_xhat) {
  const Device device = check_fused("batchnorm_silu_backward_reduce", x, bn, dy);
  BAREYOLO_ROUTE_TO_CUDA(batchnorm_silu_backward_reduce, device, x, bn, dy, mean, invstd, sum_dy,
                         sum_dy_xhat);
  batchnorm_backward_reduce<T>(x, silu_gradient(bn, dy), mean, invstd, sum_dy, sum_dy_xhat);
}

template <class T>
void batchnorm_silu_backward_apply(View<const T> x, View<const T> bn, View<const T> dy,
                                   const T* mean, const T* invstd, const T* gamma, const T* sum_dy,
                                   const T* sum_dy_xhat, int64_t count, View<T> dx) {
  const Device device = check_fused("batchnorm_silu_backward_apply", x, bn, dy);
  BAREYOLO_ROUTE_TO_CUDA(batchnorm_silu_backward_apply, device, x, bn, dy, mean, invstd, gamma,
                         sum_dy, sum_dy_xhat, count, dx);
  batchnorm_backward_apply<T>(x, silu_gradient(bn, dy), mean, invstd, gamma, sum_dy, sum_dy_xhat,
                              count, dx);
}

template <class T>
void batchnorm_silu_backward_train(View<const T> x, View<const T> bn, View<const T> dy,
                                   const T* gamma, const T* save_mean, const T* save_invstd,
                                   View<T> dx, T* dgamma, T* dbeta) {
  const Device device = check_fused("batchnorm_silu_backward_train", x, bn, dy);
  BAREYOLO_ROUTE_TO_CUDA(batchnorm_silu_backward_train, device, x, bn, dy, gamma, save_mean,
                         save_invstd, dx, dgamma, dbeta);
  batchnorm_backward_train<T>(x, silu_gradient(bn, dy), gamma, save_mean, save_invstd, dx, dgamma,
                              dbeta);
}

template <class T>
void batchnorm_silu_backward_eval(View<const T> x, View<const T> bn, View<const T> dy,
                                  const T* gamma, const T* running_mean, const T* running_var,
                                  BatchNormParams p, View<T> dx, T* dgamma, T* dbeta) {
  const Device device = check_fused("batchnorm_silu_backward_eval", x, bn, dy);
  BAREYOLO_ROUTE_TO_CUDA(batchnorm_silu_backward_eval, device, x, bn, dy, gamma, running_mean,
                         running_var, p, dx, dgamma, dbeta);
  batchnorm_backward_eval<T>(x, silu_gradient(bn, dy), gamma, running_mean, running_var, p, dx,
                             dgamma, dbeta);
}

#define BAREYOLO_INSTANTIATE_BATCHNORM_SILU(T)                                                     \
  template void batchnorm_silu_apply<T>(View<const T>, const T*, const T*, const T*, const T*,     \
                                        View<T>, View<T>);                                         \
  template void batchnorm_silu_backward_reduce<T>(View<const T>, View<const T>, View<const T>,     \
                                                  const T*, const T*, T*, T*);                     \
  template void batchnorm_silu_backward_apply<T>(View<const T>, View<const T>, View<const T>,      \
                                                 const T*, const T*, const T*, const T*, const T*, \
                                                 int64_t, View<T>);                                \
  template void batchnorm_silu_backward_train<T>(View<const T>, View<const T>, View<const T>,      \
                                                 const T*, const T*, const T*, View<T>, T*, T*);   \
  template void batchnorm_silu_backward_eval<T>(View<const T>, View<const T>, View<const T>,       \
                                                const T*, const T*, const T*, BatchNormParams,     \
                                                View<T>, T*, T*);
BAREYOLO_INSTANTIATE_BATCHNORM_SILU(float)
BAREYOLO_INSTANTIATE_BATCHNORM_SILU(double)

}  // namespace bareyolo::ops
