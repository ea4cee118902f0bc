// bench/gpu_bench.h — what the GPU benches share: their data, their timing on the compute stream,
// and what a bench does where it finds no GPU.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <vector>

#include "engine/tensor.h"                 // defines: Tensor
#include "kernels/cuda/runtime/check.h"    // defines: BAREYOLO_CUDA_CHECK
#include "kernels/cuda/runtime/runtime.h"  // defines: device_count, compute_stream, gpu_required

namespace bareyolo::bench {

inline const Device kGpu = Device::cuda(0);
constexpr int kWarmup = 3, kReps = 20;

// Values in [-2, 2) from a cheap generator (a bench needs finite, varied data, not quality).
inline Tensor filled(Shape4 shape, uint32_t seed) {
  std::vector<float> values(size_t(shape.numel()));
  uint32_t state = seed * 2654435761u + 1;
  for (float& v : values) {
    state = state * 1664525u + 1013904223u;
    v = float(state >> 8) / float(1 << 24) * 4.0f - 2.0f;
  }
  return Tensor::from_vector(values, shape, kGpu);
}

// `values` in `dtype` storage and `layout` on the GPU.
inline Tensor laid(const Tensor& values, DType dtype, Layout layout) {
  Tensor t = Tensor::empty(values.shape(), kGpu, dtype, layout);
  t.convert_from(values);
  return t;
}

// Mean milliseconds of one call of `body` on the compute stream, after kWarmup calls.
inline double time_ms(const std::function<void()>& body, int reps = kReps) {
  auto stream = static_cast<cudaStream_t>(cuda::compute_stream(0));
  for (int i = 0; i < kWarmup; ++i) body();
  cudaEvent_t start, stop;
  BAREYOLO_CUDA_CHECK(cudaEventCreate(&start));
  BAREYOLO_CUDA_CHECK(cudaEventCreate(&stop));
  BAREYOLO_CUDA_CHECK(cudaEventRecord(start, stream));
  for (int i = 0; i < reps; ++i) body();
  BAREYOLO_CUDA_CHECK(cudaEventRecord(stop, stream));
  BAREYOLO_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  BAREYOLO_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return double(ms) / reps;
}

// Where no GPU is usable, the exit status of bench `name`, having said why: 77 (ctest's
// skipped), or 1 where a GPU is required (cuda::gpu_required: BAREYOLO_REQUIRE_GPU, or a driver
// installed), so that a broken driver or library never reads as skipped. nullopt: a GPU is here.
inline std::optional<int> exit_without_gpu(const char* name) {
  if (cuda::device_count() > 0) return std::nullopt;
  if (cuda::gpu_required()) {
    std::fprintf(stderr, "%s: FAILED: a GPU is required here (%s), but none is usable: %s\n", name,
                 cuda::gpu_required_reason().c_str(), cuda::unavailable_reason().c_str());
    return 1;
  }
  std::printf("skipped: %s needs a GPU: %s\n", name, cuda::unavailable_reason().c_str());
  return 77;
}

}  // namespace bareyolo::bench
