// kernels/cuda/runtime/allocator.h — the GPU's caching allocators (kernels/caching_allocator.h):
// every device Tensor's memory (cuda::malloc_device / free_device) comes from the one of its
// device, so a training step that repeats the same allocations never calls cudaMalloc or
// cudaFree (each of those synchronises the device); and the scoped DeviceBuffer.
#pragma once

#include <cstddef>
#include <utility>

#include "kernels/caching_allocator.h"
#include "kernels/source_location.h"

namespace bareyolo::cuda {

using bareyolo::CachingAllocator;
using bareyolo::MemoryStats;
using bareyolo::OutOfDeviceMemory;

// The allocator behind cuda::malloc_device for `device` (allocator.cu; in a build without CUDA
// these three throw, allocator_none.cpp).
CachingAllocator& device_allocator(int device);
// Statistics of `device`'s allocator, and returning its cached blocks to the driver.
MemoryStats memory_stats(int device);
void empty_cache(int device);

// A block of device memory from the caching allocator, owned for a scope: kernel scratch
// (cuDNN workspaces, BatchNorm's per-channel partial sums). Freed blocks return to the
// compute stream's cache, so the next call's scratch is the same block.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // `where`: the caller, for the step guard (kernels/step_guard.h).
  DeviceBuffer(size_t bytes, int device, SourceLocation where = SourceLocation::current());
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept { swap(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    DeviceBuffer(std::move(other)).swap(*this);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return pointer_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(pointer_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void swap(DeviceBuffer& other) noexcept {
    std::swap(pointer_, other.pointer_);
    std::swap(bytes_, other.bytes_);
    std::swap(device_, other.device_);
  }
  void* pointer_ = nullptr;
  size_t bytes_ = 0;
  int device_ = 0;
};

}  // namespace bareyolo::cuda
