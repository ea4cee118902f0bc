// kernels/cuda/optim.cu — the optimizer's arithmetic over flat buffers on the GPU: SGD with
// Nesterov momentum and weight decay, the EMA of weights, and gradient-norm clipping's sum of
// squares and scale; same formulas as kernels/cpu/optim.cpp.
//
// sum_of_squares is deterministic: a fixed grid of kPartialBlocks blocks accumulates in
// double over a grid-stride loop (so element k always lands in the same thread), each block
// reduces by a fixed tree, and one block reduces the partials by the same tree. The result is
// the same on every run and every GPU; it differs from the CPU's ordered sum by rounding only.
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/pointwise.cuh"

namespace bareyolo::cuda {

namespace {

struct SgdStep {
  View<float> param;
  View<const float> grad;
  View<float> velocity;
  float lr, momentum, decay;
  bool nesterov;
  __device__ void operator()(int64_t n, int64_t i) const {
    float& w = param.image(n)[i];
    float& v = velocity.image(n)[i];
    const float step_grad = grad.image(n)[i] + decay * w;
    v = momentum * v + step_grad;
    w -= lr * (nesterov ? step_grad + momentum * v : v);
  }
};

struct EmaUpdate {
  View<float> average;
  View<const float> value;
  float decay, keep;
  __device__ void operator()(int64_t n, int64_t i) const {
    float& a = average.image(n)[i];
    a = decay * a + keep * value.image(n)[i];
  }
};

struct Scale {
  View<float> x;
  float factor;
  __device__ void operator()(int64_t n, int64_t i) const { x.image(n)[i] *= factor; }
};

constexpr int kReduceThreads = 256;
constexpr int kPartialBlocks = 1024;

// Sums `value` over the block by a fixed tree; the result is in thread 0.
__device__ double block_sum(double value) {
  __shared__ double sums[kReduceThreads];
  sums[threadIdx.x] = value;
  __syncthreads();
  for (int half = kReduceThreads / 2; half > 0; half /= 2) {
    if (int(threadIdx.x) < half) sums[threadIdx.x] += sums[threadIdx.x + half];
    __syncthreads();
  }
  return sums[0];
}

__global__ void partial_sums_of_squares(View<const float> x, bool flat, double* partials) {
  const int64_t total = x.shape.numel(), per_image = x.shape.image_numel();
  double sum = 0;
  for (int64_t index = blockIdx.x * int64_t(kReduceThreads) + threadIdx.x; index < total;
       index += int64_t(kPartialBlocks) * kReduceThreads) {
    const double v = flat ? x.data[index] : x.image(index / per_image)[index % per_image];
    sum += v * v;
  }
  const double block = block_sum(sum);
  if (threadIdx.x == 0) partials[blockIdx.x] = block;
}

__global__ void sum_partials(const double* partials, double* result) {
  double sum = 0;
  for (int i = threadIdx.x; i < kPartialBlocks; i += kReduceThreads) sum += partials[i];
  const double total = block_sum(sum);
  if (threadIdx.x == 0) *result = total;
}

}  // namespace

void sgd_step(View<float> param, View<const float> grad, View<float> velocity, ops::SgdParams p) {
  launch_pointwise(param.shape, param.device, all_dense(param, grad, velocity),
                   SgdStep{param, grad, velocity, float(p.lr), float(p.momentum),
                           float(p.weight_decay), p.nesterov});
}

void ema_update(View<float> average, View<const float> value, double decay) {
  launch_pointwise(average.shape, average.device, all_dense(average, value),
                   EmaUpdate{average, value, float(decay), float(1 - decay)});
}

void scale_inplace(View<float> x, double factor) {
  launch_pointwise(x.shape, x.device, x.dense(), Scale{x, float(factor)});
}

double sum_of_squares(View<const float> x) {
  if (x.shape.numel() == 0) return 0;
  const int device = x.device.index;
  // kPartialBlocks partials, then the result.
  struct Scratch {
    void* pointer;
    int device;
    ~Scratch() { free_device(pointer, device); }
  } scratch{malloc_device((kPartialBlocks + 1) * sizeof(double), device), device};
  double* partials = static_cast<double*>(scratch.pointer);
  auto stream = static_cast<cudaStream_t>(compute_stream(device));
  partial_sums_of_squares<<<kPartialBlocks, kReduceThreads, 0, stream>>>(x, x.dense(), partials);
  BAREYOLO_CUDA_CHECK(cudaGetLastError());
  sum_partials<<<1, kReduceThreads, 0, stream>>>(partials, partials + kPartialBlocks);
  BAREYOLO_CUDA_CHECK(cudaGetLastError());
  double result = 0;
  copy(&result, partials + kPartialBlocks, sizeof(double), CopyKind::device_to_host, device);
  return result;
}

}  // namespace bareyolo::cuda
