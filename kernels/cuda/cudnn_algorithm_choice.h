// kernels/cuda/cudnn_algorithm_choice.h — which of cuDNN's ranked convolution algorithms to run,
// and how much workspace one may take: the decision alone, in plain C++ without CUDA headers, so
// that tests/unit/cudnn_algorithm_choice.cpp checks it on any machine. cudnn_conv.cpp gets the
// ranking from cuDNN's heuristics, times the candidates given here and keeps the one
// fastest_candidate picks.
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <vector>

namespace bareyolo::cuda {

// One algorithm as cuDNN's heuristics rank it (a cudnnConvolution*AlgoPerf_t), in plain types.
struct AlgorithmCandidate {
  int algorithm = 0;  // a cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t
  int math = 0;       // the cudnnMathType_t the convolution descriptor must carry to run it
  // cuDNN can run it for these descriptors (status CUDNN_STATUS_SUCCESS), in a math type the
  // TF32 setting allows.
  bool supported = false;
  bool deterministic = false;  // CUDNN_DETERMINISTIC: the same bits every run (no atomics)
  size_t workspace = 0;        // bytes
};

// The candidates worth running, in the order to try them: the supported ones whose workspace
// fits `workspace_cap`, the deterministic ones first, each group in cuDNN's ranking (best
// first): the ones to time, and where timing cannot be, the order to try them in (the first
// that runs is kept; the heuristics do not see the pointers, and an algorithm may refuse their
// alignment). Non-deterministic algorithms (backward ones that sum with atomics) come last:
// training should repeat bit for bit, but a convolution that runs beats one that cannot, so
// they run only when no deterministic one exists or runs. With `deterministic_first` false
// (`--cudnn fast`) cuDNN's ranking alone orders them: on an H200, yolov5s at 640 px and batch
// 64 in float32 trained at 307 img/s with cuDNN's first-ranked algorithm instead of 203 with
// the first deterministic one (the backward 134 ms instead of 240), and runs no longer
// repeat bit for bit. Empty when nothing fits.
inline std::vector<AlgorithmCandidate> algorithms_to_try(
    const std::vector<AlgorithmCandidate>& ranked, size_t workspace_cap,
    bool deterministic_first = true) {
  std::vector<AlgorithmCandidate> order;
  for (const bool deterministic : {true, false})
    for (const AlgorithmCandidate& candidate : ranked)
      if (candidate.supported && candidate.workspace <= workspace_cap &&
          (deterministic_first ? candidate.deterministic == deterministic : deterministic))
        order.push_back(candidate);
  return order;
}

// Which of `order` (algorithms_to_try's) to keep, from how long each took when timed:
// `milliseconds[i]` for order[i], none where cuDNN refused it. The fastest that ran; with
// `deterministic` (--cudnn deterministic) the fastest deterministic one, and a
// non-deterministic one only when no deterministic one ran. A tie goes to the earlier (cuDNN's
// better-ranked). None when nothing ran.
inline std::optional<size_t> fastest_candidate(
    const std::vector<AlgorithmCandidate>& order,
    const std::vector<std::optional<double>>& milliseconds, bool deterministic) {
  std::optional<size_t> best;
  for (const bool deterministic_only : {deterministic, false}) {
    for (size_t i = 0; i < order.size() && i < milliseconds.size(); ++i)
      if (milliseconds[i] && (!deterministic_only || order[i].deterministic) &&
          (!best || *milliseconds[i] < *milliseconds[*best]))
        best = i;
    if (best) return best;
  }
  return best;
}

// The math a convolution descriptor asks cuDNN's heuristics for, as the legacy API defines the
// modes: tensor cores run a convolution only under TENSOR_OP math, so bf16 operands need it
// (under DEFAULT math an H200 ran them on the CUDA cores' FMA kernels, 4 times slower than
// float32); float operands with TF32 on take DEFAULT, which permits TF32 tensor cores and no
// narrower type; float operands otherwise FMA, plain float multiply-adds.
enum class ConvolutionMath { fma, default_tf32, tensor_op };

inline ConvolutionMath convolution_math(bool bf16_operands, bool tf32) {
  if (bf16_operands) return ConvolutionMath::tensor_op;
  return tf32 ? ConvolutionMath::default_tf32 : ConvolutionMath::fma;
}

// The most workspace one convolution call may take.
constexpr size_t kMaxConvWorkspace = size_t{1} << 30;

// The workspace cap: 1 GiB, or half of what the device can still give if that is less. What it
// can give is the driver's free memory plus the caching allocator's free blocks, which the
// allocator hands back to the driver when a request would otherwise fail.
inline size_t conv_workspace_cap(size_t device_free, size_t allocator_cached) {
  return std::min(kMaxConvWorkspace, (device_free + allocator_cached) / 2);
}

}  // namespace bareyolo::cuda
