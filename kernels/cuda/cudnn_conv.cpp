// kernels/cuda/cudnn_conv.cpp — convolution forward, backward-data and backward-weight (+bias)
// through cuDNN's convolution API (conv2d_paths.h).
//
// Descriptors carry the views' real strides (a channel slice of a Concat buffer has a batch
// stride beyond c*h*w), so no view is copied. Channels-last activations are described by their
// strides too, and the weight then as a KRSC filter (cuDNN's NHWC format, which its channels-last
// tensor-core kernels take): a KCRS weight is copied into scratch first (one small copy; the bf16
// copies of a channels-last graph are kept KRSC already), and a KCRS weight gradient gets the
// product through scratch (filter_in, backward_weight). Math on float views is CUDNN_FMA_MATH,
// plain float FMAs, so results stay within float rounding of the CPU reference; with
// cuda::set_tf32(true) it is CUDNN_DEFAULT_MATH, which lets cuDNN round the operands to TF32
// for the tensor cores; on bf16 views it is CUDNN_TENSOR_OP_MATH (convolution_math in
// cudnn_algorithm_choice.h says why).
//
// Algorithms are chosen at the first call of a (device, pass, shapes, strides, pointer
// alignment, math, layout) key, by timing (as PyTorch's cudnn.benchmark does), and kept in the
// process's table (kernels/convolution_choices.h). cuDNN's heuristics
// (cudnnGetConvolution*Algorithm_v7) list the algorithms for the descriptors; the candidates are
// those supported whose workspace fits the cap (cudnn_algorithm_choice.h). Each runs into a
// scratch output, once to warm up and then twice between two events (a candidate whose warm-up
// is far slower than the fastest so far not again), and the fastest stays: under `--cudnn
// deterministic` (the default) the fastest deterministic one, a non-deterministic one only where
// none runs (with a warning naming the convolution: that key's choice is then kept, in the cache
// file too, and a later run takes it without one); under `--cudnn fast` the fastest of all.
// BAREYOLO_CUDNN_LOG=1 prints each choice with the whole ranking and the times. Then the call the
// op was asked for runs with the choice; a later call of the key runs it at once. Every call but
// timing's takes the device's one shared workspace (SharedWorkspace), grown at a key's first call:
// a step allocates none. A kept choice that cannot run (the cache file's or rank 0's, refused by
// another driver, or its workspace no longer to be had) is chosen afresh, never an error.
//
// Timing waits for the device: about 180 keys in the first step of a yolov5 training, each
// once per process, and once per machine with the cache file. That first step is a warm-up like
// the caching allocator's fill, so these waits are not reported to the step guard; inside a CUDA
// graph's recording, where no wait may happen, or where no scratch output fits in memory, the
// first candidate that cuDNN accepts is kept untimed instead. Such a choice, and one made while a
// candidate that could be chosen was beyond memory's reach (its workspace over a cap that free
// memory set, or not to be had), is provisional: this process and its job run it, but it is
// never saved, so a later run with the memory chooses again. Timing noise could make two runs
// choose differently and differ in their last bits; so the choices persist in a per-user cache
// file keyed by GPU and cuDNN version (engine/algorithm_cache.h), which later runs read before
// their first step, and every rank of a job takes rank 0's (dist::broadcast_convolution_choices)
// before its first step and again after it.
//
// bf16 convolutions (mixed precision; ops.h): cuDNN convolves the bf16 views themselves with
// float accumulation (compute type float, tensor-core math) and stores bf16; a forward's
// bias is then added in float and rounded (conv2d_bias.cu: y = round(round(conv) + bias), half
// a bf16 step of the convolution beside the definition's round(conv + bias)); the weight
// gradient is the bf16 product alone, which conv2d.cu adds to the float dweight.
//
// (This is cuDNN's legacy convolution API, deprecated in cuDNN 9 in favour of its graph API
// but complete and supported there; moving to the graph API changes only this file.)
#include <algorithm>
#include <array>
#include <atomic>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/caching_allocator.h"
#include "kernels/convolution_choices.h"
#include "kernels/cuda/conv2d_paths.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/cudnn_algorithm_choice.h"
#include "kernels/cuda/runtime/allocator.h"
#include "kernels/cuda/runtime/check.h"
#include "kernels/cuda/runtime/cudnn.h"
#include "kernels/cuda/runtime/runtime.h"
#include "kernels/cuda/runtime/stream.h"
#include "kernels/scratch_stack.h"

namespace bareyolo::cuda {

namespace {

// ---- descriptors ------------------------------------------------------------------------

std::atomic<uint64_t> descriptors_created{0};   // convolution_descriptors_created()
std::atomic<uint64_t> kept_choices_refused{0};  // kept_convolution_choices_refused()

// cuDNN's name of an element type.
template <class T>
constexpr cudnnDataType_t cudnn_type() {
  if constexpr (std::is_same_v<std::remove_const_t<T>, bf16>)
    return CUDNN_DATA_BFLOAT16;
  else
    return CUDNN_DATA_FLOAT;
}

// A view with its strides, NCHW or channels last; `name` says which tensor of the call it is,
// for errors.
class TensorDescriptor {
 public:
  // In a channels-last call (`channels_last`), a view whose two layouts coincide (one channel,
  // or one pixel) is described as channels last, which its memory also is.
  template <class T>
  TensorDescriptor(const View<T>& view, const char* name, bool channels_last) {
    const Shape4& shape = view.shape;
    // The legacy API addresses a tensor with int offsets, so its whole span must stay below
    // 2^31 elements, not only each dimension (yolov5x at 1280 px and batch 64 is past it).
    const int64_t span = shape.n * view.batch_stride;
    if (span > INT_MAX)
      throw std::invalid_argument(
          std::string("conv2d on CUDA: tensor ") + name + " " + shape.str() +
          " with batch stride " + std::to_string(view.batch_stride) + " spans " +
          std::to_string(span) +
          " elements, more than the 2^31 - 1 cuDNN's convolutions can address; lower --batch or "
          "--imgsz");
    const int n = as_int(shape.n, "images"), c = as_int(shape.c, "channels"),
              h = as_int(shape.h, "height"), w = as_int(shape.w, "width");
    const int64_t pixel = view.channels_last() ? view.pixel_stride : channels_last ? shape.c : 1;
    const int image_stride = as_int(view.batch_stride, "batch stride"),
              channel_stride = as_int(channels_last ? 1 : shape.plane(), "channel stride"),
              pixel_stride = as_int(pixel, "pixel stride"),
              row_stride = as_int(shape.w * pixel, "row stride");
    BAREYOLO_CUDNN_CHECK(cudnnCreateTensorDescriptor(&handle_));
    descriptors_created.fetch_add(1, std::memory_order_relaxed);
    BAREYOLO_CUDNN_CHECK(cudnnSetTensor4dDescriptorEx(handle_, cudnn_type<T>(), n, c, h, w,
                                                      image_stride, channel_stride, row_stride,
                                                      pixel_stride));
  }
  ~TensorDescriptor() { cudnnDestroyTensorDescriptor(handle_); }
  TensorDescriptor(const TensorDescriptor&) = delete;
  TensorDescriptor& operator=(const TensorDescriptor&) = delete;
  cudnnTensorDescriptor_t get() const { return handle_; }

 private:
  cudnnTensorDescriptor_t handle_ = nullptr;
};

// The weight (K, C, R, S): KCRS as YOLOv5 keeps it, or KRSC (cuDNN's NHWC filter format, what
// its channels-last kernels take, as PyTorch gives them) in a channels-last call.
class FilterDescriptor {
 public:
  FilterDescriptor(const Shape4& weight, cudnnDataType_t type, bool channels_last) {
    BAREYOLO_CUDNN_CHECK(cudnnCreateFilterDescriptor(&handle_));
    descriptors_created.fetch_add(1, std::memory_order_relaxed);
    BAREYOLO_CUDNN_CHECK(cudnnSetFilter4dDescriptor(
        handle_, type, channels_last ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
        as_int(weight.n, "output channels"), as_int(weight.c, "input channels"),
        as_int(weight.h, "kernel height"), as_int(weight.w, "kernel width")));
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

// A pass names its heuristics (rank: up to max_results of them, best first: cuDNN may list an
// algorithm once per math type, so its own count, not the ALGO_COUNT enum's) and its call.
// Which operand a pass writes (what timing needs a scratch copy of).
enum class Operand { x, y, w };

struct Forward {
  static constexpr ops::ConvolutionPass kPass = ops::ConvolutionPass::forward;
  static constexpr Operand kOutput = Operand::y;
  static constexpr const char* kName = "forward";
  static constexpr const char* kCall = "cudnnConvolutionForward";
  static constexpr auto max_results = cudnnGetConvolutionForwardAlgorithmMaxCount;
  using Perf = cudnnConvolutionFwdAlgoPerf_t;
  static cudnnStatus_t rank(cudnnHandle_t handle, cudnnTensorDescriptor_t x,
                            cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t conv,
                            cudnnTensorDescriptor_t y, int capacity, int* count, Perf* results) {
    return cudnnGetConvolutionForwardAlgorithm_v7(handle, x, w, conv, y, capacity, count, results);
  }
};

struct BackwardData {
  static constexpr ops::ConvolutionPass kPass = ops::ConvolutionPass::backward_data;
  static constexpr Operand kOutput = Operand::x;
  static constexpr const char* kName = "backward-data";
  static constexpr const char* kCall = "cudnnConvolutionBackwardData";
  static constexpr auto max_results = cudnnGetConvolutionBackwardDataAlgorithmMaxCount;
  using Perf = cudnnConvolutionBwdDataAlgoPerf_t;
  static cudnnStatus_t rank(cudnnHandle_t handle, cudnnTensorDescriptor_t dx,
                            cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t conv,
                            cudnnTensorDescriptor_t dy, int capacity, int* count, Perf* results) {
    return cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, w, dy, conv, dx, capacity, count,
                                                       results);
  }
};

struct BackwardWeight {
  static constexpr ops::ConvolutionPass kPass = ops::ConvolutionPass::backward_weight;
  static constexpr Operand kOutput = Operand::w;
  static constexpr const char* kName = "backward-weight";
  static constexpr const char* kCall = "cudnnConvolutionBackwardFilter";
  static constexpr auto max_results = cudnnGetConvolutionBackwardFilterAlgorithmMaxCount;
  using Perf = cudnnConvolutionBwdFilterAlgoPerf_t;
  static cudnnStatus_t rank(cudnnHandle_t handle, cudnnTensorDescriptor_t x,
                            cudnnFilterDescriptor_t dw, cudnnConvolutionDescriptor_t conv,
                            cudnnTensorDescriptor_t dy, int capacity, int* count, Perf* results) {
    return cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle, x, dy, conv, dw, capacity, count,
                                                         results);
  }
};

// ---- choosing ------------------------------------------------------------------------

// Two events of the compute stream that bracket a timed call.
struct TimingEvents {
  cudaEvent_t start = nullptr, end = nullptr;
  TimingEvents() {
    BAREYOLO_CUDA_CHECK(cudaEventCreate(&start));
    BAREYOLO_CUDA_CHECK(cudaEventCreate(&end));
  }
  ~TimingEvents() {
    cudaEventDestroy(start);
    cudaEventDestroy(end);
  }
  TimingEvents(const TimingEvents&) = delete;
  TimingEvents& operator=(const TimingEvents&) = delete;
};

// The workspace of a device's calls: one buffer, grown to the largest a call has needed, so that
// a call allocates nothing (timing's candidates alone take theirs from the caching allocator:
// their workspaces are not all worth keeping). Growth happens at a key's first call, which runs
// eagerly; a CUDA graph recorded before it reads the old address, so convolution_workspace_moves
// counts the moves and the Solver records its graphs again after one. The lock is held across
// the call, so that no thread's growth frees a buffer another thread's call is handed.
class SharedWorkspace {
 public:
  template <class Call>
  cudnnStatus_t run(size_t bytes, int device, const Call& call) {
    std::lock_guard<std::mutex> lock(mutex_);
    Held& held = held_[device];
    if (held.buffer.bytes() < bytes) {
      // The old buffer back to the caching allocator first, and counted as moved at once: a
      // graph recorded over it must be recorded again even if the larger one cannot be had.
      held.buffer = DeviceBuffer();
      held.moves += 1;
      held.buffer = DeviceBuffer(bytes, device);
    }
    return call(held.buffer.get());
  }
  uint64_t moves(int device) {
    std::lock_guard<std::mutex> lock(mutex_);
    return held_[device].moves;
  }

 private:
  struct Held {
    DeviceBuffer buffer;
    uint64_t moves = 0;
  };
  std::mutex mutex_;
  std::map<int, Held> held_;
};

// Never destroyed: its buffers' allocator may be gone by the time static objects are.
SharedWorkspace& shared_workspace() {
  static auto* workspace = new SharedWorkspace;
  return *workspace;
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

// This thread's descriptors, by device and key (whose pass does not matter): made at a key's
// first call and kept, since a training step makes about three cuDNN calls per layer, and
// creating and destroying four descriptors for each was host time on every call. Kept per
// thread, so that no lock guards them and no two threads set one's math at once (a device's
// calls come from one thread in practice; another thread builds its own). A plain function, not
// inside descriptors_for: a template's thread_local is one per instantiation, and each pass's
// Convolution constructor instantiates it with a lambda of its own type.
using KeptDescriptors = std::map<std::pair<int, ops::ConvolutionKey>, std::unique_ptr<Descriptors>>;
KeptDescriptors& thread_descriptors() {
  thread_local KeptDescriptors kept;
  return kept;
}

// The descriptors of `key` on `device`, made by `make` at the key's first call on this thread.
template <class Make>
Descriptors& descriptors_for(int device, ops::ConvolutionKey key, const Make& make) {
  key.pass = ops::ConvolutionPass::forward;
  std::unique_ptr<Descriptors>& descriptors = thread_descriptors()[{device, key}];
  if (!descriptors) descriptors = make();
  return *descriptors;
}

// ---- one call ------------------------------------------------------------------------

// One convolution call: its descriptors, and run<Pass>, which finds the algorithm and makes the
// call.
class Convolution {
 public:
  // `channels_last`: the call's layout (channels_last_call); w_view is then KRSC (filter_in).
  template <class X, class W, class Y>
  Convolution(const View<X>& x_view, const char* x_name, const View<W>& w_view,
              const View<Y>& y_view, const char* y_name, ops::Conv2dParams p, bool channels_last)
      : device(x_view.device.index),
        bf16_operands(cudnn_type<X>() == CUDNN_DATA_BFLOAT16),
        tensor_cores(bf16_operands || tf32_enabled()),
        deterministic(cudnn_deterministic()),
        handle(cudnn_handle(device)),
        // Checked before the key's descriptors are made (and kept) from the views' strides.
        x_shape_(described_by_key(x_view, x_name, y_view, y_name)),
        w_shape_(w_view.shape),
        key_{.images = x_view.shape.n,
             .in_channels = x_view.shape.c,
             .height = x_view.shape.h,
             .width = x_view.shape.w,
             .x_batch_stride = x_view.batch_stride,
             .y_batch_stride = y_view.batch_stride,
             .out_channels = w_view.shape.n,
             .kernel_h = w_view.shape.h,
             .kernel_w = w_view.shape.w,
             .stride_h = p.stride_h,
             .stride_w = p.stride_w,
             .pad_h = p.pad_h,
             .pad_w = p.pad_w,
             .alignment = common_alignment({x_view.data, w_view.data, y_view.data}),
             .operands = bf16_operands  ? ops::ConvolutionOperands::bf16
                         : tensor_cores ? ops::ConvolutionOperands::tf32
                                        : ops::ConvolutionOperands::float32,
             .channels_last = channels_last,
             .deterministic = deterministic},
        outputs_{span_bytes(x_view), span_bytes(y_view), span_bytes(w_view)},
        descriptors_(descriptors_for(device, key_, [&] {
          return std::unique_ptr<Descriptors>(
              new Descriptors{TensorDescriptor(x_view, x_name, channels_last),
                              TensorDescriptor(y_view, y_name, channels_last),
                              FilterDescriptor(w_view.shape, cudnn_type<W>(), channels_last),
                              ConvolutionDescriptor(p, ranking_math())});
        })) {}

  // Makes the call of `Pass` through launch(algorithm, workspace, workspace bytes, output),
  // which returns cuDNN's status: with the key's choice, or on the key's first call with the
  // fastest candidate (timed), then the others in order until one runs; the one that runs is
  // kept.
  template <class Pass, class Launch>
  void run(Launch launch) {
    ops::ConvolutionKey key = key_;
    key.pass = Pass::kPass;
    const OutputSpan output = outputs_[static_cast<size_t>(Pass::kOutput)];
    // The candidates beyond memory's reach (the kept choice's workspace, or a candidate's, could
    // not be had, or was over a cap that free memory set): a choice made past one that it could
    // have been is provisional, never saved (a later run chooses again).
    MemoryShortage shortage;
    if (const std::optional<ops::ConvolutionChoice> choice =
            ops::find_convolution_choice(Device::cuda(device), key)) {
      bool out_of_memory = false;
      if (run_kept<Pass>(launch, *choice, output.data, out_of_memory)) return;
      if (out_of_memory) shortage = {.any = true, .choosable = true};
      // A choice from the cache file or from rank 0 that this call cannot run (another driver
      // refuses it, or its workspace no longer fits): chosen afresh below, and replaced.
      kept_choices_refused.fetch_add(1, std::memory_order_relaxed);
    }
    descriptors_.conv.set_math(ranking_math());  // an earlier call left its algorithm's
    const std::vector<AlgorithmCandidate> ranking = ranked<Pass>();
    const size_t cap = workspace_cap(device);
    std::vector<AlgorithmCandidate> order = algorithms_to_try(ranking, cap, deterministic);
    for (const AlgorithmCandidate& candidate : ranking)
      if (candidate.supported && candidate.workspace > cap &&
          candidate.workspace <= kMaxConvWorkspace)
        note_short(shortage, candidate);
    const std::string what = std::string(" for the ") + Pass::kName + " convolution of input " +
                             x_shape_.str() + " with weight " + w_shape_.str();
    if (order.empty()) {
      const bool any_supported = std::any_of(
          ranking.begin(), ranking.end(), [](const AlgorithmCandidate& c) { return c.supported; });
      throw std::runtime_error(
          "cuDNN ranked " + std::to_string(ranking.size()) + " algorithms" + what +
          (any_supported
               ? ", but none is supported with a workspace of at most " +
                     std::to_string(cap >> 20) + " MiB; free device memory or try "
               : std::string(", but supports none of them (") + (bf16_operands ? "bf16" : "float") +
                     (key_.channels_last ? ", channels last" : ", NCHW") + "); try ") +
          "BAREYOLO_CONV=gemm");
    }
    std::vector<std::optional<double>> times = timed<Pass>(launch, order, output.bytes, shortage);
    const bool untimed = order.size() > 1 && times.empty();
    if (const std::optional<size_t> fastest = fastest_candidate(order, times, deterministic)) {
      std::rotate(order.begin(), order.begin() + *fastest, order.begin() + *fastest + 1);
      std::rotate(times.begin(), times.begin() + *fastest, times.begin() + *fastest + 1);
    }
    cudnnStatus_t status = CUDNN_STATUS_SUCCESS;
    std::exception_ptr out_of_memory;  // a candidate's workspace could not be had: try the next
    for (size_t i = 0; i < order.size(); ++i) {
      const AlgorithmCandidate& candidate = order[i];
      try {
        status = attempt(launch, candidate, output.data);
      } catch (const OutOfDeviceMemory&) {
        out_of_memory = std::current_exception();
        note_short(shortage, candidate);
        continue;
      }
      if (status == CUDNN_STATUS_SUCCESS) {
        count_launch();  // a refused candidate queued nothing
        const ops::ConvolutionChoice choice{
            .algorithm = candidate.algorithm,
            .math = candidate.math,
            .workspace = static_cast<int64_t>(candidate.workspace),
            .milliseconds = i < times.size() && times[i] ? *times[i] : 0.0,
            .provisional =
                untimed || shortage.choosable || (!candidate.deterministic && shortage.any)};
        ops::adopt_convolution_choices(Device::cuda(device), {{key, choice}});
        if (log_choices()) log_choice(Pass::kName, ranking, order, times, choice);
        if (deterministic && !candidate.deterministic)
          std::fprintf(stderr,
                       "warning: --cudnn deterministic, but no deterministic cuDNN algorithm "
                       "runs%s: algorithm %d (atomics) does, so this convolution's results may "
                       "differ in their last bits from run to run\n",
                       what.c_str(), candidate.algorithm);
        return;
      }
      if (!refused(status)) check_cudnn(status, Pass::kCall, __FILE__, __LINE__);
    }
    if (out_of_memory) std::rethrow_exception(out_of_memory);
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
  // The key holds batch strides, not pixel strides: a channels-last view's must follow from
  // them, as they do in a channels-last tensor and its channel slices. Returns x's shape.
  template <class X, class Y>
  static Shape4 described_by_key(const View<X>& x, const char* x_name, const View<Y>& y,
                                 const char* y_name) {
    const auto check = [](const auto& view, const char* name) {
      if (view.channels_last() && view.batch_stride != view.pixel_stride * view.shape.plane())
        throw std::invalid_argument(
            std::string("conv2d on CUDA: channels-last tensor ") + name + " " + view.shape.str() +
            " has batch stride " + std::to_string(view.batch_stride) + " and pixel stride " +
            std::to_string(view.pixel_stride) +
            "; its images must be pixel stride x height x width apart (a tensor or a channel "
            "slice of one)");
    };
    check(x, x_name);
    check(y, y_name);
    return x.shape;
  }

  // The math types cuDNN's heuristics may rank algorithms for (the call's permitted ones).
  cudnnMathType_t ranking_math() const {
    return cudnn_math(convolution_math(bf16_operands, tensor_cores));
  }

  // Whether candidates were beyond memory's reach: any, and any the choice would fall on
  // wherever it runs (under --cudnn deterministic, a deterministic one: a non-deterministic
  // algorithm is chosen only where none of those runs, and then any counts).
  struct MemoryShortage {
    bool any = false, choosable = false;
  };
  void note_short(MemoryShortage& shortage, const AlgorithmCandidate& candidate) const {
    shortage.any = true;
    shortage.choosable = shortage.choosable || !deterministic || candidate.deterministic;
  }

  // The call with a kept choice; false, having queued nothing, when cuDNN refuses it or its
  // workspace cannot be had (then `out_of_memory` is set).
  template <class Pass, class Launch>
  bool run_kept(Launch& launch, const ops::ConvolutionChoice& choice, void* output,
                bool& out_of_memory) {
    const AlgorithmCandidate kept{choice.algorithm, choice.math, true, true,
                                  static_cast<size_t>(choice.workspace)};
    cudnnStatus_t status = CUDNN_STATUS_SUCCESS;
    try {
      status = attempt(launch, kept, output);
    } catch (const OutOfDeviceMemory&) {
      out_of_memory = true;
      return false;
    }
    if (refused(status)) return false;
    check_cudnn(status, Pass::kCall, __FILE__, __LINE__);
    count_launch();
    return true;
  }

  // One call of `candidate` writing `output`: the descriptor's math set to the candidate's, its
  // workspace the device's shared one (grown first when it is too small).
  template <class Launch>
  cudnnStatus_t attempt(Launch& launch, const AlgorithmCandidate& candidate, void* output) {
    descriptors_.conv.set_math(static_cast<cudnnMathType_t>(candidate.math));
    return shared_workspace().run(candidate.workspace, device, [&](void* workspace) {
      return launch(candidate.algorithm, workspace, candidate.workspace, output);
    });
  }
  // The same with a workspace of its own from the caching allocator (timing's candidates).
  template <class Launch>
  cudnnStatus_t attempt_apart(Launch& launch, const AlgorithmCandidate& candidate, void* output) {
    descriptors_.conv.set_math(static_cast<cudnnMathType_t>(candidate.math));
    DeviceBuffer workspace(candidate.workspace, device);
    return launch(candidate.algorithm, workspace.get(), candidate.workspace, output);
  }

  // How long each candidate of `order` takes, in milliseconds (none where cuDNN refuses it):
  // run into a scratch output of `output_bytes` (the real output may be added into, and the
  // inputs are only read), once to warm up and then the best of two, each between two events.
  // A candidate whose warm-up alone took kHopeless times the fastest so far cannot win and is not
  // run again (some algorithms take tens of milliseconds where the winner takes one). Empty,
  // timing nothing, with a single candidate, while the stream is recorded into a CUDA graph, or
  // when no scratch output fits in memory. `shortage` notes the scratch output, or a candidate's
  // workspace, that could not be had. The host waits for each event: see the file comment for
  // why that is not reported to the step guard.
  template <class Pass, class Launch>
  std::vector<std::optional<double>> timed(Launch& launch,
                                           const std::vector<AlgorithmCandidate>& order,
                                           size_t output_bytes, MemoryShortage& shortage) {
    constexpr int kTimedRuns = 2;
    constexpr double kHopeless = 8;
    const cudaStream_t stream = stream_of(device);
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    BAREYOLO_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
    if (order.size() < 2 || capture != cudaStreamCaptureStatusNone) return {};
    DeviceBuffer scratch;
    try {
      scratch = DeviceBuffer(output_bytes, device);
    } catch (const OutOfDeviceMemory&) {
      shortage = {.any = true, .choosable = true};
      return {};
    }
    const TimingEvents events;
    std::vector<std::optional<double>> times;
    std::optional<double> fastest;  // of the candidates timed so far
    for (const AlgorithmCandidate& candidate : order) {
      std::optional<double> best;
      for (int run = 0; run <= kTimedRuns; ++run) {
        BAREYOLO_CUDA_CHECK(cudaEventRecord(events.start, stream));
        cudnnStatus_t status = CUDNN_STATUS_NOT_SUPPORTED;
        try {
          status = attempt_apart(launch, candidate, scratch.get());
        } catch (const OutOfDeviceMemory&) {  // its workspace does not fit beside the scratch
          note_short(shortage, candidate);
          break;
        }
        if (status != CUDNN_STATUS_SUCCESS) {
          if (!refused(status)) check_cudnn(status, Pass::kCall, __FILE__, __LINE__);
          break;
        }
        BAREYOLO_CUDA_CHECK(cudaEventRecord(events.end, stream));
        BAREYOLO_CUDA_CHECK(cudaEventSynchronize(events.end));
        float elapsed = 0;
        BAREYOLO_CUDA_CHECK(cudaEventElapsedTime(&elapsed, events.start, events.end));
        const double milliseconds = elapsed;
        if (run > 0) {
          best = std::min(best.value_or(milliseconds), milliseconds);
        } else if (fastest && milliseconds > kHopeless * *fastest) {
          best = milliseconds;  // slower than the fastest however it is counted
          break;
        }
      }
      if (best) fastest = std::min(fastest.value_or(*best), *best);
      times.push_back(best);
    }
    return times;
  }

  // cuDNN's heuristics for this call's descriptors, best first.
  template <class Pass>
  std::vector<AlgorithmCandidate> ranked() const {
    int capacity = 0;
    check_cudnn(Pass::max_results(handle, &capacity), "cudnnGetConvolution*AlgorithmMaxCount",
                __FILE__, __LINE__);
    std::vector<typename Pass::Perf> results(static_cast<size_t>(capacity));
    int count = 0;
    check_cudnn(
        Pass::rank(handle, x(), w(), conv(), y(), int(results.size()), &count, results.data()),
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

  // One line to stderr: the choice, cuDNN's ranking, and the candidates' times.
  void log_choice(const char* pass, const std::vector<AlgorithmCandidate>& ranking,
                  const std::vector<AlgorithmCandidate>& order,
                  const std::vector<std::optional<double>>& times,
                  const ops::ConvolutionChoice& chosen) const {
    std::string line = std::string("cudnn ") + pass + (bf16_operands ? " bf16" : " float") +
                       (key_.channels_last ? " nhwc x" : " nchw x") + x_shape_.str() + " w" +
                       w_shape_.str() + " stride " + std::to_string(key_.stride_h) +
                       ": algorithm " + std::to_string(chosen.algorithm) + " " +
                       math_name(chosen.math) + "; ranked:";
    for (const AlgorithmCandidate& c : ranking)
      line += " " + std::to_string(c.algorithm) + "/" + math_name(c.math) +
              (c.supported ? "" : "/unsupported") + (c.deterministic ? "" : "/nondeterministic") +
              "/" + std::to_string(c.workspace >> 20) + "MiB";
    if (!times.empty()) line += "; timed:";
    for (size_t i = 0; i < times.size(); ++i)
      line += " " + std::to_string(order[i].algorithm) + "/" + math_name(order[i].math) + "=" +
              (times[i] ? std::to_string(*times[i]) + "ms" : std::string("refused"));
    if (chosen.provisional)
      line +=
          "; provisional (untimed, or a candidate's workspace beyond memory's reach): not saved";
    std::fprintf(stderr, "%s\n", line.c_str());
  }

  // The memory a pass may write: its output operand's, all of its span.
  struct OutputSpan {
    void* data = nullptr;
    size_t bytes = 0;
  };
  template <class T>
  static OutputSpan span_bytes(const View<T>& view) {
    return {const_cast<std::remove_const_t<T>*>(view.data),
            static_cast<size_t>(view.shape.n * view.batch_stride) * sizeof(T)};
  }

  Shape4 x_shape_, w_shape_;           // for messages
  ops::ConvolutionKey key_;            // its pass set by run
  std::array<OutputSpan, 3> outputs_;  // by Operand: x (or dx), y (or dy), the weight (or dw)
  Descriptors& descriptors_;           // this thread's for key_ (descriptors_for)
};

const float kOne = 1.0f, kZero = 0.0f;

// Whether a call runs in channels last: whether x or y (or their gradients) is. conv2d.cu gives
// a channels-last call packed channels-last activations only (copies of any others), so here
// they agree, up to a view whose two layouts coincide.
template <class X, class Y>
bool channels_last_call(const View<X>& x, const View<Y>& y) {
  return x.channels_last() || y.channels_last();
}

// Whether a weight (or its gradient) is laid out as the call's filter descriptor says: KRSC in a
// channels-last call, KCRS in an NCHW one (both, where one input channel or a 1x1 kernel makes
// them coincide).
template <class T>
bool in_filter_layout(const View<T>& weight, bool channels_last) {
  return weight.channels_last() == channels_last || weight.shape.layouts_coincide();
}

// The weight in the call's filter layout: as it is, or copied into `scratch` (a float weight of
// a channels-last call: the module keeps YOLOv5's KCRS).
template <class T>
View<const T> filter_in(View<const T> weight, bool channels_last, detail::ScratchFrame& scratch) {
  if (in_filter_layout(weight, channels_last)) return weight;
  const View<T> copy = scratch.view<T>(weight.shape, weight.device, channels_last);
  copy_elements(weight, copy);
  return copy;
}

// The three cuDNN calls, on float or on bf16 views (alpha and beta are float either way).
// y = conv(x, weight)
template <class T>
void forward(View<const T> x, View<const T> weight, ops::Conv2dParams p, View<T> y) {
  const bool channels_last = channels_last_call(x, y);
  detail::ScratchFrame scratch;
  const View<const T> w = filter_in(weight, channels_last, scratch);
  Convolution c(x, "x", w, y, "y", p, channels_last);
  c.run<Forward>([&](int algorithm, void* workspace, size_t bytes, void* output) {
    return cudnnConvolutionForward(c.handle, &kOne, c.x(), x.data, c.w(), w.data, c.conv(),
                                   static_cast<cudnnConvolutionFwdAlgo_t>(algorithm), workspace,
                                   bytes, &kZero, c.y(), output);  // y
  });
}

// dx = beta * dx + conv-transpose(dy, weight): beta 1 adds, 0 writes (dx not read)
template <class T>
void backward_data(View<const T> dy, View<const T> weight, ops::Conv2dParams p, View<T> dx,
                   const float* beta) {
  const bool channels_last = channels_last_call(dx, dy);
  detail::ScratchFrame scratch;
  const View<const T> w = filter_in(weight, channels_last, scratch);
  Convolution c(dx, "dx", w, dy, "dy", p, channels_last);
  c.run<BackwardData>([&](int algorithm, void* workspace, size_t bytes, void* output) {
    return cudnnConvolutionBackwardData(c.handle, &kOne, c.w(), w.data, c.y(), dy.data, c.conv(),
                                        static_cast<cudnnConvolutionBwdDataAlgo_t>(algorithm),
                                        workspace, bytes, beta, c.x(),
                                        output);  // dx
  });
}

// dweight = beta * dweight + correlate(x, dy). A dweight not in the call's filter layout (YOLOv5's
// KCRS gradient of a channels-last call) gets the product written in that layout into scratch,
// then added (beta 1) or copied (beta 0) across.
template <class T>
void backward_weight(View<const T> x, View<const T> dy, ops::Conv2dParams p, View<T> dweight,
                     const float* beta) {
  const bool channels_last = channels_last_call(x, dy);
  if (!in_filter_layout(dweight, channels_last)) {
    detail::ScratchFrame scratch;
    const View<T> product = scratch.view<T>(dweight.shape, dweight.device, channels_last);
    backward_weight(x, dy, p, product, &kZero);
    if (*beta == 0)
      copy_elements(View<const T>(product), dweight);
    else
      add_forward(View<const T>(dweight), View<const T>(product), dweight);
    return;
  }
  Convolution c(x, "x", dweight, dy, "dy", p, channels_last);
  c.run<BackwardWeight>([&](int algorithm, void* workspace, size_t bytes, void* output) {
    return cudnnConvolutionBackwardFilter(c.handle, &kOne, c.x(), x.data, c.y(), dy.data, c.conv(),
                                          static_cast<cudnnConvolutionBwdFilterAlgo_t>(algorithm),
                                          workspace, bytes, beta, c.w(), output);  // dweight
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
void run_backward_data(View<const S> dy, View<const S> weight, ops::Conv2dParams p, View<S> dx,
                       ops::GradientWrite write) {
  if (dx.shape.n == 0) return;
  backward_data(dy, weight, p, dx, write == ops::GradientWrite::add ? &kOne : &kZero);
}

}  // namespace

uint64_t convolution_descriptors_created() {
  return descriptors_created.load(std::memory_order_relaxed);
}

uint64_t kept_convolution_choices_refused() {
  return kept_choices_refused.load(std::memory_order_relaxed);
}

uint64_t convolution_workspace_moves(int device) { return shared_workspace().moves(device); }

void cudnn_conv2d_forward(View<const float> x, View<const float> weight, const float* bias,
                          ops::Conv2dParams p, View<float> y) {
  run_forward(x, weight, bias, p, y);
}
void cudnn_conv2d_forward(View<const bf16> x, View<const bf16> weight, const float* bias,
                          ops::Conv2dParams p, View<bf16> y) {
  run_forward(x, weight, bias, p, y);
}

void cudnn_conv2d_backward_data(View<const float> dy, View<const float> weight, ops::Conv2dParams p,
                                View<float> dx, ops::GradientWrite write) {
  run_backward_data(dy, weight, p, dx, write);
}
void cudnn_conv2d_backward_data(View<const bf16> dy, View<const bf16> weight, ops::Conv2dParams p,
                                View<bf16> dx, ops::GradientWrite write) {
  run_backward_data(dy, weight, p, dx, write);  // blended in float, stored bf16
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
