// kernels/cuda/conv2d_bias.cu — a convolution's bias on the GPU, for both convolution paths
// (conv2d_paths.h) and both storages (S: float, or bf16 under mixed precision; the bias and its
// gradient are float):
//   add_channel_bias   y[n][o][p] = y + bias[o], each result narrowed once into y's storage;
//                      y in either layout;
//   add_bias_gradient  dbias[o] += the sum over images and positions of dy[n][o][p], one block
//                      per channel, in double (a channel sums batch * HW values, as the CPU
//                      does), combined as a fixed tree: the same bits every run.
#include <algorithm>

#include "kernels/bf16.h"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/conv2d_paths.h"
#include "kernels/cuda/pointwise.cuh"
#include "kernels/cuda/runtime/stream.h"

namespace bareyolo::cuda {

namespace {

template <class S>
struct AddBias {
  View<S> y;
  const float* bias;
  ElementOrder order = ElementOrder::of(y);
  __device__ void operator()(int64_t n, int64_t i) const {
    S& value = element(y, order, n, i);
    value = narrow<S>(widen(value) + bias[order.place(i).c]);
  }
};

// In either layout the same values in the same order (a channels-last dy is read with its pixel
// stride: the head's few biased convolutions are small).
template <class S>
__global__ void __launch_bounds__(kReduceThreads)
    bias_gradient_kernel(View<const S> dy, float* dbias) {
  const int64_t o = blockIdx.x, plane = dy.shape.plane();
  double sum = 0.0;
  for (int64_t n = 0; n < dy.shape.n; ++n)
    for (int64_t p = threadIdx.x; p < plane; p += kReduceThreads) sum += widen(dy.at(n, o, p));
  sum = block_reduce(sum, Plus{});
  if (threadIdx.x == 0) dbias[o] += static_cast<float>(sum);
}

template <class S>
void run_bias_gradient(View<const S> dy, float* dbias) {
  if (dy.shape.c == 0) return;
  bias_gradient_kernel<<<unsigned(dy.shape.c), kReduceThreads, 0, stream_of(dy.device)>>>(dy,
                                                                                          dbias);
  BAREYOLO_CUDA_CHECK_LAUNCH();
}

}  // namespace

void add_channel_bias(View<float> y, const float* bias) {
  launch_pointwise(y.shape, y.device, false, AddBias<float>{y, bias});
}
void add_channel_bias(View<bf16> y, const float* bias) {
  launch_pointwise(y.shape, y.device, false, AddBias<bf16>{y, bias});
}
void add_bias_gradient(View<const float> dy, float* dbias) { run_bias_gradient(dy, dbias); }
void add_bias_gradient(View<const bf16> dy, float* dbias) { run_bias_gradient(dy, dbias); }

}  // namespace bareyolo::cuda
