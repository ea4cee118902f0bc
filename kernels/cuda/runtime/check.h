// kernels/cuda/runtime/check.h — every CUDA runtime call goes through BAREYOLO_CUDA_CHECK, which
// turns a failure into an exception naming the call, file:line and the runtime's own message;
// every kernel launch is followed by BAREYOLO_CUDA_CHECK_LAUNCH, which also counts it
// (launches() in runtime.h).
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace bareyolo::cuda {

inline void check(cudaError_t status, const char* call, const char* file, int line) {
  if (status == cudaSuccess) return;
  (void)cudaGetLastError();  // clear the sticky-free error so later calls report their own
  throw std::runtime_error(std::string("CUDA error at ") + file + ":" + std::to_string(line) +
                           ": " + call + " failed: " + cudaGetErrorString(status) + " (" +
                           cudaGetErrorName(status) + ")");
}

// Adds one to launches(): a kernel launch, or a library call that queues work on a stream (a
// cuBLAS GEMM, a cuDNN convolution, a CUB sort), which may run several kernels of its own.
void count_launch() noexcept;

}  // namespace bareyolo::cuda

#define BAREYOLO_CUDA_CHECK(call) ::bareyolo::cuda::check((call), #call, __FILE__, __LINE__)

// After a <<<...>>> launch: counts it and reports a bad launch (its configuration, a missing
// kernel image) at this line; errors inside the kernel surface at a later call.
#define BAREYOLO_CUDA_CHECK_LAUNCH() \
  (::bareyolo::cuda::count_launch(), BAREYOLO_CUDA_CHECK(cudaGetLastError()))
