// kernels/cuda/conv2d_paths.h — the two CUDA convolution implementations behind the ops of
// cuda_ops.h (conv2d.cu picks one per call): cuDNN (cudnn_conv.cpp; float, and bf16 on the
// tensor cores) and im2col + cuBLAS SGEMM (conv2d_gemm.cu; float, which conv2d.cu runs on float
// copies for bf16), and the bias both use (conv2d_bias.cu). They take the ops' arguments after
// kernels/cpu/conv2d.cpp has checked the shapes, and follow the ops' conventions (forward
// overwrites y; backward adds into dx, dW, dbias).
#pragma once

#include <climits>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/bf16.h"
#include "kernels/ops.h"
#include "kernels/view.h"

namespace bareyolo::cuda {

// Sizes of one convolution (groups 1, dilation 1), readable in kernels.
struct ConvShape {
  int64_t images, c_in, height, width;
  int64_t c_out, kernel_h, kernel_w;
  int64_t stride_h, stride_w, pad_h, pad_w;
  int64_t out_h, out_w;

  BAREYOLO_HOST_DEVICE int64_t col_rows() const { return c_in * kernel_h * kernel_w; }  // K
  BAREYOLO_HOST_DEVICE int64_t col_cols() const { return out_h * out_w; }               // HW
  // 1x1, stride 1, no padding: an image is its own column matrix.
  BAREYOLO_HOST_DEVICE bool image_is_col() const {
    return kernel_h == 1 && kernel_w == 1 && stride_h == 1 && stride_w == 1 && pad_h == 0 &&
           pad_w == 0;
  }
};

inline ConvShape conv_shape(const Shape4& x, const Shape4& weight, ops::Conv2dParams p) {
  return {x.n,
          x.c,
          x.h,
          x.w,
          weight.n,
          weight.h,
          weight.w,
          p.stride_h,
          p.stride_w,
          p.pad_h,
          p.pad_w,
          ops::conv_out_size(x.h, weight.h, p.stride_h, p.pad_h),
          ops::conv_out_size(x.w, weight.w, p.stride_w, p.pad_w)};
}

// `value` as the int the CUDA libraries take; throws naming `what` when it does not fit.
inline int as_int(int64_t value, const char* what) {
  if (value < 0 || value > INT_MAX)
    throw std::invalid_argument(std::string("conv2d on CUDA: ") + what + " = " +
                                std::to_string(value) +
                                " exceeds the libraries' int range; lower --batch or --imgsz");
  return static_cast<int>(value);
}

// How many cuDNN descriptors this process has created: each convolution shape's four, once per
// thread that runs it (cudnn_conv.cpp keeps them), none per call after (tests/cuda/conv2d.cpp).
uint64_t convolution_descriptors_created();
// How many times a kept algorithm choice (the cache file's, rank 0's, or one made earlier) could
// not run (cuDNN refused it, or its workspace could not be had) and was chosen afresh.
uint64_t kept_convolution_choices_refused();

void cudnn_conv2d_forward(View<const float> x, View<const float> weight, const float* bias,
                          ops::Conv2dParams p, View<float> y);
void cudnn_conv2d_backward_data(View<const float> dy, View<const float> weight, ops::Conv2dParams p,
                                View<float> dx, ops::GradientWrite write);
void cudnn_conv2d_backward_weight(View<const float> x, View<const float> dy, ops::Conv2dParams p,
                                  View<float> dweight, float* dbias);

// bf16 operands with float accumulation on the tensor cores; the bias float (kernels/ops.h).
void cudnn_conv2d_forward(View<const bf16> x, View<const bf16> weight, const float* bias,
                          ops::Conv2dParams p, View<bf16> y);
void cudnn_conv2d_backward_data(View<const bf16> dy, View<const bf16> weight, ops::Conv2dParams p,
                                View<bf16> dx, ops::GradientWrite write);
// product = correlate(x, dy), stored in bf16 as the tensor cores give it (overwritten, not
// added to: conv2d.cu adds it to the float weight gradient, for both paths).
void cudnn_conv2d_weight_product(View<const bf16> x, View<const bf16> dy, ops::Conv2dParams p,
                                 View<bf16> product);

void gemm_conv2d_forward(View<const float> x, View<const float> weight, const float* bias,
                         ops::Conv2dParams p, View<float> y);
void gemm_conv2d_backward_data(View<const float> dy, View<const float> weight, ops::Conv2dParams p,
                               View<float> dx, ops::GradientWrite write);
void gemm_conv2d_backward_weight(View<const float> x, View<const float> dy, ops::Conv2dParams p,
                                 View<float> dweight, float* dbias);

// conv2d_bias.cu: y = y + bias per channel (rounded once into y's storage); dbias += the
// per-channel sums of dy.
void add_channel_bias(View<float> y, const float* bias);
void add_channel_bias(View<bf16> y, const float* bias);
void add_bias_gradient(View<const float> dy, float* dbias);
void add_bias_gradient(View<const bf16> dy, float* dbias);

}  // namespace bareyolo::cuda
