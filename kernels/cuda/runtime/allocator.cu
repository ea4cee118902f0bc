// kernels/cuda/runtime/allocator.cu — one CachingAllocator per device (allocator.h), backed by
// cudaMalloc/cudaFree, and the scoped DeviceBuffer. The allocators are created on first use
// and never destroyed: tensors freed during static destruction still find theirs.
#include <array>
#include <memory>
#include <mutex>

#include "kernels/cuda/runtime/allocator.h"
#include "kernels/cuda/runtime/check.h"
#include "kernels/cuda/runtime/runtime.h"
#include "kernels/cuda/runtime/stream.h"
#include "kernels/step_guard.h"

namespace bareyolo::cuda {

namespace {

constexpr int kMaxDevices = 64;

CachingAllocator::Backing cuda_backing(int device) {
  return {
      "cuda:" + std::to_string(device),
      [device](size_t bytes) -> void* {
        BAREYOLO_CUDA_CHECK(cudaSetDevice(device));
        void* pointer = nullptr;
        const cudaError_t status = cudaMalloc(&pointer, bytes);
        if (status == cudaErrorMemoryAllocation) {
          (void)cudaGetLastError();  // out of memory is an answer here, not an error
          return nullptr;
        }
        BAREYOLO_CUDA_CHECK(status);
        return pointer;
      },
      [device](void* pointer) {
        BAREYOLO_CUDA_CHECK(cudaSetDevice(device));
        BAREYOLO_CUDA_CHECK(cudaFree(pointer));
      },
      [device] {
        BAREYOLO_CUDA_CHECK(cudaSetDevice(device));
        // A stream being recorded into a graph may not be waited for (the recording would be
        // invalidated with a message about the wait, not about memory).
        cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
        BAREYOLO_CUDA_CHECK(cudaStreamIsCapturing(stream_of(device), &capture));
        if (capture != cudaStreamCaptureStatusNone)
          throw OutOfDeviceMemory("out of memory on cuda:" + std::to_string(device) +
                                  " while the step is recorded as a CUDA graph, which cannot "
                                  "give cached memory back; use a smaller batch");
        BAREYOLO_CUDA_CHECK(cudaDeviceSynchronize());
      },
  };
}

}  // namespace

CachingAllocator& device_allocator(int device) {
  static std::mutex mutex;
  static std::array<CachingAllocator*, kMaxDevices> allocators{};
  if (device < 0 || device >= device_count())
    throw std::runtime_error("CUDA device " + std::to_string(device) + " does not exist (" +
                             std::to_string(device_count()) + " visible)");
  std::lock_guard<std::mutex> lock(mutex);
  CachingAllocator*& allocator = allocators.at(static_cast<size_t>(device));
  if (!allocator) allocator = new CachingAllocator(cuda_backing(device));  // never deleted
  return *allocator;
}

MemoryStats memory_stats(int device) { return device_allocator(device).stats(); }
void empty_cache(int device) { device_allocator(device).empty_cache(); }

DeviceBuffer::DeviceBuffer(size_t bytes, int device, SourceLocation where)
    : bytes_(bytes), device_(device) {
  bool from_backing = false;
  pointer_ = malloc_device(bytes, device, &from_backing);
  if (from_backing)
    step_guard::report(step_guard::Event::system_allocation,
                       "a " + std::to_string(bytes) + "-byte device buffer", where);
}

DeviceBuffer::~DeviceBuffer() { free_device(pointer_, device_); }

}  // namespace bareyolo::cuda
