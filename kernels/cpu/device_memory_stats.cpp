// kernels/cpu/device_memory_stats.cpp — see kernels/device_memory_stats.h: each asks the GPU's
// caching allocator or driver (kernels/cuda/runtime), after refusing the CPU.
#include "kernels/device_memory_stats.h"

#include <stdexcept>
#include <string>

#include "kernels/cuda/runtime/runtime.h"

namespace bareyolo {

namespace {
// `device`'s CUDA ordinal; throws naming `what` for the CPU, whose memory is not accounted for.
int gpu_index(const Device& device, const char* what) {
  if (device.is_cpu())
    throw std::invalid_argument(std::string(what) + " is kept for GPU memory only, not for " +
                                device.str());
  return device.index;
}
}  // namespace

DeviceMemoryStats device_memory_stats(const Device& gpu) {
  return cuda::memory_stats(gpu_index(gpu, "device_memory_stats"));
}

size_t device_memory_total_bytes(const Device& gpu) {
  return cuda::memory_info(gpu_index(gpu, "device_memory_total_bytes")).total;
}

void reset_peak_memory_stats(const Device& gpu) {
  cuda::device_allocator(gpu_index(gpu, "reset_peak_memory_stats")).reset_peaks();
}

void release_cached_memory(const Device& gpu) {
  cuda::empty_cache(gpu_index(gpu, "release_cached_memory"));
}

}  // namespace bareyolo
