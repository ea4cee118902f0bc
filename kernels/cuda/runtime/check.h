// kernels/cuda/runtime/check.h — every CUDA runtime call goes through BAREYOLO_CUDA_CHECK, which
// turns a failure into an exception naming the call, file:line and the runtime's own message.
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

}  // namespace bareyolo::cuda

#define BAREYOLO_CUDA_CHECK(call) ::bareyolo::cuda::check((call), #call, __FILE__, __LINE__)
