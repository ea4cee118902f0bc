// kernels/cuda/cuda_ops.h — the ops of kernels/ops.h that have a CUDA kernel, for float and, the
// activation ops, for bf16 storage (mixed precision).
// Same meaning and conventions as there; callers go through kernels/ops.h, which routes
// views on a GPU here. Kernels run on the device's compute stream (runtime/runtime.h).
//
// An activation op is one template over the storage S of its activations, float or bf16,
// explicitly instantiated for both in its .cu file: it reads S, computes in float and rounds
// each stored result (ops.h); every per-channel value is float. The convolutions' two forms
// differ (cuDNN's bf16 tensor-core convolutions with float accumulation; the gemm path on
// float copies), so they are overloads.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/ops.h"  // the ops' parameter structs
#include "kernels/view.h"

namespace bareyolo::cuda {

// elementwise.cu
template <class S>
void silu_forward(View<const S> x, View<S> y);
template <class S>
void silu_backward(View<const S> x, View<const S> dy, View<S> dx);
template <class S>
void add_forward(View<const S> a, View<const S> b, View<S> y);
template <class S>
void add_backward(View<const S> dy, View<S> da, View<S> db);

// ---- convolution and batch normalisation ---------------------------------------------
// conv2d.cu: shapes already checked by kernels/cpu/conv2d.cpp. Two implementations, chosen
// per call by conv_path(): cuDNN (cudnn_conv.cpp: the algorithm timed at a shape's first call
// and kept, deterministic ones unless --cudnn fast, one shared workspace per device), or
// im2col + cuBLAS SGEMM (conv2d_gemm.cu), kept to compare against. Both use TF32 tensor cores
// while cuda::set_tf32(true) (runtime/runtime.h).
// With moments_mean (and moments_m2), batchnorm_moments of y after the convolution.
void conv2d_forward(View<const float> x, View<const float> weight, const float* bias,
                    ops::Conv2dParams p, View<float> y, float* moments_mean, float* moments_m2);
void conv2d_backward_data(View<const float> dy, View<const float> weight, ops::Conv2dParams p,
                          View<float> dx, ops::GradientWrite write);
void conv2d_backward_weight(View<const float> x, View<const float> dy, ops::Conv2dParams p,
                            View<float> dweight, float* dbias);
void conv2d_forward(View<const bf16> x, View<const bf16> weight, const float* bias,
                    ops::Conv2dParams p, View<bf16> y, float* moments_mean, float* moments_m2);
void conv2d_backward_data(View<const bf16> dy, View<const bf16> weight, ops::Conv2dParams p,
                          View<bf16> dx, ops::GradientWrite write);
void conv2d_backward_weight(View<const bf16> x, View<const bf16> dy, ops::Conv2dParams p,
                            View<float> dweight, float* dbias);
// How many times GPU `device`'s shared convolution workspace has moved (grown) in this process
// (cudnn_conv.cpp; always 0 without CUDA): a CUDA graph recorded before a move reads the old
// address.
uint64_t convolution_workspace_moves(int device);
enum class ConvPath { cudnn, gemm };
// BAREYOLO_CONV=gemm (or =cudnn, the default) in the environment, unless set_conv_path was
// called; an unknown value throws naming it.
ConvPath conv_path();
void set_conv_path(ConvPath path);  // a build without CUDA only records it (conv2d_none.cpp)
// batchnorm.cu: every per-channel pointer (mean, m2, invstd, gamma, beta, running statistics,
// sums, dgamma, dbeta) is device memory on the views' device. Sums run in float, per thread
// then as a fixed tree (Welford/Chan for the moments): deterministic, and stable when
// |mean| >> std.
template <class S>
void batchnorm_moments(View<const S> x, float* mean, float* m2);
template <class S>
void batchnorm_apply(View<const S> x, const float* mean, const float* invstd, const float* gamma,
                     const float* beta, View<S> y);
template <class S>
void batchnorm_backward_reduce(View<const S> x, View<const S> dy, const float* mean,
                               const float* invstd, float* sum_dy, float* sum_dy_xhat);
template <class S>
void batchnorm_backward_apply(View<const S> x, View<const S> dy, const float* mean,
                              const float* invstd, const float* gamma, const float* sum_dy,
                              const float* sum_dy_xhat, int64_t count, View<S> dx);
template <class S>
void batchnorm_forward_train(View<const S> x, const float* gamma, const float* beta,
                             ops::BatchNormParams p, float* running_mean, float* running_var,
                             float* save_mean, float* save_invstd, View<S> y);
template <class S>
void batchnorm_backward_train(View<const S> x, View<const S> dy, const float* gamma,
                              const float* save_mean, const float* save_invstd, View<S> dx,
                              float* dgamma, float* dbeta);
template <class S>
void batchnorm_forward_eval(View<const S> x, const float* gamma, const float* beta,
                            const float* running_mean, const float* running_var,
                            ops::BatchNormParams p, View<S> y);
template <class S>
void batchnorm_backward_eval(View<const S> x, View<const S> dy, const float* gamma,
                             const float* running_mean, const float* running_var,
                             ops::BatchNormParams p, View<S> dx, float* dgamma, float* dbeta);
// Fused batchnorm_apply + silu_forward in one pass: y = silu(bn), bn = (x - mean) * invstd *
// gamma + beta.
template <class S>
void batchnorm_silu_apply(View<const S> x, const float* mean, const float* invstd,
                          const float* gamma, const float* beta, View<S> y);
// The backward of y = silu(bn), bn = batchnorm(x), from dy = dL/dy: each is the BatchNorm
// backward op of the same name with dL/dbn = silu_backward(bn, dy) computed on the fly, bn
// normalised again from x with the statistics given (SyncBN's reduce and apply, the training
// op, the evaluation op); neither bn nor dL/dbn is materialised, so reduce leaves the phases'
// shared workspace dx (kernels/ops.h) alone.
template <class S>
void batchnorm_silu_backward_reduce(View<const S> x, View<const S> dy, const float* mean,
                                    const float* invstd, const float* gamma, const float* beta,
                                    float* sum_dy, float* sum_dy_xhat, View<S> dx);
template <class S>
void batchnorm_silu_backward_apply(View<const S> x, View<const S> dy, const float* mean,
                                   const float* invstd, const float* gamma, const float* beta,
                                   const float* sum_dy, const float* sum_dy_xhat, int64_t count,
                                   View<S> dx);
template <class S>
void batchnorm_silu_backward_train(View<const S> x, View<const S> dy, const float* gamma,
                                   const float* beta, const float* save_mean,
                                   const float* save_invstd, View<S> dx, float* dgamma,
                                   float* dbeta);
template <class S>
void batchnorm_silu_backward_eval(View<const S> x, View<const S> dy, const float* gamma,
                                  const float* beta, const float* running_mean,
                                  const float* running_var, ops::BatchNormParams p, View<S> dx,
                                  float* dgamma, float* dbeta);
// The statistics half of batchnorm_forward_train (which is this, then batchnorm_apply):
// the batch's mean and invstd into save_*, and the running statistics' update.
template <class S>
void batchnorm_train_statistics(View<const S> x, ops::BatchNormParams p, float* running_mean,
                                float* running_var, float* save_mean, float* save_invstd);
// Its second half, from the batch's moments (ops.h).
void batchnorm_statistics_from_moments(const float* mean, const float* m2, int64_t channels,
                                       int64_t count, ops::BatchNormParams p, int device,
                                       float* running_mean, float* running_var, float* save_mean,
                                       float* save_invstd);
// invstd = 1 / sqrt(running_var + eps) per channel, as batchnorm_forward_eval normalises.
void batchnorm_running_inverse_std(const float* running_var, int64_t channels, double eps,
                                   int device, float* invstd);
// batchnorm_sync.cu: SyncBatchNorm's steps between its collectives (ops.h), one thread per
// channel; the records and the count are doubles in device memory.
void batchnorm_moments_record(const float* mean, const float* m2, int64_t channels, int64_t count,
                              int device, double* record);
void batchnorm_statistics_from_records(const double* records, int64_t ranks, int64_t record_stride,
                                       int64_t channels, ops::BatchNormParams p, int device,
                                       float* running_mean, float* running_var, float* save_mean,
                                       float* save_invstd, double* total_count);
void batchnorm_sums_record(const float* sum_dy, const float* sum_dy_xhat, int64_t channels,
                           int device, float* dgamma, float* dbeta, double* record);
void batchnorm_mean_sums(const double* sums, int64_t channels, const double* total_count,
                         int device, float* mean_dy, float* mean_dy_xhat);

// ---- pooling, upsampling, sigmoid and BCE, optimizer ---------------------------------
// pool.cu
template <class S>
void maxpool2d_forward(View<const S> x, ops::Pool2dParams p, View<S> y);
template <class S>
void maxpool2d_backward(View<const S> x, View<const S> dy, ops::Pool2dParams p, View<S> dx);
// SPPF's three chained pools in one kernel (one read of x).
template <class S>
void maxpool2d_chain3_forward(View<const S> x, ops::Pool2dParams p, View<S> y1, View<S> y2,
                              View<S> y3);
// upsample.cu
template <class S>
void upsample_nearest2x_forward(View<const S> x, View<S> y);
template <class S>
void upsample_nearest2x_backward(View<const S> dy, View<S> dx, ops::GradientWrite write);
// layout.cu
template <class S>
void copy_elements(View<const S> x, View<S> y);
// sigmoid_bce.cu
void sigmoid_forward(View<const float> x, View<float> y);
void sigmoid_backward(View<const float> y, View<const float> dy, View<float> dx);
void bce_with_logits_forward(View<const float> x, View<const float> target, float pos_weight,
                             View<float> loss);
void bce_with_logits_backward(View<const float> x, View<const float> target, float pos_weight,
                              View<const float> dloss, View<float> dx);
// optim.cu
void sgd_step(View<float> param, View<const float> grad, View<float> velocity,
              View<const uint8_t> group_of, const ops::SgdFactors<float>* groups, int group_count);
void adam_step(View<float> param, View<const float> grad, View<float> exp_avg,
               View<float> exp_avg_sq, View<const uint8_t> group_of,
               const ops::AdamFactors<float>* groups, int group_count);
void ema_update(View<float> average, View<const float> value,
                const ops::EmaFactors<float>* factors);
// Deterministic: a fixed grid and a fixed reduction order, whatever the GPU. `result` is one
// double in device memory; clip_to_norm reads it there.
void sum_of_squares(View<const float> x, View<double> result);
void clip_to_norm(View<float> x, View<const double> sum_of_squares, double max_norm);
// input_images.cu: shapes already checked by kernels/cpu/input_images.cpp.
void hwc_bytes_to_unit_float(View<const uint8_t> x, View<float> y);
void resize_bilinear(View<const float> x, View<float> y);
// bf16.cu
void convert_to_bf16(View<const float> x, View<bf16> y);
void convert_from_bf16(View<const bf16> x, View<float> y, float divisor = 1.0f);
void round_to_bf16_in_place(View<float> x);
void round_weights_to_bf16(View<const float> values, View<bf16> copies,
                           View<const int64_t> segments);
// sum += x, widened: one pass where a widening copy and an add made two (conv2d.cu's bf16
// weight gradients).
void add_bf16_into(View<const bf16> x, View<float> sum);

}  // namespace bareyolo::cuda
