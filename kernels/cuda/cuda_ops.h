// kernels/cuda/cuda_ops.h — the ops of kernels/ops.h that have a CUDA kernel, for float.
// Same meaning and conventions as there; callers go through kernels/ops.h, which routes
// views on a GPU here. Kernels run on the device's compute stream (runtime.h).
#pragma once

#include "kernels/ops.h"  // the ops' parameter structs
#include "kernels/view.h"

namespace bareyolo::cuda {

void silu_forward(View<const float> x, View<float> y);
void silu_backward(View<const float> x, View<const float> dy, View<float> dx);
void add_forward(View<const float> a, View<const float> b, View<float> y);
void add_backward(View<const float> dy, View<float> da, View<float> db);

// ---- convolution and batch normalisation (CUDA part A) -------------------------------
// conv2d.cu: shapes already checked by kernels/cpu/conv2d.cpp. Two implementations, chosen
// per call by conv_path(): cuDNN (cudnn_conv.cpp: algorithm searched once per shape and
// cached, deterministic algorithms, workspace from the caching allocator), or im2col +
// cuBLAS SGEMM (conv2d_gemm.cu), kept to compare against.
void conv2d_forward(View<const float> x, View<const float> weight, const float* bias,
                    ops::Conv2dParams p, View<float> y);
void conv2d_backward_data(View<const float> dy, View<const float> weight, ops::Conv2dParams p,
                          View<float> dx);
void conv2d_backward_weight(View<const float> x, View<const float> dy, ops::Conv2dParams p,
                            View<float> dweight, float* dbias);
enum class ConvPath { cudnn, gemm };
// BAREYOLO_CONV=gemm (or =cudnn, the default) in the environment, unless set_conv_path was
// called; an unknown value throws naming it.
ConvPath conv_path();
void set_conv_path(ConvPath path);
// batchnorm.cu: every per-channel pointer (mean, m2, invstd, gamma, beta, running statistics,
// sums, dgamma, dbeta) is device memory on the views' device. Sums run in float, per thread
// then as a fixed tree (Welford/Chan for the moments): deterministic, and stable when
// |mean| >> std.
void batchnorm_moments(View<const float> x, float* mean, float* m2);
void batchnorm_apply(View<const float> x, const float* mean, const float* invstd,
                     const float* gamma, const float* beta, View<float> y);
void batchnorm_backward_reduce(View<const float> x, View<const float> dy, const float* mean,
                               const float* invstd, float* sum_dy, float* sum_dy_xhat);
void batchnorm_backward_apply(View<const float> x, View<const float> dy, const float* mean,
                              const float* invstd, const float* gamma, const float* sum_dy,
                              const float* sum_dy_xhat, int64_t count, View<float> dx);
void batchnorm_forward_train(View<const float> x, const float* gamma, const float* beta,
                             ops::BatchNormParams p, float* running_mean, float* running_var,
                             float* save_mean, float* save_invstd, View<float> y);
void batchnorm_backward_train(View<const float> x, View<const float> dy, const float* gamma,
                              const float* save_mean, const float* save_invstd, View<float> dx,
                              float* dgamma, float* dbeta);
void batchnorm_forward_eval(View<const float> x, const float* gamma, const float* beta,
                            const float* running_mean, const float* running_var,
                            ops::BatchNormParams p, View<float> y);
void batchnorm_backward_eval(View<const float> x, View<const float> dy, const float* gamma,
                             const float* running_mean, const float* running_var,
                             ops::BatchNormParams p, View<float> dx, float* dgamma,
                             float* dbeta);
// Fused batchnorm_apply + silu_forward in one pass: y = silu(bn), where bn = (x - mean) *
// invstd * gamma + beta is also stored in `bn` unless bn is empty (SiLU's backward reads it).
void batchnorm_silu_apply(View<const float> x, const float* mean, const float* invstd,
                          const float* gamma, const float* beta, View<float> bn, View<float> y);

}  // namespace bareyolo::cuda
