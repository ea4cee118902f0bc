// data/host_buffer.cpp — batch memory and the pool of pinned buffers (see host_buffer.h).
#include "data/host_buffer.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <new>

#include "kernels/cuda/runtime.h"

namespace bareyolo::data {

namespace {
constexpr size_t kAlignment = 64;
// Pinned buffers kept for reuse: a few batches ahead of the trainer is all a loader holds.
constexpr size_t kMaxPooledBuffers = 16;

struct PinnedPool {
  std::mutex mutex;
  std::multimap<size_t, void*> free;  // bytes -> buffer
};
PinnedPool& pinned_pool() {
  static PinnedPool* pool = new PinnedPool;  // never destroyed: buffers may outlive main's locals
  return *pool;
}
}  // namespace

void HostBufferFree::operator()(float* data) const noexcept {
  if (!pinned) {
    std::free(data);
    return;
  }
  PinnedPool& pool = pinned_pool();
  std::lock_guard<std::mutex> lock(pool.mutex);
  if (pool.free.size() < kMaxPooledBuffers)
    pool.free.emplace(bytes, data);
  else
    cuda::free_pinned(data);
}

HostBuffer allocate_host_buffer(size_t count) {
  const size_t bytes = std::max(kAlignment, (count * sizeof(float) + kAlignment - 1) / kAlignment * kAlignment);
  if (cuda::device_count() > 0) {
    PinnedPool& pool = pinned_pool();
    {
      std::lock_guard<std::mutex> lock(pool.mutex);
      auto it = pool.free.find(bytes);
      if (it != pool.free.end()) {
        void* data = it->second;
        pool.free.erase(it);
        return HostBuffer(static_cast<float*>(data), {bytes, true});
      }
    }
    return HostBuffer(static_cast<float*>(cuda::malloc_pinned(bytes)), {bytes, true});
  }
  void* data = std::aligned_alloc(kAlignment, bytes);
  if (data == nullptr) throw std::bad_alloc();
  return HostBuffer(static_cast<float*>(data), {bytes, false});
}

}  // namespace bareyolo::data
