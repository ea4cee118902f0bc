// kernels/cuda/runtime/cublas.cpp — see cublas.h.
#include "kernels/cuda/runtime/cublas.h"

#include <array>
#include <mutex>
#include <stdexcept>
#include <string>

#include "kernels/cuda/runtime/check.h"
#include "kernels/cuda/runtime/runtime.h"

namespace bareyolo::cuda {

void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
  throw std::runtime_error(std::string("cuBLAS error at ") + file + ":" + std::to_string(line) +
                           ": " + call + " failed: " + cublasGetStatusString(status) + " (" +
                           cublasGetStatusName(status) + ")");
}

cublasHandle_t cublas_handle(int device) {
  static std::mutex mutex;
  static std::array<cublasHandle_t, 64> handles{};
  auto stream = static_cast<cudaStream_t>(compute_stream(device));  // checks the device
  std::lock_guard<std::mutex> lock(mutex);
  cublasHandle_t& handle = handles.at(static_cast<size_t>(device));
  if (!handle) {
    BAREYOLO_CUDA_CHECK(cudaSetDevice(device));
    cublasHandle_t created = nullptr;
    BAREYOLO_CUBLAS_CHECK(cublasCreate(&created));
    BAREYOLO_CUBLAS_CHECK(cublasSetStream(created, stream));
    BAREYOLO_CUBLAS_CHECK(cublasSetMathMode(created, CUBLAS_DEFAULT_MATH));
    handle = created;
  }
  return handle;
}

}  // namespace bareyolo::cuda
