// kernels/cuda/runtime/cublas.cpp — see cublas.h.
#include "kernels/cuda/runtime/cublas.h"

#include <array>
#include <mutex>
#include <stdexcept>
#include <string>

#include "kernels/cuda/runtime/check.h"
#include "kernels/cuda/runtime/runtime.h"
#include "kernels/cuda/runtime/stream.h"

namespace bareyolo::cuda {

void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
  throw std::runtime_error(std::string("cuBLAS error at ") + file + ":" + std::to_string(line) +
                           ": " + call + " failed: " + cublasGetStatusString(status) + " (" +
                           cublasGetStatusName(status) + ")");
}

cublasHandle_t cublas_handle(int device) {
  struct Slot {
    cublasHandle_t handle = nullptr;
    cublasMath_t math = CUBLAS_DEFAULT_MATH;  // the mode last set on it
  };
  static std::mutex mutex;
  static std::array<Slot, 64> slots{};
  const cudaStream_t stream = stream_of(device);  // checks the device
  const cublasMath_t math = tf32_enabled() ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH;
  std::lock_guard<std::mutex> lock(mutex);
  Slot& slot = slots.at(static_cast<size_t>(device));
  if (!slot.handle) {
    BAREYOLO_CUDA_CHECK(cudaSetDevice(device));
    cublasHandle_t created = nullptr;
    BAREYOLO_CUBLAS_CHECK(cublasCreate(&created));
    BAREYOLO_CUBLAS_CHECK(cublasSetStream(created, stream));
    BAREYOLO_CUBLAS_CHECK(cublasSetMathMode(created, math));
    slot = {created, math};
  } else if (slot.math != math) {  // set_tf32 changed since the last call
    BAREYOLO_CUBLAS_CHECK(cublasSetMathMode(slot.handle, math));
    slot.math = math;
  }
  return slot.handle;
}

}  // namespace bareyolo::cuda
