// kernels/cuda/conv2d.cu — the CUDA convolution ops: each call goes to the path conv_path()
// names, cuDNN by default, im2col + cuBLAS with BAREYOLO_CONV=gemm (conv2d_paths.h).
#include <atomic>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "kernels/cuda/conv2d_paths.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/runtime/allocator.h"
#include "kernels/cuda/runtime/runtime.h"

namespace bareyolo::cuda {

namespace {

ConvPath path_from_environment() {
  const char* value = std::getenv("BAREYOLO_CONV");
  if (!value || std::string(value).empty() || std::string(value) == "cudnn") return ConvPath::cudnn;
  if (std::string(value) == "gemm") return ConvPath::gemm;
  throw std::invalid_argument(std::string("BAREYOLO_CONV=") + value +
                              " is not a convolution path; use cudnn or gemm");
}

// -1 until chosen: the environment is read on first use, set_conv_path overrides it.
std::atomic<int> chosen_path{-1};

}  // namespace

ConvPath conv_path() {
  int path = chosen_path.load();
  if (path < 0) {
    path = static_cast<int>(path_from_environment());
    int unset = -1;
    chosen_path.compare_exchange_strong(unset, path);
    path = chosen_path.load();
  }
  return static_cast<ConvPath>(path);
}

void set_conv_path(ConvPath path) { chosen_path = static_cast<int>(path); }

void conv2d_forward(View<const float> x, View<const float> weight, const float* bias,
                    ops::Conv2dParams p, View<float> y, float* moments_mean, float* moments_m2) {
  if (conv_path() == ConvPath::gemm)
    gemm_conv2d_forward(x, weight, bias, p, y);
  else
    cudnn_conv2d_forward(x, weight, bias, p, y);
  if (moments_mean) batchnorm_moments(y, moments_mean, moments_m2);
}

void conv2d_backward_data(View<const float> dy, View<const float> weight, ops::Conv2dParams p,
                          View<float> dx) {
  if (conv_path() == ConvPath::gemm) return gemm_conv2d_backward_data(dy, weight, p, dx);
  cudnn_conv2d_backward_data(dy, weight, p, dx);
}

void conv2d_backward_weight(View<const float> x, View<const float> dy, ops::Conv2dParams p,
                            View<float> dweight, float* dbias) {
  if (conv_path() == ConvPath::gemm) return gemm_conv2d_backward_weight(x, dy, p, dweight, dbias);
  cudnn_conv2d_backward_weight(x, dy, p, dweight, dbias);
}

// The bf16 convolutions: cuDNN on bf16 copies; the gemm path (kept to compare against) runs
// their definition, the float convolution with its result rounded as ops.h says.
void conv2d_forward_bf16(View<const float> x, View<const float> weight, const float* bias,
                         ops::Conv2dParams p, View<float> y) {
  if (conv_path() == ConvPath::cudnn) return cudnn_conv2d_forward_bf16(x, weight, bias, p, y);
  gemm_conv2d_forward(x, weight, bias, p, y);
  round_to_bf16_in_place(y);
}

void conv2d_backward_data_bf16(View<const float> dy, View<const float> weight, ops::Conv2dParams p,
                               View<float> dx) {
  if (conv_path() == ConvPath::cudnn) return cudnn_conv2d_backward_data_bf16(dy, weight, p, dx);
  gemm_conv2d_backward_data(dy, weight, p, dx);
  round_to_bf16_in_place(dx);
}

void conv2d_backward_weight_bf16(View<const float> x, View<const float> dy, ops::Conv2dParams p,
                                 View<float> dweight, float* dbias) {
  if (conv_path() == ConvPath::cudnn)
    return cudnn_conv2d_backward_weight_bf16(x, dy, p, dweight, dbias);
  // The product alone, rounded, then added: a scratch of the weight's size.
  DeviceBuffer scratch(size_t(dweight.shape.numel()) * sizeof(float), dweight.device.index);
  const View<float> product = dense_view(scratch.as<float>(), dweight.shape, dweight.device);
  fill_bytes(product.data, 0, scratch.bytes(), dweight.device.index);
  gemm_conv2d_backward_weight(x, dy, p, product, dbias);
  round_to_bf16_in_place(product);
  add_forward(dweight, product, dweight);
}

}  // namespace bareyolo::cuda
