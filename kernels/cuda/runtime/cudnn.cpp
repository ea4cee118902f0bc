// kernels/cuda/runtime/cudnn.cpp — see cudnn.h.
#include "kernels/cuda/runtime/cudnn.h"

#include <array>
#include <mutex>
#include <stdexcept>
#include <string>

#include "kernels/cuda/runtime/check.h"
#include "kernels/cuda/runtime/runtime.h"
#include "kernels/cuda/runtime/stream.h"

namespace bareyolo::cuda {

void throw_cudnn_error(cudnnStatus_t status, const char* call, const char* file, int line) {
  char detail[512] = {};
  cudnnGetLastErrorString(detail, sizeof detail);
  throw std::runtime_error(std::string("cuDNN error at ") + file + ":" + std::to_string(line) +
                           ": " + call + " failed: " + cudnnGetErrorString(status) +
                           (detail[0] ? std::string(" (") + detail + ")" : std::string()));
}

cudnnHandle_t cudnn_handle(int device) {
  static std::mutex mutex;
  static std::array<cudnnHandle_t, 64> handles{};
  const cudaStream_t stream = stream_of(device);  // checks the device
  std::lock_guard<std::mutex> lock(mutex);
  cudnnHandle_t& handle = handles.at(static_cast<size_t>(device));
  if (!handle) {
    BAREYOLO_CUDA_CHECK(cudaSetDevice(device));
    cudnnHandle_t created = nullptr;
    BAREYOLO_CUDNN_CHECK(cudnnCreate(&created));
    BAREYOLO_CUDNN_CHECK(cudnnSetStream(created, stream));
    handle = created;
  }
  return handle;
}

}  // namespace bareyolo::cuda
