// kernels/cpu/staged_copies.cpp — see kernels/staged_copies.h.
#include "kernels/staged_copies.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <vector>

#include "kernels/device_memory.h"
#include "kernels/op_sequence.h"

namespace bareyolo {

namespace {

struct StagingBuffer {
  void* data = nullptr;
  size_t bytes = 0;
  DeviceEvent last_read;  // the upload that reads it
};

// The staging buffers of every upload in the process: reused, never freed (pinned memory
// outlives main's locals, and cudaFreeHost would synchronise the device).
class StagingBuffers {
 public:
  void upload(void* dst, const Device& device, const void* src, size_t bytes) {
    const std::lock_guard<std::mutex> lock(mutex_);
    StagingBuffer& buffer = free_buffer(bytes);
    std::memcpy(buffer.data, src, bytes);
    buffer.last_read = upload_async(dst, device, buffer.data, bytes);
  }

 private:
  // A buffer of at least `bytes` that no upload reads any more; a new one when none is.
  StagingBuffer& free_buffer(size_t bytes) {
    for (StagingBuffer& buffer : buffers_)
      if (buffer.bytes >= bytes && buffer.last_read.complete()) return buffer;
    const size_t rounded = std::max<size_t>(bytes, 4096);
    buffers_.push_back({allocate_pinned_host_bytes(rounded), rounded, {}});
    return buffers_.back();
  }

  std::mutex mutex_;
  std::vector<StagingBuffer> buffers_;
};

}  // namespace

void upload_without_waiting(void* dst, const Device& device, const void* src, size_t bytes) {
  if (bytes == 0) return;
  // The bytes too: a CUDA graph could not replay this copy with other ones (its staging
  // buffer's bytes at capture would go up again), so two steps that upload different bytes
  // issue different sequences.
  if (op_sequence::recording())
    op_sequence::note("upload", dst, device, op_sequence::hex(src, bytes));
  if (in_host_memory(device)) {
    std::memcpy(dst, src, bytes);
    return;
  }
  static auto* staging = new StagingBuffers;  // never destroyed: see StagingBuffers
  staging->upload(dst, device, src, bytes);
}

}  // namespace bareyolo
