// kernels/cuda/cudnn_conv.cpp — convolution forward, backward-data and backward-weight (+bias)
// through cuDNN's convolution API (conv2d_paths.h).
//
// Descriptors carry the views' real strides (a channel slice of a Concat buffer has a batch
// stride beyond c*h*w), so no view is copied. Math is CUDNN_FMA_MATH: plain float FMAs, no
// TF32, so results stay within float rounding of the CPU reference.
//
// Algorithms: the first call of a (device, pass, shapes, strides, pointer alignment) runs
// cuDNN's timed search (cudnnFind*AlgorithmEx) and the choice is cached for the process:
// the fastest DETERMINISTIC algorithm (the same bits every step; backward-filter algorithms
// that sum with atomics are passed over) that fits the search workspace. The search's
// workspace and the scratch output it writes are plain cudaMalloc/cudaFree, once per shape,
// so they never sit in the caching allocator; each later call takes exactly the chosen
// algorithm's workspace from the caching allocator (the same block every step).
//
// (This is cuDNN's legacy convolution API, deprecated in cuDNN 9 in favour of its graph API
// but complete and supported there; moving to the graph API changes only this file.)
#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>

#include "kernels/cuda/conv2d_paths.h"
#include "kernels/cuda/runtime/allocator.h"
#include "kernels/cuda/runtime/check.h"
#include "kernels/cuda/runtime/cudnn.h"
#include "kernels/cuda/runtime/runtime.h"

namespace bareyolo::cuda {

namespace {

// ---- descriptors ------------------------------------------------------------------------

// A float NCHW view with its strides.
class TensorDescriptor {
 public:
  TensorDescriptor(const Shape4& shape, int64_t batch_stride) {
    BAREYOLO_CUDNN_CHECK(cudnnCreateTensorDescriptor(&handle_));
    BAREYOLO_CUDNN_CHECK(cudnnSetTensor4dDescriptorEx(
        handle_, CUDNN_DATA_FLOAT, as_int(shape.n, "images"), as_int(shape.c, "channels"),
        as_int(shape.h, "height"), as_int(shape.w, "width"), as_int(batch_stride, "batch stride"),
        as_int(shape.plane(), "plane"), as_int(shape.w, "width"), 1));
  }
  template <class T>
  explicit TensorDescriptor(const View<T>& view)
      : TensorDescriptor(view.shape, view.batch_stride) {}
  ~TensorDescriptor() { cudnnDestroyTensorDescriptor(handle_); }
  TensorDescriptor(const TensorDescriptor&) = delete;
  TensorDescriptor& operator=(const TensorDescriptor&) = delete;
  cudnnTensorDescriptor_t get() const { return handle_; }

 private:
  cudnnTensorDescriptor_t handle_ = nullptr;
};

class FilterDescriptor {
 public:
  explicit FilterDescriptor(const Shape4& weight) {
    BAREYOLO_CUDNN_CHECK(cudnnCreateFilterDescriptor(&handle_));
    BAREYOLO_CUDNN_CHECK(cudnnSetFilter4dDescriptor(
        handle_, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, as_int(weight.n, "output channels"),
        as_int(weight.c, "input channels"), as_int(weight.h, "kernel height"),
        as_int(weight.w, "kernel width")));
  }
  ~FilterDescriptor() { cudnnDestroyFilterDescriptor(handle_); }
  FilterDescriptor(const FilterDescriptor&) = delete;
  FilterDescriptor& operator=(const FilterDescriptor&) = delete;
  cudnnFilterDescriptor_t get() const { return handle_; }

 private:
  cudnnFilterDescriptor_t handle_ = nullptr;
};

class ConvolutionDescriptor {
 public:
  explicit ConvolutionDescriptor(ops::Conv2dParams p) {
    BAREYOLO_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&handle_));
    BAREYOLO_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(handle_, p.pad_h, p.pad_w, p.stride_h,
                                                         p.stride_w, 1, 1, CUDNN_CROSS_CORRELATION,
                                                         CUDNN_DATA_FLOAT));
    BAREYOLO_CUDNN_CHECK(cudnnSetConvolutionMathType(handle_, CUDNN_FMA_MATH));
  }
  ~ConvolutionDescriptor() { cudnnDestroyConvolutionDescriptor(handle_); }
  ConvolutionDescriptor(const ConvolutionDescriptor&) = delete;
  ConvolutionDescriptor& operator=(const ConvolutionDescriptor&) = delete;
  cudnnConvolutionDescriptor_t get() const { return handle_; }

 private:
  cudnnConvolutionDescriptor_t handle_ = nullptr;
};

// Everything one convolution call describes to cuDNN: x (or dx), y (or dy), w, the conv.
struct Descriptors {
  TensorDescriptor x, y;
  FilterDescriptor w;
  ConvolutionDescriptor conv;
  Descriptors(const Shape4& x_shape, int64_t x_stride, const Shape4& w_shape, const Shape4& y_shape,
              int64_t y_stride, ops::Conv2dParams p)
      : x(x_shape, x_stride), y(y_shape, y_stride), w(w_shape), conv(p) {}
};

// ---- algorithm choice, once per shape ----------------------------------------------------

enum class Pass : int64_t { forward, backward_data, backward_weight };

struct Choice {
  int algorithm = 0;
  size_t workspace = 0;
};

using ChoiceKey = std::array<int64_t, 16>;

ChoiceKey choice_key(int device, Pass pass, const Shape4& x, int64_t x_stride, const Shape4& w,
                     int64_t y_stride, ops::Conv2dParams p, bool aligned) {
  return {device,     static_cast<int64_t>(pass),
          x.n,        x.c,
          x.h,        x.w,
          x_stride,   y_stride,
          w.n,        w.h,
          w.w,        p.stride_h,
          p.stride_w, p.pad_h,
          p.pad_w,    aligned ? 1 : 0};
}

// True when every pointer is 16-byte aligned: some algorithms need it, so it is part of the key.
bool all_aligned(std::initializer_list<const void*> pointers) {
  return std::all_of(pointers.begin(), pointers.end(), [](const void* pointer) {
    return reinterpret_cast<uintptr_t>(pointer) % 16 == 0;
  });
}

// Device memory for the search alone, returned as soon as it is done.
class SearchBuffer {
 public:
  SearchBuffer(size_t bytes, int device) : bytes_(bytes) {
    if (bytes == 0) return;
    BAREYOLO_CUDA_CHECK(cudaSetDevice(device));
    BAREYOLO_CUDA_CHECK(cudaMalloc(&pointer_, bytes));
  }
  ~SearchBuffer() {
    if (pointer_) cudaFree(pointer_);
  }
  SearchBuffer(const SearchBuffer&) = delete;
  SearchBuffer& operator=(const SearchBuffer&) = delete;
  void* get() const { return pointer_; }
  size_t bytes() const { return bytes_; }

 private:
  void* pointer_ = nullptr;
  size_t bytes_ = 0;
};

// The search may use up to 1 GiB of workspace, or half of the free memory if that is less.
size_t search_workspace_limit(int device) {
  BAREYOLO_CUDA_CHECK(cudaSetDevice(device));
  size_t free_bytes = 0, total_bytes = 0;
  BAREYOLO_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return std::min<size_t>(size_t{1} << 30, free_bytes / 2);
}

// The fastest deterministic result that ran (cuDNN sorts them by time); the fastest of any
// kind when none is deterministic.
template <class Perf>
Choice pick(const Perf* results, int count, const char* pass, const Shape4& x, const Shape4& w) {
  for (bool require_determinism : {true, false})
    for (int i = 0; i < count; ++i)
      if (results[i].status == CUDNN_STATUS_SUCCESS &&
          (!require_determinism || results[i].determinism == CUDNN_DETERMINISTIC))
        return {static_cast<int>(results[i].algo), results[i].memory};
  throw std::runtime_error(std::string("cuDNN has no algorithm for the convolution ") + pass +
                           " of input " + x.str() + " with weight " + w.str() +
                           "; try BAREYOLO_CONV=gemm");
}

std::mutex choices_mutex;
std::map<ChoiceKey, Choice> choices;  // every pass's, for the life of the process

// The cached choice for `key`, or search(workspace) run once to find it.
template <class Search>
Choice cached_choice(const ChoiceKey& key, int device, Search search) {
  std::lock_guard<std::mutex> lock(choices_mutex);  // one search at a time
  auto found = choices.find(key);
  if (found != choices.end()) return found->second;
  SearchBuffer workspace(search_workspace_limit(device), device);
  const Choice choice = search(workspace);
  choices.emplace(key, choice);
  return choice;
}

const float kOne = 1.0f, kZero = 0.0f;

}  // namespace

void cudnn_conv2d_forward(View<const float> x, View<const float> weight, const float* bias,
                          ops::Conv2dParams p, View<float> y) {
  if (x.shape.n == 0) return;
  const int device = x.device.index;
  const cudnnHandle_t handle = cudnn_handle(device);
  const Descriptors d(x.shape, x.batch_stride, weight.shape, y.shape, y.batch_stride, p);
  const Choice choice = cached_choice(
      choice_key(device, Pass::forward, x.shape, x.batch_stride, weight.shape, y.batch_stride, p,
                 all_aligned({x.data, weight.data, y.data})),
      device, [&](const SearchBuffer& workspace) {
        // The forward overwrites y anyway, so the search writes into y itself.
        cudnnConvolutionFwdAlgoPerf_t results[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        int count = 0;
        BAREYOLO_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(
            handle, d.x.get(), x.data, d.w.get(), weight.data, d.conv.get(), d.y.get(), y.data,
            CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, results, workspace.get(), workspace.bytes()));
        return pick(results, count, "forward", x.shape, weight.shape);
      });
  DeviceBuffer workspace(choice.workspace, device);
  BAREYOLO_CUDNN_CHECK(cudnnConvolutionForward(
      handle, &kOne, d.x.get(), x.data, d.w.get(), weight.data, d.conv.get(),
      static_cast<cudnnConvolutionFwdAlgo_t>(choice.algorithm), workspace.get(), choice.workspace,
      &kZero, d.y.get(), y.data));
  if (bias) {
    const TensorDescriptor bias_descriptor({1, y.shape.c, 1, 1}, y.shape.c);
    BAREYOLO_CUDNN_CHECK(
        cudnnAddTensor(handle, &kOne, bias_descriptor.get(), bias, &kOne, d.y.get(), y.data));
  }
}

void cudnn_conv2d_backward_data(View<const float> dy, View<const float> weight, ops::Conv2dParams p,
                                View<float> dx) {
  if (dx.shape.n == 0) return;
  const int device = dx.device.index;
  const cudnnHandle_t handle = cudnn_handle(device);
  const Descriptors d(dx.shape, dx.batch_stride, weight.shape, dy.shape, dy.batch_stride, p);
  const Choice choice = cached_choice(
      choice_key(device, Pass::backward_data, dx.shape, dx.batch_stride, weight.shape,
                 dy.batch_stride, p, all_aligned({dx.data, weight.data, dy.data})),
      device, [&](const SearchBuffer& workspace) {
        // dx is accumulated into, so the search writes a scratch copy of its layout.
        const SearchBuffer scratch(sizeof(float) * dx.shape.n * dx.batch_stride, device);
        cudnnConvolutionBwdDataAlgoPerf_t results[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
        int count = 0;
        BAREYOLO_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(
            handle, d.w.get(), weight.data, d.y.get(), dy.data, d.conv.get(), d.x.get(),
            scratch.get(), CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &count, results, workspace.get(),
            workspace.bytes()));
        return pick(results, count, "backward-data", dx.shape, weight.shape);
      });
  DeviceBuffer workspace(choice.workspace, device);
  BAREYOLO_CUDNN_CHECK(cudnnConvolutionBackwardData(
      handle, &kOne, d.w.get(), weight.data, d.y.get(), dy.data, d.conv.get(),
      static_cast<cudnnConvolutionBwdDataAlgo_t>(choice.algorithm), workspace.get(),
      choice.workspace, &kOne, d.x.get(), dx.data));  // beta 1: dx +=
}

void cudnn_conv2d_backward_weight(View<const float> x, View<const float> dy, ops::Conv2dParams p,
                                  View<float> dweight, float* dbias) {
  if (x.shape.n == 0) return;
  const int device = x.device.index;
  const cudnnHandle_t handle = cudnn_handle(device);
  const Descriptors d(x.shape, x.batch_stride, dweight.shape, dy.shape, dy.batch_stride, p);
  const Choice choice = cached_choice(
      choice_key(device, Pass::backward_weight, x.shape, x.batch_stride, dweight.shape,
                 dy.batch_stride, p, all_aligned({x.data, dweight.data, dy.data})),
      device, [&](const SearchBuffer& workspace) {
        // dweight is accumulated into, so the search writes a scratch weight.
        const SearchBuffer scratch(sizeof(float) * dweight.shape.numel(), device);
        cudnnConvolutionBwdFilterAlgoPerf_t results[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
        int count = 0;
        BAREYOLO_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(
            handle, d.x.get(), x.data, d.y.get(), dy.data, d.conv.get(), d.w.get(), scratch.get(),
            CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &count, results, workspace.get(),
            workspace.bytes()));
        return pick(results, count, "backward-weight", x.shape, dweight.shape);
      });
  DeviceBuffer workspace(choice.workspace, device);
  BAREYOLO_CUDNN_CHECK(cudnnConvolutionBackwardFilter(
      handle, &kOne, d.x.get(), x.data, d.y.get(), dy.data, d.conv.get(),
      static_cast<cudnnConvolutionBwdFilterAlgo_t>(choice.algorithm), workspace.get(),
      choice.workspace, &kOne, d.w.get(), dweight.data));  // beta 1: dweight +=
  if (dbias) {
    const TensorDescriptor bias_descriptor({1, dy.shape.c, 1, 1}, dy.shape.c);
    BAREYOLO_CUDNN_CHECK(cudnnConvolutionBackwardBias(handle, &kOne, d.y.get(), dy.data, &kOne,
                                                      bias_descriptor.get(), dbias));
  }
}

}  // namespace bareyolo::cuda
