// kernels/cuda/conv2d.cu — the CUDA convolution ops, float and bf16: each call goes to the path
// conv_path() names, cuDNN by default, im2col + cuBLAS with BAREYOLO_CONV=gemm (conv2d_paths.h).
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
  if (moments_mean) batchnorm_moments(View<const float>(y), moments_mean, moments_m2);
}

void conv2d_backward_data(View<const float> dy, View<const float> weight, ops::Conv2dParams p,
                          View<float> dx, ops::GradientWrite write) {
  if (conv_path() == ConvPath::gemm) return gemm_conv2d_backward_data(dy, weight, p, dx, write);
  cudnn_conv2d_backward_data(dy, weight, p, dx, write);
}

void conv2d_backward_weight(View<const float> x, View<const float> dy, ops::Conv2dParams p,
                            View<float> dweight, float* dbias) {
  if (conv_path() == ConvPath::gemm) return gemm_conv2d_backward_weight(x, dy, p, dweight, dbias);
  cudnn_conv2d_backward_weight(x, dy, p, dweight, dbias);
}

// ---- bf16 storage (mixed precision): cuDNN on the tensor cores, or the gemm path (kept to
// compare against) running the definition of ops.h on float copies, as the CPU does.

namespace {

// A dense float copy of a bf16 view in device memory from the caching allocator, or zeros for a
// result; store() rounds it into a bf16 view (kernels/cpu/widened.h's twin on the GPU).
class DeviceWidened {
 public:
  explicit DeviceWidened(View<const bf16> values) : DeviceWidened(values.shape, values.device) {
    convert_from_bf16(values, view_);
  }
  DeviceWidened(const Shape4& shape, const Device& device)
      : buffer_(size_t(shape.numel()) * sizeof(float), device.index),
        view_(dense_view(buffer_.as<float>(), shape, device)) {
    fill_bytes(view_.data, 0, buffer_.bytes(), device.index);
  }
  operator View<float>() const { return view_; }
  operator View<const float>() const { return view_; }
  void store(View<bf16> to) const { convert_to_bf16(view_, to); }

 private:
  DeviceBuffer buffer_;
  View<float> view_;
};

}  // namespace

void conv2d_forward(View<const bf16> x, View<const bf16> weight, const float* bias,
                    ops::Conv2dParams p, View<bf16> y, float* moments_mean, float* moments_m2) {
  if (conv_path() == ConvPath::cudnn) {
    cudnn_conv2d_forward(x, weight, bias, p, y);
  } else {
    const DeviceWidened out(y.shape, y.device);
    gemm_conv2d_forward(DeviceWidened(x), DeviceWidened(weight), bias, p, out);
    out.store(y);
  }
  if (moments_mean) batchnorm_moments(View<const bf16>(y), moments_mean, moments_m2);
}

void conv2d_backward_data(View<const bf16> dy, View<const bf16> weight, ops::Conv2dParams p,
                          View<bf16> dx, ops::GradientWrite write) {
  if (conv_path() == ConvPath::cudnn) return cudnn_conv2d_backward_data(dy, weight, p, dx, write);
  // Written over: zeros, dx not read (kernels/cpu/widened.h's widened_gradient).
  const DeviceWidened dx_float = write == ops::GradientWrite::add
                                     ? DeviceWidened(View<const bf16>(dx))
                                     : DeviceWidened(dx.shape, dx.device);
  gemm_conv2d_backward_data(DeviceWidened(dy), DeviceWidened(weight), p, dx_float, write);
  dx_float.store(dx);
}

// The product alone, rounded to bf16 as a tensor-core convolution stores it (cuDNN's, or the gemm
// path's float product rounded), then added to the float dweight, as ops.h defines it.
void conv2d_backward_weight(View<const bf16> x, View<const bf16> dy, ops::Conv2dParams p,
                            View<float> dweight, float* dbias) {
  if (x.shape.n == 0) return;
  DeviceBuffer buffer(size_t(dweight.shape.numel()) * sizeof(bf16), dweight.device.index);
  const View<bf16> product = dense_view(buffer.as<bf16>(), dweight.shape, dweight.device);
  if (conv_path() == ConvPath::cudnn) {
    cudnn_conv2d_weight_product(x, dy, p, product);
  } else {
    const DeviceWidened wide(dweight.shape, dweight.device);  // zeros: the gemm path adds into it
    gemm_conv2d_backward_weight(DeviceWidened(x), DeviceWidened(dy), p, wide, nullptr);
    wide.store(product);
  }
  add_bf16_into(View<const bf16>(product), dweight);
  if (dbias) add_bias_gradient(dy, dbias);
}

}  // namespace bareyolo::cuda
