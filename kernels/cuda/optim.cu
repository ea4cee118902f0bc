// kernels/cuda/optim.cu — the optimizer's arithmetic over flat buffers (whole parameter arenas)
// on the GPU: SGD with Nesterov momentum and weight decay, Adam and AdamW, each element with its
// group's settings (one launch for the arena; the groups' factors are read from device memory,
// where the host left them: a CUDA graph replays the launch with new settings), the EMA
// of weights, and gradient-norm clipping's sum of squares and scale, whose factor is computed on
// the device from the sum the first kernel left there: no host round trip. The per-element
// formulas are kernels/cpu/optim.cpp's (kernels/optim_update.h).
//
// sum_of_squares is deterministic: a fixed grid of kPartialBlocks blocks accumulates in
// double over a grid-stride loop (so element k always lands in the same thread), each block
// reduces by block_reduce's fixed tree, and one block reduces the partials by the same tree.
// The result is the same on every run and every GPU; it differs from the CPU's ordered sum by
// rounding only.
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/pointwise.cuh"
#include "kernels/cuda/runtime/stream.h"
#include "kernels/optim_update.h"
#include "kernels/scratch_stack.h"

namespace bareyolo::cuda {

namespace {

struct SgdStep {
  View<float> param;
  View<const float> grad;
  View<float> velocity;
  View<const uint8_t> group_of;
  const ops::SgdFactors<float>* groups;
  __device__ void operator()(int64_t n, int64_t i) const {
    groups[group_of.image(n)[i]].step(param.image(n)[i], velocity.image(n)[i], grad.image(n)[i]);
  }
};

struct AdamStep {
  View<float> param;
  View<const float> grad;
  View<float> exp_avg, exp_avg_sq;
  View<const uint8_t> group_of;
  const ops::AdamFactors<float>* groups;
  __device__ void operator()(int64_t n, int64_t i) const {
    groups[group_of.image(n)[i]].step(param.image(n)[i], exp_avg.image(n)[i],
                                      exp_avg_sq.image(n)[i], grad.image(n)[i]);
  }
};

struct EmaUpdate {
  View<float> average;
  View<const float> value;
  const ops::EmaFactors<float>* ema;
  __device__ void operator()(int64_t n, int64_t i) const {
    float& a = average.image(n)[i];
    a = ema->blend(a, value.image(n)[i]);
  }
};

// PyTorch's clip_grad_norm_ factor, from the sum of squares on the device; x unchanged when
// the norm is within max_norm.
struct ClipToNorm {
  View<float> x;
  const double* sum_of_squares;
  double max_norm;
  __device__ void operator()(int64_t n, int64_t i) const {
    const double factor = ops::clip_factor(*sum_of_squares, max_norm);
    if (!(factor >= 1)) x.image(n)[i] *= float(factor);  // a NaN norm spreads, as on the CPU
  }
};

constexpr int kPartialBlocks = 1024;

__global__ void partial_sums_of_squares(View<const float> x, bool flat, double* partials) {
  const int64_t total = x.shape.numel(), per_image = x.shape.image_numel();
  double sum = 0;
  for (int64_t index = blockIdx.x * int64_t(kReduceThreads) + threadIdx.x; index < total;
       index += int64_t(kPartialBlocks) * kReduceThreads) {
    const double v = flat ? x.data[index] : x.image(index / per_image)[index % per_image];
    sum += v * v;
  }
  const double block = block_reduce(sum, Plus{});
  if (threadIdx.x == 0) partials[blockIdx.x] = block;
}

__global__ void sum_partials(const double* partials, double* result) {
  double sum = 0;
  for (int i = threadIdx.x; i < kPartialBlocks; i += kReduceThreads) sum += partials[i];
  const double total = block_reduce(sum, Plus{});
  if (threadIdx.x == 0) *result = total;
}

}  // namespace

void sgd_step(View<float> param, View<const float> grad, View<float> velocity,
              View<const uint8_t> group_of, const ops::SgdFactors<float>* groups, int) {
  launch_pointwise(param.shape, param.device, all_dense(param, grad, velocity, group_of),
                   SgdStep{param, grad, velocity, group_of, groups});
}

void adam_step(View<float> param, View<const float> grad, View<float> exp_avg,
               View<float> exp_avg_sq, View<const uint8_t> group_of,
               const ops::AdamFactors<float>* groups, int) {
  launch_pointwise(param.shape, param.device, all_dense(param, grad, exp_avg, exp_avg_sq, group_of),
                   AdamStep{param, grad, exp_avg, exp_avg_sq, group_of, groups});
}

void ema_update(View<float> average, View<const float> value,
                const ops::EmaFactors<float>* factors) {
  launch_pointwise(average.shape, average.device, all_dense(average, value),
                   EmaUpdate{average, value, factors});
}

void sum_of_squares(View<const float> x, View<double> result) {
  const int device = x.device.index;
  const cudaStream_t stream = stream_of(device);
  detail::ScratchFrame scratch;
  double* partials =
      static_cast<double*>(scratch.take(kPartialBlocks * int64_t(sizeof(double)), x.device));
  partial_sums_of_squares<<<kPartialBlocks, kReduceThreads, 0, stream>>>(x, x.dense(), partials);
  BAREYOLO_CUDA_CHECK_LAUNCH();
  sum_partials<<<1, kReduceThreads, 0, stream>>>(partials, result.data);
  BAREYOLO_CUDA_CHECK_LAUNCH();
}

void clip_to_norm(View<float> x, View<const double> sum_of_squares, double max_norm) {
  launch_pointwise(x.shape, x.device, x.dense(), ClipToNorm{x, sum_of_squares.data, max_norm});
}

}  // namespace bareyolo::cuda
