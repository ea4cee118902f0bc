// engine/distributed/comm/host_staging.h — host buffers for a communicator that moves only
// device memory (NCCL).
//
// NCCL reduces device buffers only, yet a training step also sends a few host values: the
// start-up broadcast of every state entry (BatchNorm's num_batches_tracked is a host int64),
// the per-level target counts of the loss normalisation, the reported loss items and rank 0's
// validation decisions. with_host_staging() wraps such a communicator: a collective on host
// buffers copies them into device scratch, runs there, and copies the result back before it
// returns (synchronous: these are a few bytes, a few times a step); device buffers pass
// straight through, asynchronous as before. The TCP ring does the mirror image: it stages
// device buffers through the host (tcp_ring.h).
#pragma once

#include <cstddef>
#include <memory>

#include "engine/distributed/comm/communicator.h"

namespace bareyolo::dist {

// Device memory to stage through: one GPU's, through the CUDA runtime (cuda_device_staging),
// or a test's stand-in.
class DeviceStaging {
 public:
  virtual ~DeviceStaging() = default;
  virtual Device device() const = 0;
  virtual void* allocate(size_t bytes) = 0;
  virtual void release(void* buffer) noexcept = 0;
  // Both complete when they return (and are ordered with the device's other work).
  virtual void copy_to_device(void* device_buffer, const void* host, size_t bytes) = 0;
  virtual void copy_to_host(void* host, const void* device_buffer, size_t bytes) = 0;
};

// Staging in the memory of GPU `device`, copies on its compute stream.
std::unique_ptr<DeviceStaging> cuda_device_staging(int device);

// `device_only` (buffers on staging's device only) as a communicator that also takes host
// buffers. Everything else (rank, world size, backend, errors) is device_only's.
std::unique_ptr<Communicator> with_host_staging(std::unique_ptr<Communicator> device_only,
                                                std::unique_ptr<DeviceStaging> staging);

}  // namespace bareyolo::dist
