// data/host_buffer.h — the memory a batch's images live in on the host.
//
// This is the one place batch memory is allocated: page-locked (pinned) memory when a GPU is
// usable, so the copy to the device can run asynchronously on a stream, else 64-byte aligned
// pageable memory. cudaHostAlloc is slow (it maps pages for the device), and the loader makes
// a buffer per batch, so freed pinned buffers wait in a small pool for the next batch of the
// same size.
#pragma once

#include <cstddef>
#include <memory>

namespace bareyolo::data {

struct HostBufferFree {
  size_t bytes = 0;
  bool pinned = false;
  void operator()(float* data) const noexcept;
};
using HostBuffer = std::unique_ptr<float[], HostBufferFree>;

// `count` floats, 64-byte aligned, uninitialised. Throws std::bad_alloc.
HostBuffer allocate_host_buffer(size_t count);

}  // namespace bareyolo::data
