// kernels/staged_copies.h — copies between host and device that the host never waits for:
// numbers built on the host each step while the device may still be running the previous one
// (the loss's counts and matched rows, the step's scalars: engine/step_scalars.h), and a few
// numbers brought back that the host reads once they are there (the ranks' per-step desync
// check over NCCL: engine/distributed/comm/host_staging.h).
//
// A GPU copies asynchronously only to and from page-locked memory, which must stay as it is
// until the copy has run. So the bytes go through a pinned staging buffer, and the copy's event
// is kept with it: a buffer is used again only once its event has completed (and, for a
// download, once its bytes were handed over), and when every kept buffer is still in use a new
// one is pinned (the queue of a GPU holds a few steps at most, so a few buffers are all it ever
// takes). To and from host memory (the CPU) the copy is a plain memcpy.
#pragma once

#include <cstddef>
#include <vector>

#include "kernels/view.h"

namespace bareyolo {

// Copies `bytes` bytes from host memory at `src` to `dst` on `device`, ordered with the work queued
// on its compute stream; the host does not wait, and `src` may change as soon as this returns.
void upload_without_waiting(void* dst, const Device& device, const void* src, size_t bytes);

namespace detail {
struct StagingBuffer;
}

// Copies `bytes` bytes from `src` on `device` to the host, queued after the work already on the
// device's compute stream; the host does not wait.
class StagedDownload {
 public:
  StagedDownload(const void* src, const Device& device, size_t bytes);
  ~StagedDownload();  // the staging buffer goes back to the others
  StagedDownload(const StagedDownload&) = delete;
  StagedDownload& operator=(const StagedDownload&) = delete;

  // Whether the bytes are on the host; never blocks.
  bool arrived() const;
  // Copies the bytes to `dst`, waiting for the device first where they have not arrived.
  void read(void* dst) const;

 private:
  size_t bytes_;
  detail::StagingBuffer* staged_ = nullptr;  // a GPU's download
  std::vector<unsigned char> copied_;        // host memory's: copied at once
};

}  // namespace bareyolo
