// kernels/cuda/runtime/allocator_none.cpp — allocator.h's device functions for a binary built
// without CUDA (WITH_CUDA=OFF): there is no device memory to account for, so each says so.
#include <stdexcept>

#include "kernels/cuda/runtime/allocator.h"

namespace bareyolo::cuda {

namespace {
[[noreturn]] void no_device_memory(const char* what) {
  throw std::runtime_error(std::string(what) +
                           ": this bareyolo was built without CUDA (WITH_CUDA=OFF), so there is "
                           "no device memory; use --device cpu");
}
}  // namespace

CachingAllocator& device_allocator(int) { no_device_memory("the device allocator"); }
MemoryStats memory_stats(int) { no_device_memory("device memory statistics"); }
void empty_cache(int) { no_device_memory("emptying the device memory cache"); }

}  // namespace bareyolo::cuda
