// data/host_buffer.cpp — batch memory and the pool of pinned buffers (see host_buffer.h).
#include "data/host_buffer.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>

#include "data/host_buffer_pool.h"
#include "kernels/cpu/host_memory.h"
#include "kernels/devices.h"

namespace bareyolo::data {

namespace {
constexpr size_t kAlignment = 64;
// Pinned buffers kept for reuse: a few batches ahead of the trainer is all a loader holds
// (16 batches of 64 images at 640 px are 1.3 GB of bytes).
constexpr size_t kMaxPooledBuffers = 16;
constexpr size_t kMaxPooledBytes = size_t{8} << 30;

using PinnedPool = HostBufferPool<DeviceEvent>;

PinnedPool& pinned_pool() {
  // Never destroyed: buffers may outlive main's locals.
  static auto* pool = new PinnedPool(kMaxPooledBuffers, kMaxPooledBytes);
  return *pool;
}
}  // namespace

void HostBufferFree::operator()(uint8_t* data) const noexcept {
  try {
    if (!pinned) {
      last_read.synchronize();
      std::free(data);
      return;
    }
    for (PinnedPool::Buffer& evicted : pinned_pool().keep({data, bytes, std::move(last_read)})) {
      evicted.last_read.synchronize();
      release_pinned_host_bytes(evicted.data);
    }
  } catch (const std::exception& error) {
    // The device failed while (or before) reading the buffer: it cannot be known to be done.
    std::fprintf(stderr, "bareyolo: a batch buffer of %zu bytes is left allocated: %s\n", bytes,
                 error.what());
  }
}

HostBuffer allocate_host_buffer(size_t bytes) {
  const size_t rounded = std::max(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
  if (usable_gpu_count() > 0) {
    PinnedPool::Taken reused = pinned_pool().take(rounded);
    if (!reused.data) reused = {allocate_pinned_host_bytes(rounded), rounded};
    return HostBuffer(static_cast<uint8_t*>(reused.data), {reused.bytes, true, {}});
  }
  void* data = aligned_host_alloc(kAlignment, rounded, "a batch of images");
  return HostBuffer(static_cast<uint8_t*>(data), {rounded, false, {}});
}

}  // namespace bareyolo::data
