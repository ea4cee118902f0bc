// kernels/cuda/batchnorm.cu — batch normalisation on the GPU: the four phase ops SyncBatchNorm
// interleaves with its all-reduces, the train/eval ops built from them, and the fused
// BatchNorm + SiLU apply. The math is the CPU reference's (kernels/cpu/batchnorm.cpp).
//
// Activations (x, y, dy, dx) are stored as S, float or bf16 (mixed precision): every value is
// widened to float as it is read and each stored result narrowed back (kernels/bf16.h), so the
// bf16 ops compute what the CPU's bf16 definition does (the float op on widened values, each
// result rounded once); every per-channel value is float.
//
// The backward ops read dL/d(BN output) through a gradient source: the gradient itself, or,
// for the fused BN + SiLU, SiLU's backward of dL/d(SiLU output) computed on the fly from the
// stored pre-activation (no dL/d(BN output) tensor is written and read back).
//
// Per-channel reductions (moments, backward sums) run in two launches, both deterministic:
//  1. grid (splits, channels): block (s, c) takes the s-th contiguous range of channel c's
//     count = n*h*w values (flat index e = image * plane + offset). Each thread walks its
//     range with a stride of the block size, keeping at most ~kValuesPerThread values in a
//     running float accumulator, then the block combines its threads as a fixed tree;
//  2. one block per channel combines that channel's split partials as a fixed tree.
// So every float sum is short runs plus log-depth trees: error ~ (64 + log2 count) ulps of
// the summed magnitudes, where one float accumulator over a million values would lose digits.
// The moments use Welford's update per thread and Chan's formula to combine (count, mean, M2)
// triples: no sum(x^2) - count * mean^2, which cancels when |mean| >> std.
//
// Elementwise passes (apply, backward apply) run one block row per (image, channel) plane
// (grid.x = n*c planes, grid.y = chunks of the plane): the channel's parameters are fixed
// per block and no 64-bit division runs per element.
//
// Channels-last views (any op, any mix of layouts: every element is reached through View::at)
// turn both around so that a warp reads neighbouring channels: see channels_last_partial and
// pixels_kernel; packed ones with whole 16-byte vectors of channels take vectors_kernel. Every
// launch goes on the device's compute stream; scratch (partials, sums) comes from the thread's
// scratch stack (kernels/scratch_stack.h): a warm step allocates none.
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "kernels/activation.h"
#include "kernels/batchnorm_statistics.h"
#include "kernels/bf16.h"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/pointwise.cuh"
#include "kernels/cuda/runtime/allocator.h"
#include "kernels/cuda/runtime/check.h"
#include "kernels/cuda/runtime/runtime.h"
#include "kernels/cuda/runtime/stream.h"
#include "kernels/scratch_stack.h"

namespace bareyolo::cuda {

namespace {

constexpr int kValuesPerThread = 64;  // the longest run one float accumulator sums serially
constexpr int kRowThreads = 256;

// ---- per-channel reductions -----------------------------------------------------------

struct ChannelSplit {
  int64_t count = 0;      // values per channel
  int64_t per_block = 0;  // values per block of phase 1
  unsigned splits = 1;    // blocks per channel
};

ChannelSplit channel_split(const Shape4& shape, int device) {
  if (shape.c > 65535)
    throw std::invalid_argument("batchnorm on CUDA: " + std::to_string(shape.c) +
                                " channels; at most 65535 are supported");
  ChannelSplit split;
  split.count = shape.n * shape.plane();
  const int64_t per_pass = int64_t{kReduceThreads} * kValuesPerThread;
  const int64_t for_accuracy = (split.count + per_pass - 1) / per_pass;
  // A few blocks per multiprocessor in all, so that a few wide channels still fill the GPU.
  const int64_t for_occupancy =
      (4 * int64_t{multiprocessor_count(device)} + shape.c - 1) / std::max<int64_t>(shape.c, 1);
  const int64_t at_most = std::max<int64_t>(1, split.count / kReduceThreads);
  split.splits =
      static_cast<unsigned>(std::clamp<int64_t>(std::max(for_accuracy, for_occupancy), 1, at_most));
  split.per_block = (split.count + split.splits - 1) / split.splits;
  return split;
}

// Calls visit(image, offset) for the flat indices begin + threadIdx.x, + kReduceThreads, ...
// below end, where flat index e is (e / plane, e % plane); the division runs only when a step
// crosses into another image.
template <class Visit>
__device__ void for_each_in_range(int64_t begin, int64_t end, int64_t plane, Visit visit) {
  int64_t e = begin + threadIdx.x;
  if (e >= end) return;
  int64_t image = e / plane, offset = e - image * plane;
  for (; e < end; e += kReduceThreads) {
    visit(image, offset);
    offset += kReduceThreads;
    if (offset >= plane) {
      image += offset / plane;
      offset %= plane;
    }
  }
}

// (count, mean, M2) of a set of values; no constructor, so it can live in shared memory.
struct Moments {
  int64_t count;
  float mean, m2;
};

struct MergeMoments {
  __device__ Moments operator()(Moments a, Moments b) const {  // kernels/batchnorm_statistics.h
    const int64_t count = a.count + b.count;
    if (count == 0) return a;
    const ops::batchnorm::MeanM2<float> merged =
        ops::batchnorm::merged_moments(float(a.count), a.mean, a.m2, float(b.count), b.mean, b.m2);
    return {count, merged.mean, merged.m2};
  }
};

// Welford's update of m with one more value.
__device__ void add_value(Moments& m, float v) {
  m.count += 1;
  const float delta = v - m.mean;
  m.mean += delta / float(m.count);
  m.m2 += delta * (v - m.mean);
}

template <class S>
__global__ void __launch_bounds__(kReduceThreads)
    moments_partial_kernel(View<const S> x, int64_t per_block, Moments* partials) {
  const int64_t c = blockIdx.y, plane = x.shape.plane(), count = x.shape.n * plane;
  const int64_t begin = blockIdx.x * per_block, end = min(count, begin + per_block);
  Moments m{0, 0.0f, 0.0f};
  for_each_in_range(begin, end, plane, [&](int64_t image, int64_t offset) {
    add_value(m, widen(x.at(image, c, offset)));
  });
  m = block_reduce(m, MergeMoments{});
  if (threadIdx.x == 0) partials[c * gridDim.x + blockIdx.x] = m;
}

// ---- channels last: the same partials, read across the channels --------------------------
// In channels last a pixel's channels are neighbours, so phase 1 turns around: block (s, g) of a
// (kLanes, kLaneRows) shape takes the s-th range of per_block pixel rows (row e = image * plane
// + pixel, the n*h*w values of every channel) and channels g * kLanes + threadIdx.x; each of its
// kLaneRows thread rows takes every kLaneRows-th pixel row of the range, so a warp reads 32
// neighbouring channels of one pixel. Per thread at most kValuesPerThread values, then thread
// row 0 merges the kLaneRows rows in order, and phase 2 (the final kernels) is the NCHW one: a
// fixed order throughout, so the same bits every run (not NCHW's bits: another order of sums).
constexpr int kLanes = 32, kLaneRows = kReduceThreads / kLanes;
constexpr int64_t kChannelsLastRowsPerBlock = int64_t{kLaneRows} * kValuesPerThread;

// The partial of channel c over block blockIdx.x's pixel rows: visit(acc, image, pixel) for each
// of the thread's rows, merged across thread rows; written to partials[c * gridDim.x + block].
template <class Acc, class Visit, class Merge>
__device__ void channels_last_partial(int64_t channels, int64_t plane, int64_t count, Acc acc,
                                      Visit visit, Merge merge, Acc* partials) {
  __shared__ Acc rows[kLaneRows][kLanes];
  const int64_t c = blockIdx.y * int64_t{kLanes} + threadIdx.x;
  const int64_t begin = blockIdx.x * kChannelsLastRowsPerBlock,
                end = min(count, begin + kChannelsLastRowsPerBlock);
  int64_t e = begin + threadIdx.y;
  if (c < channels && e < end) {
    int64_t image = e / plane, pixel = e - image * plane;
    for (; e < end; e += kLaneRows) {
      visit(acc, c, image, pixel);
      pixel += kLaneRows;
      while (pixel >= plane) pixel -= plane, image += 1;
    }
  }
  rows[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y != 0 || c >= channels) return;
  for (int row = 1; row < kLaneRows; ++row) acc = merge(acc, rows[row][threadIdx.x]);
  partials[c * gridDim.x + blockIdx.x] = acc;
}

// Phase 1's grid and block for channels last: (pixel-row ranges, channel groups).
struct ChannelsLastGrid {
  dim3 grid, block{kLanes, kLaneRows};
  unsigned splits = 1;
  explicit ChannelsLastGrid(const Shape4& shape) {
    const int64_t count = shape.n * shape.plane();
    splits = unsigned(
        std::max<int64_t>(1, (count + kChannelsLastRowsPerBlock - 1) / kChannelsLastRowsPerBlock));
    grid = dim3(splits, unsigned((shape.c + kLanes - 1) / kLanes));
  }
};

template <class S>
__global__ void __launch_bounds__(kReduceThreads)
    moments_partial_channels_last_kernel(View<const S> x, Moments* partials) {
  const int64_t plane = x.shape.plane();
  channels_last_partial(
      x.shape.c, plane, x.shape.n * plane, Moments{0, 0.0f, 0.0f},
      [&](Moments& m, int64_t c, int64_t image, int64_t pixel) {
        add_value(m, widen(x.at(image, c, pixel)));
      },
      MergeMoments{}, partials);
}

__global__ void __launch_bounds__(kReduceThreads)
    moments_final_kernel(const Moments* partials, unsigned splits, float* mean, float* m2) {
  const int64_t c = blockIdx.x;
  Moments m{0, 0.0f, 0.0f};
  for (unsigned s = threadIdx.x; s < splits; s += kReduceThreads)
    m = MergeMoments{}(m, partials[c * splits + s]);
  m = block_reduce(m, MergeMoments{});
  if (threadIdx.x == 0) {
    mean[c] = m.mean;
    m2[c] = m.m2;
  }
}

// bn = (x - mean) * (invstd * gamma) + beta at (image, c, j): what Apply writes and what the fused
// SiLU's backward normalises again.
template <class S>
struct Normalized {
  View<const S> x;
  const float *mean, *invstd, *gamma, *beta;
  __device__ float operator()(int64_t image, int64_t c, int64_t j) const {
    return (widen(x.at(image, c, j)) - mean[c]) * (invstd[c] * gamma[c]) + beta[c];
  }
};

// Where BatchNorm's backward reads dL/d(its output): the gradient itself, or — behind a fused
// SiLU (batchnorm_silu_*) — SiLU's backward of it, computed on the fly from the stored
// pre-activation: silu_gradient (kernels/activation.h), the formula of silu_backward.
// kWritesDx: the fused ops write dx where BatchNorm's own add into it (kernels/ops.h).
template <class S>
struct PlainGradient {
  using Storage = S;
  static constexpr bool kWritesDx = false;
  View<const S> dy;
  __device__ float operator()(int64_t image, int64_t c, int64_t j) const {
    return widen(dy.at(image, c, j));
  }
};
// dL/dbn from dy = dL/d silu(bn), with bn normalised again from x as Apply does.
template <class S>
struct SiluGradient {
  using Storage = S;
  static constexpr bool kWritesDx = true;
  View<const S> dy;
  Normalized<S> bn;
  __device__ float operator()(int64_t image, int64_t c, int64_t j) const {
    return silu_gradient(bn(image, c, j), widen(dy.at(image, c, j)));
  }
};

// sum(dy) and sum(dy * (x - mean)) of a set of values.
struct GradientSums {
  float dy, dy_centered;
  __device__ GradientSums operator+(GradientSums other) const {
    return {dy + other.dy, dy_centered + other.dy_centered};
  }
};

template <class Gradient>
__global__ void __launch_bounds__(kReduceThreads)
    gradient_sums_partial_kernel(View<const typename Gradient::Storage> x, Gradient dy,
                                 const float* mean, int64_t per_block, GradientSums* partials) {
  const int64_t c = blockIdx.y, plane = x.shape.plane(), count = x.shape.n * plane;
  const int64_t begin = blockIdx.x * per_block, end = min(count, begin + per_block);
  const float mu = mean[c];
  GradientSums sums{0.0f, 0.0f};
  for_each_in_range(begin, end, plane, [&](int64_t image, int64_t offset) {
    const float g = dy(image, c, offset);
    sums.dy += g;
    sums.dy_centered += g * (widen(x.at(image, c, offset)) - mu);
  });
  sums = block_reduce(sums, Plus{});
  if (threadIdx.x == 0) partials[c * gridDim.x + blockIdx.x] = sums;
}

// sum_dy = sum(dy), sum_dy_xhat = sum(dy * (x - mean)) * invstd; also added into dgamma and
// dbeta when they are given.
__global__ void __launch_bounds__(kReduceThreads)
    gradient_sums_final_kernel(const GradientSums* partials, unsigned splits, const float* invstd,
                               float* sum_dy, float* sum_dy_xhat, float* dgamma, float* dbeta) {
  const int64_t c = blockIdx.x;
  GradientSums sums{0.0f, 0.0f};
  for (unsigned s = threadIdx.x; s < splits; s += kReduceThreads)
    sums = sums + partials[c * splits + s];
  sums = block_reduce(sums, Plus{});
  if (threadIdx.x == 0) {
    const float dy_xhat = sums.dy_centered * invstd[c];
    sum_dy[c] = sums.dy;
    sum_dy_xhat[c] = dy_xhat;
    if (dgamma) dgamma[c] += dy_xhat;
    if (dbeta) dbeta[c] += sums.dy;
  }
}

template <class Gradient>
__global__ void __launch_bounds__(kReduceThreads)
    gradient_sums_partial_channels_last_kernel(View<const typename Gradient::Storage> x,
                                               Gradient dy, const float* mean,
                                               GradientSums* partials) {
  const int64_t plane = x.shape.plane();
  channels_last_partial(
      x.shape.c, plane, x.shape.n * plane, GradientSums{0.0f, 0.0f},
      [&](GradientSums& sums, int64_t c, int64_t image, int64_t pixel) {
        const float g = dy(image, c, pixel);
        sums.dy += g;
        sums.dy_centered += g * (widen(x.at(image, c, pixel)) - mean[c]);
      },
      Plus{}, partials);
}

// Phase 1 of a per-channel reduction of x, in its layout: channels x splits partials of type
// Partial in `scratch`, written by launch_channels_last(grid, stream, partials) or
// launch_nchw(split, stream, partials). Returns them and the splits per channel, for phase 2.
template <class Partial, class T, class ChannelsLast, class Nchw>
std::pair<Partial*, unsigned> reduce_partials(const View<T>& x, detail::ScratchFrame& scratch,
                                              const ChannelsLast& launch_channels_last,
                                              const Nchw& launch_nchw) {
  const cudaStream_t stream = stream_of(x.device);
  const bool channels_last = x.channels_last();
  const ChannelsLastGrid grid(x.shape);
  const ChannelSplit split =
      channels_last ? ChannelSplit{} : channel_split(x.shape, x.device.index);
  const unsigned splits = channels_last ? grid.splits : split.splits;
  auto* partials =
      static_cast<Partial*>(scratch.take(int64_t(sizeof(Partial)) * splits * x.shape.c, x.device));
  if (channels_last)
    launch_channels_last(grid, stream, partials);
  else
    launch_nchw(split, stream, partials);
  BAREYOLO_CUDA_CHECK_LAUNCH();
  return {partials, splits};
}

template <class Gradient>
void gradient_sums(View<const typename Gradient::Storage> x, Gradient dy, const float* mean,
                   const float* invstd, float* sum_dy, float* sum_dy_xhat, float* dgamma,
                   float* dbeta) {
  const int64_t channels = x.shape.c;
  if (channels == 0) return;
  detail::ScratchFrame scratch;
  const auto [partials, splits] = reduce_partials<GradientSums>(
      x, scratch,
      [&](const ChannelsLastGrid& grid, cudaStream_t stream, GradientSums* out) {
        gradient_sums_partial_channels_last_kernel<<<grid.grid, grid.block, 0, stream>>>(x, dy,
                                                                                         mean, out);
      },
      [&](const ChannelSplit& split, cudaStream_t stream, GradientSums* out) {
        gradient_sums_partial_kernel<<<dim3(split.splits, unsigned(channels)), kReduceThreads, 0,
                                       stream>>>(x, dy, mean, split.per_block, out);
      });
  const cudaStream_t stream = stream_of(x.device);
  gradient_sums_final_kernel<<<unsigned(channels), kReduceThreads, 0, stream>>>(
      partials, splits, invstd, sum_dy, sum_dy_xhat, dgamma, dbeta);
  BAREYOLO_CUDA_CHECK_LAUNCH();
}

// ---- per-channel statistics -------------------------------------------------------------

// save_mean = mean (they may be one buffer), invstd, and the running statistics' update with
// the unbiased variance: the CPU's formulas, in double (kernels/batchnorm_statistics.h).
__global__ void train_statistics_kernel(int64_t channels, int64_t count, ops::BatchNormParams p,
                                        const float* mean, const float* m2, float* save_mean,
                                        float* invstd, float* running_mean, float* running_var) {
  const int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (c >= channels) return;
  const ops::batchnorm::ChannelStatistics statistics =
      ops::batchnorm::channel_statistics(mean[c], m2[c], count, running_mean[c], running_var[c], p);
  save_mean[c] = mean[c];
  invstd[c] = float(statistics.invstd);
  running_mean[c] = float(statistics.running_mean);
  running_var[c] = float(statistics.running_var);
}

__global__ void inverse_std_kernel(int64_t channels, const float* variance, double eps,
                                   float* invstd) {
  const int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (c < channels) invstd[c] = float(ops::batchnorm::inverse_std(variance[c], eps));
}

unsigned blocks_for(int64_t count, int threads) {
  return static_cast<unsigned>((count + threads - 1) / threads);
}

// invstd of the running variance, in a scratch buffer.
DeviceBuffer running_inverse_std(const float* running_var, int64_t channels, double eps,
                                 const Device& device) {
  DeviceBuffer invstd(sizeof(float) * channels, device.index);
  batchnorm_running_inverse_std(running_var, channels, eps, device.index, invstd.as<float>());
  return invstd;
}

// ---- elementwise passes, one block row per (image, channel) plane ----------------------

template <class Op>
__global__ void __launch_bounds__(kRowThreads)
    plane_kernel(int64_t channels, int64_t plane, Op op) {
  const int64_t row = blockIdx.x, image = row / channels, c = row - image * channels;
  for (int64_t j = blockIdx.y * int64_t(kRowThreads) + threadIdx.x; j < plane;
       j += int64_t(gridDim.y) * kRowThreads)
    op(image, c, j);
}

// Channels last: block row (chunk, image) of (kLanes, kLaneRows) threads; thread row y takes
// pixels chunk * kLaneRows + y, + gridDim.x * kLaneRows, ..., and its lane channels threadIdx.x,
// + kLanes, ...: a warp touches 32 neighbouring channels of one pixel, no division per element.
template <class Op>
__global__ void __launch_bounds__(kReduceThreads)
    pixels_kernel(int64_t channels, int64_t plane, Op op) {
  const int64_t image = blockIdx.y;
  for (int64_t p = blockIdx.x * int64_t{kLaneRows} + threadIdx.y; p < plane;
       p += int64_t(gridDim.x) * kLaneRows)
    for (int64_t c = threadIdx.x; c < channels; c += kLanes) op(image, c, p);
}

// Runs op(image, c, pixel) over every element of `shape`, in the order of `layout`'s memory.
template <class T, class Op>
void launch_planes(const View<T>& layout, Op op) {
  const Shape4& shape = layout.shape;
  const Device& device = layout.device;
  const int64_t rows = shape.n * shape.c, plane = shape.plane();
  if (rows == 0 || plane == 0) return;
  if (layout.channels_last()) {
    if (shape.n > 65535)
      throw std::invalid_argument("batchnorm on CUDA: " + shape.str() +
                                  " has more than 65535 images");
    const int64_t chunks = std::min<int64_t>((plane + kLaneRows - 1) / kLaneRows, 65535);
    pixels_kernel<<<dim3(unsigned(chunks), unsigned(shape.n)), dim3(kLanes, kLaneRows), 0,
                    stream_of(device)>>>(shape.c, plane, op);
    BAREYOLO_CUDA_CHECK_LAUNCH();
    return;
  }
  if (rows > 0x7fffffff)
    throw std::invalid_argument("batchnorm on CUDA: " + shape.str() + " has too many planes");
  // Up to 4 values per thread; the loop covers planes beyond 65535 chunks.
  const int64_t chunks =
      std::min<int64_t>((plane + 4 * kRowThreads - 1) / (4 * kRowThreads), 65535);
  plane_kernel<<<dim3(unsigned(rows), unsigned(chunks)), kRowThreads, 0, stream_of(device)>>>(
      shape.c, plane, op);
  BAREYOLO_CUDA_CHECK_LAUNCH();
}

// y = bn = (x - mean) * (invstd * gamma) + beta; with kSilu, y = silu(bn).
template <bool kSilu, class S>
struct Apply {
  Normalized<S> bn;
  View<S> y;
  __device__ void operator()(int64_t image, int64_t c, int64_t j) const {
    const float v = bn(image, c, j);
    if constexpr (kSilu)
      y.at(image, c, j) = narrow<S>(silu(v));
    else
      y.at(image, c, j) = narrow<S>(v);
  }
};

// dx += (or =, Gradient::kWritesDx) value, rounded once into dx's storage.
template <class Gradient>
__device__ void store_dx(typename Gradient::Storage& dx, float value) {
  using S = typename Gradient::Storage;
  if constexpr (Gradient::kWritesDx)
    dx = narrow<S>(value);
  else
    dx = narrow<S>(widen(dx) + value);
}

// dx += (or =) gamma * invstd * (dy - sum_dy / count - xhat * sum_dy_xhat / count)
template <class Gradient>
struct BackwardApply {
  View<const typename Gradient::Storage> x;
  Gradient dy;
  View<typename Gradient::Storage> dx;
  const float *mean, *invstd, *gamma, *sum_dy, *sum_dy_xhat;
  float count;
  __device__ void operator()(int64_t image, int64_t c, int64_t j) const {
    const float scale = gamma[c] * invstd[c], inv = invstd[c];
    const float mean_dy = sum_dy[c] / count, mean_dy_xhat = sum_dy_xhat[c] / count;
    const float xc = widen(x.at(image, c, j)) - mean[c];
    store_dx<Gradient>(dx.at(image, c, j),
                       scale * (dy(image, c, j) - mean_dy - xc * inv * mean_dy_xhat));
  }
};

// dx += (or =) dy * gamma * invstd (evaluation: the statistics are constants)
template <class Gradient>
struct EvalBackwardApply {
  Gradient dy;
  View<typename Gradient::Storage> dx;
  const float *gamma, *invstd;
  __device__ void operator()(int64_t image, int64_t c, int64_t j) const {
    store_dx<Gradient>(dx.at(image, c, j), gamma[c] * invstd[c] * dy(image, c, j));
  }
};

// ---- channels last, 16 bytes at a time -----------------------------------------------------
// Where every view of the apply or the backward apply is packed channels last, its channels a
// whole number of 16-byte vectors (kPerVector<S>: 4 floats, 8 bf16) and each view 16-byte aligned,
// the pass loads and stores 16 bytes per thread. A block's threads are a whole number of channel
// groups (c / kPerVector<S> of them), so a thread keeps one group of channels through its
// grid-stride loop and holds their parameters in registers: no per-element parameter load and
// no division. The formulas are Apply's and BackwardApply's, term for term.
// (Vector, kPerVector, load_vector, store_vector: pointwise.cuh.)

// Whether a pass over `shape` can take `view` 16 bytes at a time.
template <class T>
bool takes_vectors(const View<T>& view, const Shape4& shape) {
  using S = std::remove_const_t<T>;
  return view.shape == shape && view.channels_last() && view.packed() &&
         shape.c % kPerVector<S> == 0 && shape.c / kPerVector<S> <= kRowThreads &&
         vector_aligned(view);
}

// pass(channels, e) for the element offset e of every vector, in threads that each keep the
// group of channels pass.channels(first channel) gave them.
template <class S, class Pass>
__global__ void __launch_bounds__(kRowThreads)
    vectors_kernel(int64_t vectors, int64_t groups, Pass pass) {
  const int64_t first = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (first >= vectors) return;
  const typename Pass::Channels channels = pass.channels((first % groups) * kPerVector<S>);
  for (int64_t v = first; v < vectors; v += int64_t(gridDim.x) * blockDim.x)
    pass(channels, v * kPerVector<S>);
}

template <class S, class Pass>
void launch_vectors(const Shape4& shape, const Device& device, Pass pass) {
  const int64_t groups = shape.c / kPerVector<S>, vectors = shape.numel() / kPerVector<S>;
  if (vectors == 0) return;
  const int threads = int(kRowThreads / groups * groups);  // a multiple of the groups
  const int64_t blocks = std::min<int64_t>((vectors + threads - 1) / threads, 1 << 16);
  vectors_kernel<S><<<unsigned(blocks), threads, 0, stream_of(device)>>>(vectors, groups, pass);
  BAREYOLO_CUDA_CHECK_LAUNCH();
}

// Apply, 16 bytes at a time: y = bn (or silu(bn)), bn = (x - mean) * (invstd * gamma) + beta.
template <bool kSilu, class S>
struct ApplyVectors {
  struct Channels {
    float mean[kPerVector<S>], scale[kPerVector<S>], beta[kPerVector<S>];
  };
  const S* x;
  S* y;
  const float *mean, *invstd, *gamma, *beta;
  __device__ Channels channels(int64_t c0) const {
    Channels p;
    for (int k = 0; k < kPerVector<S>; ++k) {
      p.mean[k] = mean[c0 + k];
      p.scale[k] = invstd[c0 + k] * gamma[c0 + k];
      p.beta[k] = beta[c0 + k];
    }
    return p;
  }
  __device__ void operator()(const Channels& p, int64_t e) const {
    const Vector<S> in = load_vector(x + e);
    Vector<S> out;
    for (int k = 0; k < kPerVector<S>; ++k) {
      const float v = (widen(in.value[k]) - p.mean[k]) * p.scale[k] + p.beta[k];
      if constexpr (kSilu)
        out.value[k] = narrow<S>(silu(v));
      else
        out.value[k] = narrow<S>(v);
    }
    store_vector(y + e, out);
  }
};

// BackwardApply, 16 bytes at a time; with kSilu dL/dbn is SiluGradient's (the pre-activation
// normalised again with the gradient's own statistics) and dx is written, else dy is dL/dbn and
// dx is added to.
template <bool kSilu, class S>
struct BackwardApplyVectors {
  struct Channels {
    float mean[kPerVector<S>], scale[kPerVector<S>], inv[kPerVector<S>], mean_dy[kPerVector<S>],
        mean_dy_xhat[kPerVector<S>];
    float bn_mean[kPerVector<S>], bn_scale[kPerVector<S>], bn_beta[kPerVector<S>];  // kSilu's
  };
  const S *x, *dy;
  S* dx;
  const float *mean, *invstd, *gamma, *sum_dy, *sum_dy_xhat;
  float count;
  const float *bn_mean, *bn_invstd, *bn_gamma, *bn_beta;  // kSilu's
  __device__ Channels channels(int64_t c0) const {
    Channels p;
    for (int k = 0; k < kPerVector<S>; ++k) {
      const int64_t c = c0 + k;
      p.mean[k] = mean[c];
      p.scale[k] = gamma[c] * invstd[c];
      p.inv[k] = invstd[c];
      p.mean_dy[k] = sum_dy[c] / count;
      p.mean_dy_xhat[k] = sum_dy_xhat[c] / count;
      if constexpr (kSilu) {
        p.bn_mean[k] = bn_mean[c];
        p.bn_scale[k] = bn_invstd[c] * bn_gamma[c];
        p.bn_beta[k] = bn_beta[c];
      }
    }
    return p;
  }
  __device__ void operator()(const Channels& p, int64_t e) const {
    const Vector<S> xs = load_vector(x + e), gradient = load_vector(dy + e);
    Vector<S> out;
    if constexpr (!kSilu) out = load_vector(dx + e);  // added to
    for (int k = 0; k < kPerVector<S>; ++k) {
      const float xk = widen(xs.value[k]);
      float g = widen(gradient.value[k]);
      if constexpr (kSilu) g = silu_gradient((xk - p.bn_mean[k]) * p.bn_scale[k] + p.bn_beta[k], g);
      const float xc = xk - p.mean[k];
      const float value = p.scale[k] * (g - p.mean_dy[k] - xc * p.inv[k] * p.mean_dy_xhat[k]);
      if constexpr (kSilu)
        out.value[k] = narrow<S>(value);
      else
        out.value[k] = narrow<S>(widen(out.value[k]) + value);
    }
    store_vector(dx + e, out);
  }
};

// The vector pass of BackwardApply for a gradient source.
template <class S>
BackwardApplyVectors<false, S> backward_vectors(const PlainGradient<S>&) {
  return {};
}
template <class S>
BackwardApplyVectors<true, S> backward_vectors(const SiluGradient<S>& source) {
  BackwardApplyVectors<true, S> pass{};
  pass.bn_mean = source.bn.mean;
  pass.bn_invstd = source.bn.invstd;
  pass.bn_gamma = source.bn.gamma;
  pass.bn_beta = source.bn.beta;
  return pass;
}

// The backward ops for either gradient source; the public ops below pick one.
template <class Gradient, class S = typename Gradient::Storage>
void backward_apply(View<const S> x, Gradient dy, const float* mean, const float* invstd,
                    const float* gamma, const float* sum_dy, const float* sum_dy_xhat,
                    int64_t count, View<S> dx) {
  if (takes_vectors(x, x.shape) && takes_vectors(dy.dy, x.shape) && takes_vectors(dx, x.shape)) {
    auto pass = backward_vectors(dy);
    pass.x = x.data;
    pass.dy = dy.dy.data;
    pass.dx = dx.data;
    pass.mean = mean;
    pass.invstd = invstd;
    pass.gamma = gamma;
    pass.sum_dy = sum_dy;
    pass.sum_dy_xhat = sum_dy_xhat;
    pass.count = static_cast<float>(count);
    return launch_vectors<S>(x.shape, x.device, pass);
  }
  launch_planes(x, BackwardApply<Gradient>{x, dy, dx, mean, invstd, gamma, sum_dy, sum_dy_xhat,
                                           static_cast<float>(count)});
}

template <class Gradient, class S = typename Gradient::Storage>
void backward_train(View<const S> x, Gradient dy, const float* gamma, const float* save_mean,
                    const float* save_invstd, View<S> dx, float* dgamma, float* dbeta) {
  const int64_t channels = x.shape.c;
  if (channels == 0) return;
  detail::ScratchFrame scratch;
  float* sum_dy =
      static_cast<float*>(scratch.take(2 * int64_t(sizeof(float)) * channels, x.device));
  float* sum_dy_xhat = sum_dy + channels;
  gradient_sums(x, dy, save_mean, save_invstd, sum_dy, sum_dy_xhat, dgamma, dbeta);
  backward_apply(x, dy, save_mean, save_invstd, gamma, sum_dy, sum_dy_xhat,
                 x.shape.n * x.shape.plane(), dx);
}

// invstd: the running statistics' (running_inverse_std), which the caller also gives dy.
template <class Gradient, class S = typename Gradient::Storage>
void backward_eval(View<const S> x, Gradient dy, const float* gamma, const float* running_mean,
                   const float* invstd, View<S> dx, float* dgamma, float* dbeta) {
  const int64_t channels = x.shape.c;
  detail::ScratchFrame scratch;
  float* sums = static_cast<float*>(scratch.take(2 * int64_t(sizeof(float)) * channels, x.device));
  gradient_sums(x, dy, running_mean, invstd, sums, sums + channels, dgamma, dbeta);
  launch_planes(x, EvalBackwardApply<Gradient>{dy, dx, gamma, invstd});
}

void require_silu_shapes(const char* op, const Shape4& x, const Shape4& dy) {
  if (!(dy == x))
    throw std::invalid_argument(std::string(op) + ": x has shape " + x.str() + " but dy has " +
                                dy.str() + "; they must match");
}

}  // namespace

// ---- the ops ----------------------------------------------------------------------------
// Each op is one template over the activations' storage S (cuda_ops.h), instantiated for float
// and bf16 at the end of this file.

template <class S>
void batchnorm_moments(View<const S> x, float* mean, float* m2) {
  const int64_t channels = x.shape.c;
  if (channels == 0) return;
  detail::ScratchFrame scratch;
  const auto [partials, splits] = reduce_partials<Moments>(
      x, scratch,
      [&](const ChannelsLastGrid& grid, cudaStream_t stream, Moments* out) {
        moments_partial_channels_last_kernel<<<grid.grid, grid.block, 0, stream>>>(x, out);
      },
      [&](const ChannelSplit& split, cudaStream_t stream, Moments* out) {
        moments_partial_kernel<<<dim3(split.splits, unsigned(channels)), kReduceThreads, 0,
                                 stream>>>(x, split.per_block, out);
      });
  const cudaStream_t stream = stream_of(x.device);
  moments_final_kernel<<<unsigned(channels), kReduceThreads, 0, stream>>>(partials, splits, mean,
                                                                          m2);
  BAREYOLO_CUDA_CHECK_LAUNCH();
}

// Apply over every element: 16 bytes at a time where the views allow it, else plane by plane
// (or pixel by pixel in channels last).
template <bool kSilu, class S>
void apply(View<const S> x, const float* mean, const float* invstd, const float* gamma,
           const float* beta, View<S> y) {
  if (takes_vectors(x, x.shape) && takes_vectors(y, x.shape))
    return launch_vectors<S>(x.shape, x.device,
                             ApplyVectors<kSilu, S>{x.data, y.data, mean, invstd, gamma, beta});
  launch_planes(x, Apply<kSilu, S>{{x, mean, invstd, gamma, beta}, y});
}

template <class S>
void batchnorm_apply(View<const S> x, const float* mean, const float* invstd, const float* gamma,
                     const float* beta, View<S> y) {
  apply<false>(x, mean, invstd, gamma, beta, y);
}

template <class S>
void batchnorm_silu_apply(View<const S> x, const float* mean, const float* invstd,
                          const float* gamma, const float* beta, View<S> y) {
  require_silu_shapes("batchnorm_silu_apply", x.shape, y.shape);
  apply<true>(x, mean, invstd, gamma, beta, y);
}

template <class S>
void batchnorm_backward_reduce(View<const S> x, View<const S> dy, const float* mean,
                               const float* invstd, float* sum_dy, float* sum_dy_xhat) {
  gradient_sums(x, PlainGradient<S>{dy}, mean, invstd, sum_dy, sum_dy_xhat, nullptr, nullptr);
}

template <class S>
void batchnorm_backward_apply(View<const S> x, View<const S> dy, const float* mean,
                              const float* invstd, const float* gamma, const float* sum_dy,
                              const float* sum_dy_xhat, int64_t count, View<S> dx) {
  backward_apply(x, PlainGradient<S>{dy}, mean, invstd, gamma, sum_dy, sum_dy_xhat, count, dx);
}

template <class S>
void batchnorm_silu_backward_reduce(View<const S> x, View<const S> dy, const float* mean,
                                    const float* invstd, const float* gamma, const float* beta,
                                    float* sum_dy, float* sum_dy_xhat, View<S>) {
  require_silu_shapes("batchnorm_silu_backward_reduce", x.shape, dy.shape);
  gradient_sums(x, SiluGradient<S>{dy, {x, mean, invstd, gamma, beta}}, mean, invstd, sum_dy,
                sum_dy_xhat, nullptr, nullptr);
}

template <class S>
void batchnorm_silu_backward_apply(View<const S> x, View<const S> dy, const float* mean,
                                   const float* invstd, const float* gamma, const float* beta,
                                   const float* sum_dy, const float* sum_dy_xhat, int64_t count,
                                   View<S> dx) {
  require_silu_shapes("batchnorm_silu_backward_apply", x.shape, dy.shape);
  backward_apply(x, SiluGradient<S>{dy, {x, mean, invstd, gamma, beta}}, mean, invstd, gamma,
                 sum_dy, sum_dy_xhat, count, dx);
}

template <class S>
void batchnorm_silu_backward_train(View<const S> x, View<const S> dy, const float* gamma,
                                   const float* beta, const float* save_mean,
                                   const float* save_invstd, View<S> dx, float* dgamma,
                                   float* dbeta) {
  require_silu_shapes("batchnorm_silu_backward_train", x.shape, dy.shape);
  backward_train(x, SiluGradient<S>{dy, {x, save_mean, save_invstd, gamma, beta}}, gamma, save_mean,
                 save_invstd, dx, dgamma, dbeta);
}

template <class S>
void batchnorm_silu_backward_eval(View<const S> x, View<const S> dy, const float* gamma,
                                  const float* beta, const float* running_mean,
                                  const float* running_var, ops::BatchNormParams p, View<S> dx,
                                  float* dgamma, float* dbeta) {
  require_silu_shapes("batchnorm_silu_backward_eval", x.shape, dy.shape);
  if (x.shape.c == 0) return;
  const DeviceBuffer invstd = running_inverse_std(running_var, x.shape.c, p.eps, x.device);
  const float* inv = invstd.as<float>();
  backward_eval(x, SiluGradient<S>{dy, {x, running_mean, inv, gamma, beta}}, gamma, running_mean,
                inv, dx, dgamma, dbeta);
}

template <class S>
void batchnorm_train_statistics(View<const S> x, ops::BatchNormParams p, float* running_mean,
                                float* running_var, float* save_mean, float* save_invstd) {
  const int64_t channels = x.shape.c;
  if (channels == 0) return;
  detail::ScratchFrame scratch;
  float* m2 = static_cast<float*>(scratch.take(int64_t(sizeof(float)) * channels, x.device));
  batchnorm_moments(x, save_mean, m2);
  batchnorm_statistics_from_moments(save_mean, m2, channels, x.shape.n * x.shape.plane(), p,
                                    x.device.index, running_mean, running_var, save_mean,
                                    save_invstd);
}

void batchnorm_statistics_from_moments(const float* mean, const float* m2, int64_t channels,
                                       int64_t count, ops::BatchNormParams p, int device,
                                       float* running_mean, float* running_var, float* save_mean,
                                       float* save_invstd) {
  if (channels == 0) return;
  train_statistics_kernel<<<blocks_for(channels, 128), 128, 0, stream_of(device)>>>(
      channels, count, p, mean, m2, save_mean, save_invstd, running_mean, running_var);
  BAREYOLO_CUDA_CHECK_LAUNCH();
}

void batchnorm_running_inverse_std(const float* running_var, int64_t channels, double eps,
                                   int device, float* invstd) {
  if (channels == 0) return;
  inverse_std_kernel<<<blocks_for(channels, 128), 128, 0, stream_of(device)>>>(
      channels, running_var, eps, invstd);
  BAREYOLO_CUDA_CHECK_LAUNCH();
}

template <class S>
void batchnorm_forward_train(View<const S> x, const float* gamma, const float* beta,
                             ops::BatchNormParams p, float* running_mean, float* running_var,
                             float* save_mean, float* save_invstd, View<S> y) {
  if (x.shape.c == 0) return;
  batchnorm_train_statistics(x, p, running_mean, running_var, save_mean, save_invstd);
  batchnorm_apply(x, save_mean, save_invstd, gamma, beta, y);
}

template <class S>
void batchnorm_backward_train(View<const S> x, View<const S> dy, const float* gamma,
                              const float* save_mean, const float* save_invstd, View<S> dx,
                              float* dgamma, float* dbeta) {
  backward_train(x, PlainGradient<S>{dy}, gamma, save_mean, save_invstd, dx, dgamma, dbeta);
}

template <class S>
void batchnorm_forward_eval(View<const S> x, const float* gamma, const float* beta,
                            const float* running_mean, const float* running_var,
                            ops::BatchNormParams p, View<S> y) {
  const DeviceBuffer invstd = running_inverse_std(running_var, x.shape.c, p.eps, x.device);
  batchnorm_apply(x, running_mean, invstd.as<float>(), gamma, beta, y);
}

template <class S>
void batchnorm_backward_eval(View<const S> x, View<const S> dy, const float* gamma,
                             const float* running_mean, const float* running_var,
                             ops::BatchNormParams p, View<S> dx, float* dgamma, float* dbeta) {
  if (x.shape.c == 0) return;
  const DeviceBuffer invstd = running_inverse_std(running_var, x.shape.c, p.eps, x.device);
  backward_eval(x, PlainGradient<S>{dy}, gamma, running_mean, invstd.as<float>(), dx, dgamma,
                dbeta);
}

#define BAREYOLO_INSTANTIATE_BATCHNORM(S)                                                          \
  template void batchnorm_moments<S>(View<const S>, float*, float*);                               \
  template void batchnorm_apply<S>(View<const S>, const float*, const float*, const float*,        \
                                   const float*, View<S>);                                         \
  template void batchnorm_silu_apply<S>(View<const S>, const float*, const float*, const float*,   \
                                        const float*, View<S>);                                    \
  template void batchnorm_backward_reduce<S>(View<const S>, View<const S>, const float*,           \
                                             const float*, float*, float*);                        \
  template void batchnorm_backward_apply<S>(View<const S>, View<const S>, const float*,            \
                                            const float*, const float*, const float*,              \
                                            const float*, int64_t, View<S>);                       \
  template void batchnorm_silu_backward_reduce<S>(View<const S>, View<const S>, const float*,      \
                                                  const float*, const float*, const float*,        \
                                                  float*, float*, View<S>);                        \
  template void batchnorm_silu_backward_apply<S>(View<const S>, View<const S>, const float*,       \
                                                 const float*, const float*, const float*,         \
                                                 const float*, const float*, int64_t, View<S>);    \
  template void batchnorm_silu_backward_train<S>(View<const S>, View<const S>, const float*,       \
                                                 const float*, const float*, const float*,         \
                                                 View<S>, float*, float*);                         \
  template void batchnorm_silu_backward_eval<S>(View<const S>, View<const S>, const float*,        \
                                                const float*, const float*, const float*,          \
                                                ops::BatchNormParams, View<S>, float*, float*);    \
  template void batchnorm_train_statistics<S>(View<const S>, ops::BatchNormParams, float*, float*, \
                                              float*, float*);                                     \
  template void batchnorm_forward_train<S>(View<const S>, const float*, const float*,              \
                                           ops::BatchNormParams, float*, float*, float*, float*,   \
                                           View<S>);                                               \
  template void batchnorm_backward_train<S>(View<const S>, View<const S>, const float*,            \
                                            const float*, const float*, View<S>, float*, float*);  \
  template void batchnorm_forward_eval<S>(View<const S>, const float*, const float*, const float*, \
                                          const float*, ops::BatchNormParams, View<S>);            \
  template void batchnorm_backward_eval<S>(View<const S>, View<const S>, const float*,             \
                                           const float*, const float*, ops::BatchNormParams,       \
                                           View<S>, float*, float*);
BAREYOLO_INSTANTIATE_BATCHNORM(float)
BAREYOLO_INSTANTIATE_BATCHNORM(bf16)

}  // namespace bareyolo::cuda
