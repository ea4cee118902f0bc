// kernels/cpu/batchnorm_silu.cpp — the fused BatchNorm + SiLU ops (kernels/ops.h) on the CPU.
//
// Each op is defined as the composition of the ops it fuses (ops.h; the backward ops write
// dx, as the composition adding into a zeroed dx would) and gives the same bits
// (tests/unit/batchnorm.cpp checks it): the same per-plane formulas and double lane sums
// (kernels/cpu/batchnorm_channel.h) and the same SiLU formulas (kernels/activation.h, and the
// 8-lane forms of kernels/cpu/activation_spans.h), in the same order. What changes is where
// the data lives. The composition makes whole-tensor passes: forward writes bn, then reads it
// back from memory for SiLU; backward writes SiLU's gradient dbn for the whole batch (after
// zeroing it), then reads it twice, in BN's reduce pass and again in its apply pass. Here
// every op runs channel by channel, one task each (image order inside, so the bits do not
// depend on the thread count), and bn is never stored: each pass normalises x again and keeps
// bn in registers (8 values at a time with AVX2), never in a buffer:
//   apply           per plane: y = SiLU(bn) in one pass (normalising into y, then SiLU in
//                   place, took 1.3-1.4x as long);
//   backward train  per channel: dbn of its planes written into dx, their sums, then dx
//                   written over dbn while the channel is still in cache (the ops' write
//                   contract lets dx be the workspace; a thread buffer for dbn, then dx
//                   written from it, took 1.15-1.2x as long);
//   backward reduce and apply (SyncBatchNorm's two phases, an all-reduce between them): the
//                   same two passes, each over every channel: reduce leaves dbn in dx, the
//                   phases' shared workspace (ops.h), and takes its sums; apply writes dx
//                   over it. (Computing dbn again in apply instead, as the GPU does, cost
//                   an exp and a division per value: the phases took 1.5-1.7x the one-call op.)
//   backward eval   like train, with the running statistics.
// The CUDA kernels (kernels/cuda/batchnorm.cu) do each in one pass without storing bn or dbn,
// and are tested against these.
#include <vector>

#include "kernels/activation.h"
#include "kernels/cpu/activation_spans.h"
#include "kernels/cpu/batchnorm_channel.h"
#include "kernels/cpu/loops.h"
#include "kernels/cpu/widened.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/ops.h"
#include "kernels/route.h"

namespace bareyolo::ops {

namespace {

using cpu::batchnorm::BackwardApply;
using cpu::batchnorm::BackwardSums;
using cpu::batchnorm::EvalBackwardApply;
using cpu::batchnorm::for_each_channel;
using cpu::batchnorm::Normalize;
using cpu::batchnorm::values_per_channel;

template <class T>
Device check_fused(const char* op, View<const T> x, View<const T> dy) {
  cpu::require_same_shape(op, x, dy);
  return detail::common_device(op, x, dy);
}

// The two passes over one plane of a channel, with bn = normalize(x) kept in registers: y =
// SiLU(bn), and dbn = SiLU's gradient at bn times dy, written. The formulas of batchnorm_apply
// (Normalize) followed by silu_forward_span, or silu_backward_span into a zeroed dbn (whose
// product plus zero is the product), so the composition's bits.
template <class T>
void normalized_silu(const Normalize<T>& normalize, const T* x, T* y, int64_t plane) {
  for (int64_t j = 0; j < plane; ++j) y[j] = silu(normalize(x[j]));
}
template <class T>
void normalized_silu_gradient(const Normalize<T>& normalize, const T* x, const T* dy, T* dbn,
                              int64_t plane) {
  for (int64_t j = 0; j < plane; ++j) dbn[j] = silu_gradient(normalize(x[j]), dy[j]);
}

#ifdef BAREYOLO_VECTOR_EXP
// Normalize's fma((x - mean), scale, shift), 8 lanes at a time.
inline __m256 normalized8(const Normalize<float>& normalize, __m256 x) {
  return _mm256_fmadd_ps(_mm256_sub_ps(x, _mm256_set1_ps(normalize.mean)),
                         _mm256_set1_ps(normalize.scale), _mm256_set1_ps(normalize.shift));
}
inline void normalized_silu(const Normalize<float>& normalize, const float* x, float* y,
                            int64_t plane) {
  cpu::map8(
      plane, [&](__m256 v) { return cpu::silu8(normalized8(normalize, v)); }, y, x);
}
inline void normalized_silu_gradient(const Normalize<float>& normalize, const float* x,
                                     const float* dy, float* dbn, int64_t plane) {
  cpu::map8(
      plane,
      [&](__m256 v, __m256 grad_out) {
        const cpu::SiluGradientFactors8 gradient =
            cpu::silu_gradient_factors8(normalized8(normalize, v), grad_out);
        return _mm256_mul_ps(gradient.dy_s, gradient.slope);
      },
      dbn, x, dy);
}
#endif

// The first pass of every backward op over channel c: dbn of each image's plane written into
// dx (the ops' workspace), and the channel's sums over it; bn normalised with `mean` and
// `invstd` (the batch's, or the running ones in evaluation).
template <class T>
BackwardSums<T> silu_gradient_and_sums(View<const T> x, View<const T> dy, int64_t c, T mean,
                                       T invstd, T gamma, T beta, View<T> dx) {
  const Normalize<T> normalize(mean, invstd, gamma, beta);
  const int64_t plane = x.shape.plane();
  return cpu::batchnorm::backward_sums(
      x.shape.n, plane, mean, invstd, [&](int64_t i) { return x.channel(i, c); },
      [&](int64_t i) {
        normalized_silu_gradient(normalize, x.channel(i, c), dy.channel(i, c), dx.channel(i, c),
                                 plane);
        return static_cast<const T*>(dx.channel(i, c));
      });
}

// The second pass over channel c: dx written over the dbn that the first left in it.
template <class T>
void backward_apply_over_dbn(View<const T> x, int64_t c, const BackwardApply<T>& apply,
                             View<T> dx) {
  for (int64_t i = 0; i < x.shape.n; ++i)
    apply.write_over_dy(x.channel(i, c), dx.channel(i, c), x.shape.plane());
}

}  // namespace

template <class T>
void batchnorm_silu_apply(View<const T> x, const ComputeType<T>* mean, const ComputeType<T>* invstd,
                          const ComputeType<T>* gamma, const ComputeType<T>* beta, View<T> y) {
  cpu::require_same_shape("batchnorm_silu_apply", x, y);
  BAREYOLO_ROUTE_TO_CUDA(batchnorm_silu_apply, detail::common_device("batchnorm_silu_apply", x, y),
                         x, mean, invstd, gamma, beta, y);
  const int64_t plane = x.shape.plane();
  for_each_channel(x.shape.c, [&](int64_t c) {
    const Normalize<T> normalize(mean[c], invstd[c], gamma[c], beta[c]);
    for (int64_t i = 0; i < x.shape.n; ++i)
      normalized_silu(normalize, x.channel(i, c), y.channel(i, c), plane);
  });
}

template <class T>
void batchnorm_silu_backward_reduce(View<const T> x, View<const T> dy, const ComputeType<T>* mean,
                                    const ComputeType<T>* invstd, const ComputeType<T>* gamma,
                                    const ComputeType<T>* beta, ComputeType<T>* sum_dy,
                                    ComputeType<T>* sum_dy_xhat, View<T> dx) {
  const Device device = check_fused("batchnorm_silu_backward_reduce", x, dy);
  cpu::require_same_shape("batchnorm_silu_backward_reduce", x, dx);
  BAREYOLO_ROUTE_TO_CUDA(batchnorm_silu_backward_reduce, device, x, dy, mean, invstd, gamma, beta,
                         sum_dy, sum_dy_xhat, dx);
  for_each_channel(x.shape.c, [&](int64_t c) {
    const BackwardSums<T> sums =
        silu_gradient_and_sums(x, dy, c, mean[c], invstd[c], gamma[c], beta[c], dx);
    sum_dy[c] = sums.dy;
    sum_dy_xhat[c] = sums.dy_xhat;
  });
}

template <class T>
void batchnorm_silu_backward_apply(View<const T> x, View<const T> dy, const ComputeType<T>* mean,
                                   const ComputeType<T>* invstd, const ComputeType<T>* gamma,
                                   [[maybe_unused]] const ComputeType<T>* beta,
                                   const ComputeType<T>* sum_dy, const ComputeType<T>* sum_dy_xhat,
                                   int64_t count, View<T> dx) {
  const Device device = check_fused("batchnorm_silu_backward_apply", x, dy);
  cpu::require_same_shape("batchnorm_silu_backward_apply", x, dx);
  BAREYOLO_ROUTE_TO_CUDA(batchnorm_silu_backward_apply, device, x, dy, mean, invstd, gamma, beta,
                         sum_dy, sum_dy_xhat, count, dx);
  // dx holds dbn, which the reduce phase left there.
  for_each_channel(x.shape.c, [&](int64_t c) {
    backward_apply_over_dbn(
        x, c, BackwardApply<T>(gamma[c], invstd[c], mean[c], {sum_dy[c], sum_dy_xhat[c]}, count),
        dx);
  });
}

template <class T>
void batchnorm_silu_backward_train(View<const T> x, View<const T> dy, const ComputeType<T>* gamma,
                                   const ComputeType<T>* beta, const ComputeType<T>* save_mean,
                                   const ComputeType<T>* save_invstd, View<T> dx,
                                   ComputeType<T>* dgamma, ComputeType<T>* dbeta) {
  const Device device = check_fused("batchnorm_silu_backward_train", x, dy);
  const int64_t count = values_per_channel("batchnorm_silu_backward_train", x.shape, 1);
  cpu::require_same_shape("batchnorm_silu_backward_train", x, dx);
  BAREYOLO_ROUTE_TO_CUDA(batchnorm_silu_backward_train, device, x, dy, gamma, beta, save_mean,
                         save_invstd, dx, dgamma, dbeta);
  // Both passes channel by channel, so that dbn is still in cache when the second reads it.
  for_each_channel(x.shape.c, [&](int64_t c) {
    const BackwardSums<T> sums =
        silu_gradient_and_sums(x, dy, c, save_mean[c], save_invstd[c], gamma[c], beta[c], dx);
    backward_apply_over_dbn(
        x, c, BackwardApply<T>(gamma[c], save_invstd[c], save_mean[c], sums, count), dx);
    dgamma[c] += sums.dy_xhat;
    dbeta[c] += sums.dy;
  });
}

template <class T>
void batchnorm_silu_backward_eval(View<const T> x, View<const T> dy, const ComputeType<T>* gamma,
                                  const ComputeType<T>* beta, const ComputeType<T>* running_mean,
                                  const ComputeType<T>* running_var, BatchNormParams p, View<T> dx,
                                  ComputeType<T>* dgamma, ComputeType<T>* dbeta) {
  const Device device = check_fused("batchnorm_silu_backward_eval", x, dy);
  cpu::require_same_shape("batchnorm_silu_backward_eval", x, dx);
  BAREYOLO_ROUTE_TO_CUDA(batchnorm_silu_backward_eval, device, x, dy, gamma, beta, running_mean,
                         running_var, p, dx, dgamma, dbeta);
  const int64_t plane = x.shape.plane();
  std::vector<T> invstd(static_cast<size_t>(x.shape.c));
  batchnorm_running_inverse_std(running_var, x.shape.c, p.eps, x.device, invstd.data());
  // The statistics are constants here, so dx is dbn scaled per channel.
  for_each_channel(x.shape.c, [&](int64_t c) {
    const BackwardSums<T> sums =
        silu_gradient_and_sums(x, dy, c, running_mean[c], invstd[c], gamma[c], beta[c], dx);
    const EvalBackwardApply<T> apply(gamma[c], invstd[c]);
    for (int64_t i = 0; i < x.shape.n; ++i) apply.write_over_dy(dx.channel(i, c), plane);
    dgamma[c] += sums.dy_xhat;
    dbeta[c] += sums.dy;
  });
}

#define BAREYOLO_INSTANTIATE_BATCHNORM_SILU(T)                                                    \
  template void batchnorm_silu_apply<T>(View<const T>, const ComputeType<T>*,                     \
                                        const ComputeType<T>*, const ComputeType<T>*,             \
                                        const ComputeType<T>*, View<T>);                          \
  template void batchnorm_silu_backward_reduce<T>(                                                \
      View<const T>, View<const T>, const ComputeType<T>*, const ComputeType<T>*,                 \
      const ComputeType<T>*, const ComputeType<T>*, ComputeType<T>*, ComputeType<T>*, View<T>);   \
  template void batchnorm_silu_backward_apply<T>(                                                 \
      View<const T>, View<const T>, const ComputeType<T>*, const ComputeType<T>*,                 \
      const ComputeType<T>*, const ComputeType<T>*, const ComputeType<T>*, const ComputeType<T>*, \
      int64_t, View<T>);                                                                          \
  template void batchnorm_silu_backward_train<T>(                                                 \
      View<const T>, View<const T>, const ComputeType<T>*, const ComputeType<T>*,                 \
      const ComputeType<T>*, const ComputeType<T>*, View<T>, ComputeType<T>*, ComputeType<T>*);   \
  template void batchnorm_silu_backward_eval<T>(                                                  \
      View<const T>, View<const T>, const ComputeType<T>*, const ComputeType<T>*,                 \
      const ComputeType<T>*, const ComputeType<T>*, BatchNormParams, View<T>, ComputeType<T>*,    \
      ComputeType<T>*);
BAREYOLO_INSTANTIATE_BATCHNORM_SILU(float)
BAREYOLO_INSTANTIATE_BATCHNORM_SILU(double)

// ---- bf16 storage (mixed precision): the float ops on widened copies (kernels/cpu/widened.h);
// every per-channel value is float. The backward ops write dx, so its float copy starts at zero.
// SyncBatchNorm's phases cannot leave a float dbn in a bf16 dx: reduce leaves dx alone, and
// apply runs both float phases (their dbn, the same values, in its float copy of dx).

template <>
void batchnorm_silu_apply<bf16>(View<const bf16> x, const float* mean, const float* invstd,
                                const float* gamma, const float* beta, View<bf16> y) {
  cpu::require_same_shape("batchnorm_silu_apply", x, y);
  BAREYOLO_ROUTE_FLOAT_OP_TO_CUDA(batchnorm_silu_apply,
                                  detail::common_device("batchnorm_silu_apply", x, y), x, mean,
                                  invstd, gamma, beta, y);
  cpu::Widened out(y.shape);
  batchnorm_silu_apply<float>(cpu::Widened(x), mean, invstd, gamma, beta, out);
  out.store(y);
}

template <>
void batchnorm_silu_backward_reduce<bf16>(View<const bf16> x, View<const bf16> dy,
                                          const float* mean, const float* invstd,
                                          const float* gamma, const float* beta, float* sum_dy,
                                          float* sum_dy_xhat, View<bf16> dx) {
  const Device device = check_fused("batchnorm_silu_backward_reduce", x, dy);
  cpu::require_same_shape("batchnorm_silu_backward_reduce", x, dx);
  BAREYOLO_ROUTE_FLOAT_OP_TO_CUDA(batchnorm_silu_backward_reduce, device, x, dy, mean, invstd,
                                  gamma, beta, sum_dy, sum_dy_xhat, dx);
  cpu::Widened dbn(dx.shape);
  batchnorm_silu_backward_reduce<float>(cpu::Widened(x), cpu::Widened(dy), mean, invstd, gamma,
                                        beta, sum_dy, sum_dy_xhat, dbn);
}

template <>
void batchnorm_silu_backward_apply<bf16>(View<const bf16> x, View<const bf16> dy, const float* mean,
                                         const float* invstd, const float* gamma, const float* beta,
                                         const float* sum_dy, const float* sum_dy_xhat,
                                         int64_t count, View<bf16> dx) {
  const Device device = check_fused("batchnorm_silu_backward_apply", x, dy);
  cpu::require_same_shape("batchnorm_silu_backward_apply", x, dx);
  BAREYOLO_ROUTE_FLOAT_OP_TO_CUDA(batchnorm_silu_backward_apply, device, x, dy, mean, invstd, gamma,
                                  beta, sum_dy, sum_dy_xhat, count, dx);
  const cpu::Widened x_float(x), dy_float(dy);
  cpu::Widened dx_float(dx.shape);
  std::vector<float> local_sum_dy(size_t(x.shape.c)), local_sum_dy_xhat(size_t(x.shape.c));
  batchnorm_silu_backward_reduce<float>(x_float, dy_float, mean, invstd, gamma, beta,
                                        local_sum_dy.data(), local_sum_dy_xhat.data(), dx_float);
  batchnorm_silu_backward_apply<float>(x_float, dy_float, mean, invstd, gamma, beta, sum_dy,
                                       sum_dy_xhat, count, dx_float);
  dx_float.store(dx);
}

template <>
void batchnorm_silu_backward_train<bf16>(View<const bf16> x, View<const bf16> dy,
                                         const float* gamma, const float* beta,
                                         const float* save_mean, const float* save_invstd,
                                         View<bf16> dx, float* dgamma, float* dbeta) {
  const Device device = check_fused("batchnorm_silu_backward_train", x, dy);
  values_per_channel("batchnorm_silu_backward_train", x.shape, 1);
  cpu::require_same_shape("batchnorm_silu_backward_train", x, dx);
  BAREYOLO_ROUTE_FLOAT_OP_TO_CUDA(batchnorm_silu_backward_train, device, x, dy, gamma, beta,
                                  save_mean, save_invstd, dx, dgamma, dbeta);
  cpu::Widened dx_float(dx.shape);
  batchnorm_silu_backward_train<float>(cpu::Widened(x), cpu::Widened(dy), gamma, beta, save_mean,
                                       save_invstd, dx_float, dgamma, dbeta);
  dx_float.store(dx);
}

template <>
void batchnorm_silu_backward_eval<bf16>(View<const bf16> x, View<const bf16> dy, const float* gamma,
                                        const float* beta, const float* running_mean,
                                        const float* running_var, BatchNormParams p, View<bf16> dx,
                                        float* dgamma, float* dbeta) {
  const Device device = check_fused("batchnorm_silu_backward_eval", x, dy);
  cpu::require_same_shape("batchnorm_silu_backward_eval", x, dx);
  BAREYOLO_ROUTE_FLOAT_OP_TO_CUDA(batchnorm_silu_backward_eval, device, x, dy, gamma, beta,
                                  running_mean, running_var, p, dx, dgamma, dbeta);
  cpu::Widened dx_float(dx.shape);
  batchnorm_silu_backward_eval<float>(cpu::Widened(x), cpu::Widened(dy), gamma, beta, running_mean,
                                      running_var, p, dx_float, dgamma, dbeta);
  dx_float.store(dx);
}

}  // namespace bareyolo::ops
