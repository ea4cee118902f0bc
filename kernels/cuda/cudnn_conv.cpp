// kernels/cuda/cudnn_conv.cpp — convolution forward, backward-data and backward-weight (+bias)
// through cuDNN's convolution API (conv2d_paths.h).
//
// Descriptors carry the views' real strides (a channel slice of a Concat buffer has a batch
// stride beyond c*h*w), so no view is copied. Math on float views is CUDNN_FMA_MATH, plain
// float FMAs, so results stay within float rounding of the CPU reference; with
// cuda::set_tf32(true) it is CUDNN_DEFAULT_MATH, which lets cuDNN round the operands to TF32
// for the tensor cores; on bf16 views it is CUDNN_TENSOR_OP_MATH (convolution_math in
// cudnn_algorithm_choice.h says why).
//
// Algorithms are chosen on the first call of a (device, pass, shapes, strides, pointer
// alignment, math) and cached for the process. cuDNN's heuristics
// (cudnnGetConvolution*Algorithm_v7) rank the algorithms for the descriptors without running
// any; the choice is the first deterministic one that is supported and whose workspace fits the
// cap (cudnn_algorithm_choice.h; `--cudnn fast`, cuda::set_cudnn_deterministic(false), takes
// cuDNN's first, and BAREYOLO_CUDNN_LOG=1 prints each choice with the whole ranking). That first
// call runs the candidates in this order until cuDNN accepts one, since an algorithm may refuse the
// real pointers' alignment, which the heuristics do not see; it is the very call the op was asked
// for, so nothing runs twice. Each call takes the chosen workspace from the caching allocator (the
// same block every step).
//
// Nothing is timed (cudnnFind*, which this file used before), for two reasons. Timing needs
// search memory beside the tensors and synchronises the device, about 180 times in the first
// step of a yolov5 training. And its winner changes with timing noise, so two runs of the same
// training could use different algorithms and differ in their last bits; the heuristics give
// every run, and every rank of a DDP job, the same algorithm for the same shapes, GPU and cuDNN
// (unless free memory moves the workspace cap across a candidate's workspace). The price is
// sometimes missing the fastest algorithm; PyTorch chooses this way too unless cudnn.benchmark
// is on.
//
// bf16 convolutions (mixed precision; ops.h): cuDNN convolves the bf16 views themselves with
// float accumulation (compute type float, tensor-core math) and stores bf16; a forward's
// bias is then added in float and rounded (conv2d_bias.cu: y = round(round(conv) + bias), half
// a bf16 step of the convolution beside the definition's round(conv + bias)); the weight
// gradient is the bf16 product alone, which conv2d.cu adds to the float dweight.
//
// (This is cuDNN's legacy convolution API, deprecated in cuDNN 9 in favour of its graph API
// but complete and supported there; moving to the graph API changes only this file.)
#include <array>
#include <atomic>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/cuda/conv2d_paths.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/cudnn_algorithm_choice.h"
#include "kernels/cuda/runtime/allocator.h"
#include "kernels/cuda/runtime/check.h"
#include "kernels/cuda/runtime/cudnn.h"
#include "kernels/cuda/runtime/runtime.h"

namespace bareyolo::cuda {

namespace {

// ---- descriptors ------------------------------------------------------------------------

std::atomic<uint64_t> descriptors_created{0};  // convolution_descriptors_created()

// cuDNN's name of an element type.
template <class T>
constexpr cudnnDataType_t cudnn_type() {
  if constexpr (std::is_same_v<std::remove_const_t<T>, bf16>)
    return CUDNN_DATA_BFLOAT16;
  else
    return CUDNN_DATA_FLOAT;
}

// An NCHW view with its strides; `name` says which tensor of the call it is, for errors.
class TensorDescriptor {
 public:
  TensorDescriptor(const Shape4& shape, int64_t batch_stride, const char* name,
                   cudnnDataType_t type = CUDNN_DATA_FLOAT) {
    // The legacy API addresses a tensor with int offsets, so its whole span must stay below
    // 2^31 elements, not only each dimension (yolov5x at 1280 px and batch 64 is past it).
    const int64_t span = shape.n * batch_stride;
    if (span > INT_MAX)
      throw std::invalid_argument(
          std::string("conv2d on CUDA: tensor ") + name + " " + shape.str() +
          " with batch stride " + std::to_string(batch_stride) + " spans " + std::to_string(span) +
          " elements, more than the 2^31 - 1 cuDNN's convolutions can address; lower --batch or "
          "--imgsz");
    const int n = as_int(shape.n, "images"), c = as_int(shape.c, "channels"),
              h = as_int(shape.h, "height"), w = as_int(shape.w, "width");
    const int image_stride = as_int(batch_stride, "batch stride"),
              plane = as_int(shape.plane(), "plane");
    BAREYOLO_CUDNN_CHECK(cudnnCreateTensorDescriptor(&handle_));
    descriptors_created.fetch_add(1, std::memory_order_relaxed);
    BAREYOLO_CUDNN_CHECK(
        cudnnSetTensor4dDescriptorEx(handle_, type, n, c, h, w, image_stride, plane, w, 1));
  }
  template <class T>
  TensorDescriptor(const View<T>& view, const char* name)
      : TensorDescriptor(view.shape, view.batch_stride, name, cudnn_type<T>()) {}
  ~TensorDescriptor() { cudnnDestroyTensorDescriptor(handle_); }
  TensorDescriptor(const TensorDescriptor&) = delete;
  TensorDescriptor& operator=(const TensorDescriptor&) = delete;
  cudnnTensorDescriptor_t get() const { return handle_; }

 private:
  cudnnTensorDescriptor_t handle_ = nullptr;
};

class FilterDescriptor {
 public:
  FilterDescriptor(const Shape4& weight, cudnnDataType_t type) {
    BAREYOLO_CUDNN_CHECK(cudnnCreateFilterDescriptor(&handle_));
    descriptors_created.fetch_add(1, std::memory_order_relaxed);
    BAREYOLO_CUDNN_CHECK(cudnnSetFilter4dDescriptor(
        handle_, type, CUDNN_TENSOR_NCHW, as_int(weight.n, "output channels"),
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
  ConvolutionDescriptor(ops::Conv2dParams p, cudnnMathType_t math) {
    BAREYOLO_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&handle_));
    descriptors_created.fetch_add(1, std::memory_order_relaxed);
    BAREYOLO_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(handle_, p.pad_h, p.pad_w, p.stride_h,
                                                         p.stride_w, 1, 1, CUDNN_CROSS_CORRELATION,
                                                         CUDNN_DATA_FLOAT));
    set_math(math);
  }
  ~ConvolutionDescriptor() { cudnnDestroyConvolutionDescriptor(handle_); }
  ConvolutionDescriptor(const ConvolutionDescriptor&) = delete;
  ConvolutionDescriptor& operator=(const ConvolutionDescriptor&) = delete;
  cudnnConvolutionDescriptor_t get() const { return handle_; }
  // Before the heuristics: the math types they may choose from. Before a call: the one its
  // algorithm was ranked with (cuDNN picks kernels by the pair).
  void set_math(cudnnMathType_t math) {
    BAREYOLO_CUDNN_CHECK(cudnnSetConvolutionMathType(handle_, math));
  }

 private:
  cudnnConvolutionDescriptor_t handle_ = nullptr;
};

// Math types a call allows: FMA always; the tensor-core types (DEFAULT, TENSOR_OP) on bf16
// operands, and on float ones with TF32 on; never TENSOR_OP_MATH_ALLOW_CONVERSION (which would
// narrow float operands to half precision).
bool math_permitted(cudnnMathType_t math, bool tensor_cores) {
  return math == CUDNN_FMA_MATH ||
         (tensor_cores && (math == CUDNN_DEFAULT_MATH || math == CUDNN_TENSOR_OP_MATH));
}

// The alignment in bytes that every pointer of a call has, up to 256 (cudaMalloc's): some
// algorithms refuse less aligned data, so the choice is cached per alignment.
int64_t common_alignment(std::initializer_list<const void*> pointers) {
  uintptr_t bits = 256;
  for (const void* pointer : pointers) bits |= reinterpret_cast<uintptr_t>(pointer);
  return static_cast<int64_t>(bits & (~bits + 1));  // the lowest set bit
}

cudnnMathType_t cudnn_math(ConvolutionMath math) {
  switch (math) {
    case ConvolutionMath::tensor_op:
      return CUDNN_TENSOR_OP_MATH;
    case ConvolutionMath::default_tf32:
      return CUDNN_DEFAULT_MATH;
    default:
      return CUDNN_FMA_MATH;
  }
}

// BAREYOLO_CUDNN_LOG=1 prints each choice with cuDNN's whole ranking to stderr (which
// algorithm a slow layer got, and what else was offered).
bool log_choices() {
  static const bool on = environment_flag("BAREYOLO_CUDNN_LOG", false);
  return on;
}

const char* math_name(int math) {
  switch (math) {
    case CUDNN_FMA_MATH:
      return "fma";
    case CUDNN_DEFAULT_MATH:
      return "default";
    case CUDNN_TENSOR_OP_MATH:
      return "tensor-op";
    default:
      return "tensor-op-conversion";
  }
}

// ---- the three passes: the cuDNN calls that differ between them --------------------------

// A pass names its heuristics (rank: up to kAlgorithms results, best first) and its call.
struct Forward {
  static constexpr int kId = 0;
  static constexpr const char* kName = "forward";
  static constexpr const char* kCall = "cudnnConvolutionForward";
  static constexpr int kAlgorithms = CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
  using Perf = cudnnConvolutionFwdAlgoPerf_t;
  static cudnnStatus_t rank(cudnnHandle_t handle, cudnnTensorDescriptor_t x,
                            cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t conv,
                            cudnnTensorDescriptor_t y, int* count, Perf* results) {
    return cudnnGetConvolutionForwardAlgorithm_v7(handle, x, w, conv, y, kAlgorithms, count,
                                                  results);
  }
};

struct BackwardData {
  static constexpr int kId = 1;
  static constexpr const char* kName = "backward-data";
  static constexpr const char* kCall = "cudnnConvolutionBackwardData";
  static constexpr int kAlgorithms = CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
  using Perf = cudnnConvolutionBwdDataAlgoPerf_t;
  static cudnnStatus_t rank(cudnnHandle_t handle, cudnnTensorDescriptor_t dx,
                            cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t conv,
                            cudnnTensorDescriptor_t dy, int* count, Perf* results) {
    return cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, w, dy, conv, dx, kAlgorithms, count,
                                                       results);
  }
};

struct BackwardWeight {
  static constexpr int kId = 2;
  static constexpr const char* kName = "backward-weight";
  static constexpr const char* kCall = "cudnnConvolutionBackwardFilter";
  static constexpr int kAlgorithms = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
  using Perf = cudnnConvolutionBwdFilterAlgoPerf_t;
  static cudnnStatus_t rank(cudnnHandle_t handle, cudnnTensorDescriptor_t x,
                            cudnnFilterDescriptor_t dw, cudnnConvolutionDescriptor_t conv,
                            cudnnTensorDescriptor_t dy, int* count, Perf* results) {
    return cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle, x, dy, conv, dw, kAlgorithms,
                                                         count, results);
  }
};

// ---- the choice cache ------------------------------------------------------------------

// device, pass, x (or dx) shape and batch stride, y (or dy) batch stride, weight (out
// channels, kernel), stride, padding, pointer alignment, math (0 float, 1 TF32, 2 bf16),
// deterministic algorithms only (1) or not (0).
using ChoiceKey = std::array<int64_t, 18>;

std::mutex choices_mutex;
std::map<ChoiceKey, AlgorithmCandidate> choices;  // every pass's, for the life of the process

std::optional<AlgorithmCandidate> cached_choice(const ChoiceKey& key) {
  std::lock_guard<std::mutex> lock(choices_mutex);
  const auto found = choices.find(key);
  if (found == choices.end()) return std::nullopt;
  return found->second;
}

void remember_choice(const ChoiceKey& key, const AlgorithmCandidate& choice) {
  std::lock_guard<std::mutex> lock(choices_mutex);
  choices.emplace(key, choice);
}

size_t workspace_cap(int device) {
  const MemoryInfo memory = memory_info(device);
  const MemoryStats cache = memory_stats(device);
  return conv_workspace_cap(memory.free, cache.reserved - cache.allocated);
}

// True for a status with which cuDNN refuses an algorithm before launching anything: the next
// candidate may run. Any other failure is an error.
bool refused(cudnnStatus_t status) {
  const int category = CUDNN_STATUS_CATEGORY(status);
  return category == CUDNN_STATUS_BAD_PARAM || category == CUDNN_STATUS_NOT_SUPPORTED;
}

// ---- the descriptors of a shape ----------------------------------------------------------

// The descriptors of one convolution shape: x (or dx), y (or dy), the weight (or its gradient)
// and the convolution. A layer's three passes have the same shapes, so they share one set.
struct Descriptors {
  TensorDescriptor x, y;
  FilterDescriptor w;
  ConvolutionDescriptor conv;  // its math type follows the algorithm being run
};

// This thread's descriptors for `key` (a ChoiceKey without its pass), made by `make` at the
// key's first call and kept: a training step makes about three cuDNN calls per layer, and
// creating and destroying four descriptors for each was host time on every call. Kept per
// thread, so that no lock guards them and no two threads set one's math at once (a device's
// calls come from one thread in practice; another thread builds its own).
template <class Make>
Descriptors& descriptors_for(const ChoiceKey& key, const Make& make) {
  thread_local std::map<ChoiceKey, std::unique_ptr<Descriptors>> kept;
  std::unique_ptr<Descriptors>& descriptors = kept[key];
  if (!descriptors) descriptors = make();
  return *descriptors;
}

// ---- one call ------------------------------------------------------------------------

// One convolution call: its descriptors, and run<Pass>, which finds the algorithm and makes the
// call.
class Convolution {
 public:
  template <class X, class W, class Y>
  Convolution(const View<X>& x_view, const char* x_name, const View<W>& w_view,
              const View<Y>& y_view, const char* y_name, ops::Conv2dParams p)
      : device(x_view.device.index),
        bf16_operands(cudnn_type<X>() == CUDNN_DATA_BFLOAT16),
        tensor_cores(bf16_operands || tf32_enabled()),
        deterministic(cudnn_deterministic()),
        handle(cudnn_handle(device)),
        x_shape_(x_view.shape),
        w_shape_(w_view.shape),
        key_{device,
             -1,  // the pass, set by run
             x_view.shape.n,
             x_view.shape.c,
             x_view.shape.h,
             x_view.shape.w,
             x_view.batch_stride,
             y_view.batch_stride,
             w_view.shape.n,
             w_view.shape.h,
             w_view.shape.w,
             p.stride_h,
             p.stride_w,
             p.pad_h,
             p.pad_w,
             common_alignment({x_view.data, w_view.data, y_view.data}),
             bf16_operands  ? 2
             : tensor_cores ? 1
                            : 0,
             deterministic ? 1 : 0},
        descriptors_(descriptors_for(key_, [&] {
          return std::unique_ptr<Descriptors>(
              new Descriptors{TensorDescriptor(x_view, x_name), TensorDescriptor(y_view, y_name),
                              FilterDescriptor(w_view.shape, cudnn_type<W>()),
                              ConvolutionDescriptor(p, ranking_math())});
        })) {}

  // Makes the call of `Pass` through launch(algorithm, workspace, workspace bytes), which
  // returns cuDNN's status: with the cached algorithm, or on the first call of this key with
  // each candidate in order until one runs, which is then cached.
  template <class Pass, class Launch>
  void run(Launch launch) {
    ChoiceKey key = key_;
    key[1] = Pass::kId;
    auto attempt = [&](const AlgorithmCandidate& candidate) {
      descriptors_.conv.set_math(static_cast<cudnnMathType_t>(candidate.math));
      DeviceBuffer workspace(candidate.workspace, device);
      const cudnnStatus_t status =
          launch(candidate.algorithm, workspace.get(), candidate.workspace);
      if (status == CUDNN_STATUS_SUCCESS) count_launch();  // a refused candidate queued nothing
      return status;
    };
    if (const std::optional<AlgorithmCandidate> choice = cached_choice(key)) {
      check_cudnn(attempt(*choice), Pass::kCall, __FILE__, __LINE__);
      return;
    }
    descriptors_.conv.set_math(ranking_math());  // an earlier call left its algorithm's
    const std::vector<AlgorithmCandidate> ranking = ranked<Pass>();
    const size_t cap = workspace_cap(device);
    const std::vector<AlgorithmCandidate> order = algorithms_to_try(ranking, cap, deterministic);
    const std::string what = std::string(" for the ") + Pass::kName + " convolution of input " +
                             x_shape_.str() + " with weight " + w_shape_.str();
    if (order.empty())
      throw std::runtime_error("cuDNN ranked " + std::to_string(ranking.size()) + " algorithms" +
                               what + ", but none is supported with a workspace of at most " +
                               std::to_string(cap >> 20) +
                               " MiB; free device memory or try BAREYOLO_CONV=gemm");
    cudnnStatus_t status = CUDNN_STATUS_SUCCESS;
    for (const AlgorithmCandidate& candidate : order) {
      status = attempt(candidate);
      if (status == CUDNN_STATUS_SUCCESS) {
        remember_choice(key, candidate);
        if (log_choices()) log_choice(Pass::kName, ranking, candidate);
        return;
      }
      if (!refused(status)) check_cudnn(status, Pass::kCall, __FILE__, __LINE__);
    }
    char detail[512] = {};
    cudnnGetLastErrorString(detail, sizeof detail);
    throw std::runtime_error(
        "cuDNN refused all " + std::to_string(order.size()) + " usable algorithms" + what +
        " (the last with " + cudnnGetErrorString(status) +
        (detail[0] ? std::string(": ") + detail : std::string()) + "); try BAREYOLO_CONV=gemm");
  }

  cudnnTensorDescriptor_t x() const { return descriptors_.x.get(); }  // x or dx
  cudnnTensorDescriptor_t y() const { return descriptors_.y.get(); }  // y or dy
  cudnnFilterDescriptor_t w() const { return descriptors_.w.get(); }  // the weight or its grad
  cudnnConvolutionDescriptor_t conv() const { return descriptors_.conv.get(); }

  const int device;
  const bool bf16_operands;
  const bool tensor_cores;   // bf16 operands, or TF32 on (read once: one call, one setting)
  const bool deterministic;  // --cudnn deterministic (read once, likewise)
  const cudnnHandle_t handle;

 private:
  // The math types cuDNN's heuristics may rank algorithms for (the call's permitted ones).
  cudnnMathType_t ranking_math() const {
    return cudnn_math(convolution_math(bf16_operands, tensor_cores));
  }

  // cuDNN's heuristics for this call's descriptors, best first.
  template <class Pass>
  std::vector<AlgorithmCandidate> ranked() const {
    std::array<typename Pass::Perf, Pass::kAlgorithms> results{};
    int count = 0;
    check_cudnn(Pass::rank(handle, x(), w(), conv(), y(), &count, results.data()),
                "cudnnGetConvolution*Algorithm_v7", __FILE__, __LINE__);
    std::vector<AlgorithmCandidate> candidates;
    for (int i = 0; i < count; ++i) {
      const typename Pass::Perf& result = results[static_cast<size_t>(i)];
      candidates.push_back(
          {static_cast<int>(result.algo), static_cast<int>(result.mathType),
           result.status == CUDNN_STATUS_SUCCESS && math_permitted(result.mathType, tensor_cores),
           result.determinism == CUDNN_DETERMINISTIC, result.memory});
    }
    return candidates;
  }

  void log_choice(const char* pass, const std::vector<AlgorithmCandidate>& ranking,
                  const AlgorithmCandidate& chosen) const {
    std::string line =
        std::string("cudnn ") + pass + (bf16_operands ? " bf16 x" : " float x") + x_shape_.str() +
        " w" + w_shape_.str() + " stride " + std::to_string(key_[11]) + ": algorithm " +
        std::to_string(chosen.algorithm) + " " + math_name(chosen.math) + "; ranked:";
    for (const AlgorithmCandidate& c : ranking)
      line += " " + std::to_string(c.algorithm) + "/" + math_name(c.math) +
              (c.supported ? "" : "/unsupported") + (c.deterministic ? "" : "/nondeterministic") +
              "/" + std::to_string(c.workspace >> 20) + "MiB";
    std::fprintf(stderr, "%s\n", line.c_str());
  }

  Shape4 x_shape_, w_shape_;  // for messages
  ChoiceKey key_;
  Descriptors& descriptors_;  // this thread's for key_ (descriptors_for)
};

const float kOne = 1.0f, kZero = 0.0f;

// The three cuDNN calls, on float or on bf16 views (alpha and beta are float either way).
// y = conv(x, weight)
template <class T>
void forward(View<const T> x, View<const T> weight, ops::Conv2dParams p, View<T> y) {
  Convolution c(x, "x", weight, y, "y", p);
  c.run<Forward>([&](int algorithm, void* workspace, size_t bytes) {
    return cudnnConvolutionForward(c.handle, &kOne, c.x(), x.data, c.w(), weight.data, c.conv(),
                                   static_cast<cudnnConvolutionFwdAlgo_t>(algorithm), workspace,
                                   bytes, &kZero, c.y(), y.data);
  });
}

// dx += conv-transpose(dy, weight)
template <class T>
void backward_data(View<const T> dy, View<const T> weight, ops::Conv2dParams p, View<T> dx) {
  Convolution c(dx, "dx", weight, dy, "dy", p);
  c.run<BackwardData>([&](int algorithm, void* workspace, size_t bytes) {
    return cudnnConvolutionBackwardData(
        c.handle, &kOne, c.w(), weight.data, c.y(), dy.data, c.conv(),
        static_cast<cudnnConvolutionBwdDataAlgo_t>(algorithm), workspace, bytes, &kOne, c.x(),
        dx.data);  // beta 1: dx +=
  });
}

// dweight = beta * dweight + correlate(x, dy)
template <class T>
void backward_weight(View<const T> x, View<const T> dy, ops::Conv2dParams p, View<T> dweight,
                     const float* beta) {
  Convolution c(x, "x", dweight, dy, "dy", p);
  c.run<BackwardWeight>([&](int algorithm, void* workspace, size_t bytes) {
    return cudnnConvolutionBackwardFilter(c.handle, &kOne, c.x(), x.data, c.y(), dy.data, c.conv(),
                                          static_cast<cudnnConvolutionBwdFilterAlgo_t>(algorithm),
                                          workspace, bytes, beta, c.w(), dweight.data);
  });
}

// The passes with the bias and the ops' zero-image case, for either storage S.
template <class S>
void run_forward(View<const S> x, View<const S> weight, const float* bias, ops::Conv2dParams p,
                 View<S> y) {
  if (x.shape.n == 0) return;
  forward(x, weight, p, y);
  if (bias) add_channel_bias(y, bias);
}

template <class S>
void run_backward_data(View<const S> dy, View<const S> weight, ops::Conv2dParams p, View<S> dx) {
  if (dx.shape.n == 0) return;
  backward_data(dy, weight, p, dx);
}

}  // namespace

uint64_t convolution_descriptors_created() {
  return descriptors_created.load(std::memory_order_relaxed);
}

void cudnn_conv2d_forward(View<const float> x, View<const float> weight, const float* bias,
                          ops::Conv2dParams p, View<float> y) {
  run_forward(x, weight, bias, p, y);
}
void cudnn_conv2d_forward(View<const bf16> x, View<const bf16> weight, const float* bias,
                          ops::Conv2dParams p, View<bf16> y) {
  run_forward(x, weight, bias, p, y);
}

void cudnn_conv2d_backward_data(View<const float> dy, View<const float> weight, ops::Conv2dParams p,
                                View<float> dx) {
  run_backward_data(dy, weight, p, dx);
}
void cudnn_conv2d_backward_data(View<const bf16> dy, View<const bf16> weight, ops::Conv2dParams p,
                                View<bf16> dx) {
  run_backward_data(dy, weight, p, dx);  // blended in float, stored bf16
}

void cudnn_conv2d_backward_weight(View<const float> x, View<const float> dy, ops::Conv2dParams p,
                                  View<float> dweight, float* dbias) {
  if (x.shape.n == 0) return;
  backward_weight(x, dy, p, dweight, &kOne);  // beta 1: dweight +=
  if (dbias) add_bias_gradient(dy, dbias);
}

void cudnn_conv2d_weight_product(View<const bf16> x, View<const bf16> dy, ops::Conv2dParams p,
                                 View<bf16> product) {
  backward_weight(x, dy, p, product, &kZero);  // beta 0: written over, not added to
}

}  // namespace bareyolo::cuda
