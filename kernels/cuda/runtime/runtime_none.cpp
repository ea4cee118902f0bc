// kernels/cuda/runtime/runtime_none.cpp — runtime.h for a binary built without CUDA
// (WITH_CUDA=OFF): no devices, and a clear error for anyone who asks for GPU memory anyway. No
// Event can be recorded, so every Event is the empty one: complete. The TF32 setting is only
// recorded: there is no GPU math to switch.
#include <atomic>
#include <stdexcept>

#include "kernels/cuda/runtime/runtime.h"

namespace bareyolo::cuda {

namespace {
[[noreturn]] void built_without_cuda() {
  throw std::runtime_error(
      "this bareyolo was built without CUDA (WITH_CUDA=OFF); rebuild with nvcc on PATH or "
      "use --device cpu");
}
std::atomic<bool> tf32{false};
std::atomic<bool> deterministic{true};
}  // namespace

bool compiled() { return false; }
int device_count() { return 0; }
std::string unavailable_reason() { return "this binary was built without CUDA"; }
bool initialized() { return false; }
void set_tf32(bool enabled) { tf32 = enabled; }
bool tf32_enabled() { return tf32; }
void set_cudnn_deterministic(bool enabled) { deterministic = enabled; }
bool cudnn_deterministic() { return deterministic; }
MemoryInfo memory_info(int) { built_without_cuda(); }
void* malloc_device(size_t, int, bool*) { built_without_cuda(); }
void free_device(void*, int) noexcept {}
void* malloc_pinned(size_t) { built_without_cuda(); }
void free_pinned(void*) noexcept {}
bool is_pinned(const void*) { return false; }
void copy(void*, const void*, size_t, CopyKind, int, SourceLocation) { built_without_cuda(); }
void copy_async(void*, const void*, size_t, CopyKind, int) { built_without_cuda(); }
Event upload_beside_compute(void*, const void*, size_t, int, const Event&) { built_without_cuda(); }
void fill_bytes(void*, int, size_t, int) { built_without_cuda(); }
void* compute_stream(int) { built_without_cuda(); }
void synchronize(int, SourceLocation) { built_without_cuda(); }
Event Event::record(int) { built_without_cuda(); }
Event::~Event() = default;
bool Event::complete() const { return true; }
void Event::synchronize(SourceLocation) const {}
uint64_t host_waits() { return 0; }
uint64_t launches() { return 0; }

}  // namespace bareyolo::cuda
