// data/host_buffer.h — the memory a batch's images live in on the host: bytes, in the layout
// the device reads (batch.h).
//
// This is the one place batch memory is allocated: page-locked (pinned) memory when a GPU is
// usable, so the copy to the device can run asynchronously on a stream, else 64-byte aligned
// pageable memory. cudaHostAlloc is slow (it maps pages for the device), and the loader makes
// a buffer per batch, so freed pinned buffers wait in a small pool (host_buffer_pool.h) for
// the next batch they fit.
//
// A device copy may still be reading a buffer when its batch is dropped: read_by_device()
// attaches the copy's event, and the buffer is neither freed nor handed to the next batch
// (whose loader thread would overwrite it) before that event completes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "kernels/device_memory.h"

namespace bareyolo::data {

struct HostBufferFree {
  size_t bytes = 0;
  bool pinned = false;
  // The last device read of the buffer. mutable: recording who reads the memory does not
  // change what it holds, and a const batch gets uploaded (validation's predictors).
  mutable DeviceEvent last_read;
  void operator()(uint8_t* data) const noexcept;
};
using HostBuffer = std::unique_ptr<uint8_t[], HostBufferFree>;

// `bytes` bytes, 64-byte aligned, uninitialised. Throws HostOutOfMemory (a std::bad_alloc).
HostBuffer allocate_host_buffer(size_t bytes);

// `buffer` is read by device work up to `done` (upload_async's event): it is reused or freed
// only once `done` completes. Every read of one buffer goes through one device's compute
// stream, so the latest event covers the earlier ones; an empty event (a copy into host memory,
// done already) marks no device work and leaves the last device read as it was.
inline void read_by_device(const HostBuffer& buffer, DeviceEvent done) {
  if (done.recorded()) buffer.get_deleter().last_read = std::move(done);
}

}  // namespace bareyolo::data
