// kernels/cuda/block_reduce.cuh — reductions over one thread block and launch helpers for the
// per-channel kernels (BatchNorm, conv bias gradient).
//
// block_reduce combines one value per thread as a fixed binary tree in shared memory: the
// order of every addition depends on the block size only, so results are the same bits on
// every run (no atomics), and float error grows with log2(threads), not with threads.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "kernels/cuda/runtime/check.h"

namespace bareyolo::cuda {

// Threads of every block that calls block_reduce (a power of two).
constexpr int kReduceThreads = 256;

// Combines `value` of every thread of the block with merge(a, b) (associative); every thread
// gets the result. T must be trivially constructible (it lives in shared memory). All
// threads of the block must call it.
template <class T, class Merge>
__device__ T block_reduce(T value, Merge merge) {
  __shared__ T buffer[kReduceThreads];
  buffer[threadIdx.x] = value;
  __syncthreads();
  for (int half = kReduceThreads / 2; half > 0; half /= 2) {
    if (int(threadIdx.x) < half)
      buffer[threadIdx.x] = merge(buffer[threadIdx.x], buffer[threadIdx.x + half]);
    __syncthreads();
  }
  const T result = buffer[0];
  __syncthreads();  // the buffer may be reused by the next call
  return result;
}

struct Plus {
  template <class T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};

// Multiprocessors of `device`, read once: grids are sized to fill them.
inline int multiprocessor_count(int device) {
  static std::atomic<int> counts[64] = {};
  std::atomic<int>& cached = counts[device & 63];
  if (cached.load() == 0) {
    int count = 0;
    BAREYOLO_CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
    cached.store(count);
  }
  return cached.load();
}

}  // namespace bareyolo::cuda
