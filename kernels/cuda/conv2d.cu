// kernels/cuda/conv2d.cu — the CUDA convolution ops, float and bf16: each call goes to the path
// conv_path() names, cuDNN by default, im2col + cuBLAS with BAREYOLO_CONV=gemm (conv2d_paths.h).
#include <atomic>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>

#include "kernels/cuda/conv2d_paths.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/runtime/allocator.h"
#include "kernels/cuda/runtime/runtime.h"
#include "kernels/nchw_adapter.h"
#include "kernels/scratch_stack.h"

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

// ---- layouts: cuDNN takes NCHW views (channel slices too, as the H200 run has shown) and packed
// channels-last ones (cudnn_conv.cpp); the gemm path reads NCHW only. Any other call runs on
// copies (kernels/nchw_adapter.h): on the gemm path NCHW ones; on cuDNN's, where an activation is
// channels last, packed channels-last ones of the views cuDNN is not known to take (a channel
// slice of a channels-last Concat: whether cuDNN's channels-last kernels take a pixel stride
// beyond the channels is for a GPU run to show, in bench_gpu_convolutions' last table; a view of
// the other layout).

namespace {

// The copies a call with activations a and b (x and y, or their gradients) and `weight` needs
// before its path can take it; none when every view is NCHW (or only the weight is channels
// last on cuDNN's path: cudnn_conv.cpp copies a weight into the call's filter layout itself).
template <class A, class W, class B>
std::optional<detail::CopyLayout> copies_needed(const View<A>& a, const View<W>& weight,
                                                const View<B>& b) {
  using detail::CopyLayout;
  if (conv_path() == ConvPath::gemm) {
    if (a.channels_last() || weight.channels_last() || b.channels_last()) return CopyLayout::nchw;
    return std::nullopt;
  }
  if (!a.channels_last() && !b.channels_last()) return std::nullopt;
  if (detail::taken_as_is(a, CopyLayout::packed_channels_last) &&
      detail::taken_as_is(b, CopyLayout::packed_channels_last))
    return std::nullopt;
  return CopyLayout::packed_channels_last;
}

}  // namespace

// Each op: when copies_needed says so, the op again on copies (which need none), then its path.
#define BAREYOLO_CONV_THROUGH_COPIES(OP, A, W, B, ...)                         \
  if (const std::optional<detail::CopyLayout> layout = copies_needed(A, W, B)) \
    return detail::through_layout(                                             \
        *layout, [](auto... arguments) { OP(arguments...); }, __VA_ARGS__);

void conv2d_forward(View<const float> x, View<const float> weight, const float* bias,
                    ops::Conv2dParams p, View<float> y, float* moments_mean, float* moments_m2) {
  BAREYOLO_CONV_THROUGH_COPIES(conv2d_forward, x, weight, y, x, weight, bias, p, y, moments_mean,
                               moments_m2)
  if (conv_path() == ConvPath::gemm)
    gemm_conv2d_forward(x, weight, bias, p, y);
  else
    cudnn_conv2d_forward(x, weight, bias, p, y);
  if (moments_mean) batchnorm_moments(View<const float>(y), moments_mean, moments_m2);
}

void conv2d_backward_data(View<const float> dy, View<const float> weight, ops::Conv2dParams p,
                          View<float> dx, ops::GradientWrite write) {
  BAREYOLO_CONV_THROUGH_COPIES(conv2d_backward_data, dy, weight, dx, dy, weight, p, dx, write)
  if (conv_path() == ConvPath::gemm) return gemm_conv2d_backward_data(dy, weight, p, dx, write);
  cudnn_conv2d_backward_data(dy, weight, p, dx, write);
}

void conv2d_backward_weight(View<const float> x, View<const float> dy, ops::Conv2dParams p,
                            View<float> dweight, float* dbias) {
  BAREYOLO_CONV_THROUGH_COPIES(conv2d_backward_weight, x, dweight, dy, x, dy, p, dweight, dbias)
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
  BAREYOLO_CONV_THROUGH_COPIES(conv2d_forward, x, weight, y, x, weight, bias, p, y, moments_mean,
                               moments_m2)
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
  BAREYOLO_CONV_THROUGH_COPIES(conv2d_backward_data, dy, weight, dx, dy, weight, p, dx, write)
  if (conv_path() == ConvPath::cudnn) return cudnn_conv2d_backward_data(dy, weight, p, dx, write);
  // Written over: zeros, dx not read (kernels/cpu/widened.h's widened_gradient).
  const DeviceWidened dx_float = write == ops::GradientWrite::add
                                     ? DeviceWidened(View<const bf16>(dx))
                                     : DeviceWidened(dx.shape, dx.device);
  gemm_conv2d_backward_data(DeviceWidened(dy), DeviceWidened(weight), p, dx_float, write);
  dx_float.store(dx);
}

// The product alone, rounded to bf16 as a tensor-core convolution stores it (cuDNN's, or the gemm
// path's float product rounded), then added to the float dweight, as ops.h defines it. The
// product is scratch in the call's filter layout (KRSC in channels last), which the add reads
// across into dweight's.
void conv2d_backward_weight(View<const bf16> x, View<const bf16> dy, ops::Conv2dParams p,
                            View<float> dweight, float* dbias) {
  BAREYOLO_CONV_THROUGH_COPIES(conv2d_backward_weight, x, dweight, dy, x, dy, p, dweight, dbias)
  if (x.shape.n == 0) return;
  detail::ScratchFrame scratch;
  const View<bf16> product =
      scratch.view<bf16>(dweight.shape, dweight.device, x.channels_last() || dy.channels_last());
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
