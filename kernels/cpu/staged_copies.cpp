// kernels/cpu/staged_copies.cpp — see kernels/staged_copies.h.
#include "kernels/staged_copies.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <mutex>

#include "kernels/device_memory.h"
#include "kernels/op_sequence.h"

namespace bareyolo {

namespace detail {

struct StagingBuffer {
  void* data = nullptr;
  size_t bytes = 0;
  DeviceEvent last_copy;  // the copy that reads or writes it
  bool held = false;      // a download's, until its bytes are handed over
};

}  // namespace detail

namespace {

using detail::StagingBuffer;

// The staging buffers of every staged copy in the process: reused, never freed (pinned memory
// outlives main's locals, and cudaFreeHost would synchronise the device).
class StagingBuffers {
 public:
  void upload(void* dst, const Device& device, const void* src, size_t bytes) {
    const std::lock_guard<std::mutex> lock(mutex_);
    StagingBuffer& buffer = free_buffer(bytes);
    std::memcpy(buffer.data, src, bytes);
    buffer.last_copy = upload_async(dst, device, buffer.data, bytes);
  }

  StagingBuffer* download(const void* src, const Device& device, size_t bytes) {
    const std::lock_guard<std::mutex> lock(mutex_);
    StagingBuffer& buffer = free_buffer(bytes);
    buffer.held = true;
    buffer.last_copy = download_async(buffer.data, src, device, bytes);
    return &buffer;
  }

  void give_back(StagingBuffer* buffer) {
    const std::lock_guard<std::mutex> lock(mutex_);
    buffer->held = false;
  }

 private:
  // A buffer of at least `bytes` that no copy uses any more; a new one when none is.
  StagingBuffer& free_buffer(size_t bytes) {
    for (StagingBuffer& buffer : buffers_)
      if (buffer.bytes >= bytes && !buffer.held && buffer.last_copy.complete()) return buffer;
    const size_t rounded = std::max<size_t>(bytes, 4096);
    buffers_.push_back({allocate_pinned_host_bytes(rounded), rounded, {}, false});
    return buffers_.back();
  }

  std::mutex mutex_;
  std::deque<StagingBuffer> buffers_;  // a deque: a download holds its buffer's address
};

StagingBuffers& staging_buffers() {
  static auto* staging = new StagingBuffers;  // never destroyed: see StagingBuffers
  return *staging;
}

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
  staging_buffers().upload(dst, device, src, bytes);
}

StagedDownload::StagedDownload(const void* src, const Device& device, size_t bytes)
    : bytes_(bytes) {
  if (in_host_memory(device)) {
    copied_.assign(static_cast<const unsigned char*>(src),
                   static_cast<const unsigned char*>(src) + bytes);
    return;
  }
  staged_ = staging_buffers().download(src, device, bytes);
}

StagedDownload::~StagedDownload() {
  if (staged_) staging_buffers().give_back(staged_);
}

bool StagedDownload::arrived() const { return !staged_ || staged_->last_copy.complete(); }

void StagedDownload::read(void* dst) const {
  if (bytes_ == 0) return;
  if (!staged_) {
    std::memcpy(dst, copied_.data(), bytes_);
    return;
  }
  if (!staged_->last_copy.complete()) staged_->last_copy.synchronize();
  std::memcpy(dst, staged_->data, bytes_);
}

}  // namespace bareyolo
