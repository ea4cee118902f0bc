// engine/distributed/comm/host_staging.h — host buffers for a communicator that moves only
// device memory (NCCL).
//
// NCCL reduces device buffers only, yet a training step also sends a few host values: the
// start-up broadcast of every state entry (BatchNorm's num_batches_tracked is a host int64),
// the per-level target counts of the loss normalisation, the reported loss items and rank 0's
// validation decisions, the per-step desync check (watched_communicator.h). with_host_staging()
// wraps such a communicator: a collective on host buffers copies them into device scratch, runs
// there, and copies the result back, all queued on the device without the host waiting; the
// host waits in the Work's wait() (the bytes are in the caller's buffer when it returns), and
// only while they are still on their way, which completed() tells without waiting (the desync
// check reads its result steps later). Device buffers pass straight through. The TCP ring does
// the mirror image: it stages device buffers through the host (tcp_ring.h).
#pragma once

#include <cstddef>
#include <memory>

#include "engine/distributed/comm/communicator.h"

namespace bareyolo::dist {

// Bytes on their way back from the device (DeviceStaging::download).
class Download {
 public:
  virtual ~Download() = default;
  // Whether the bytes are on the host; never blocks.
  virtual bool arrived() const = 0;
  // Copies them to `host`, the host waiting for the device first where they have not arrived.
  virtual void read(void* host) = 0;
};

// Device memory to stage through: one GPU's, through the CUDA runtime (cuda_device_staging),
// or a test's stand-in. Copies are queued in order with the device's other work (its compute
// stream's) and the host does not wait for them.
class DeviceStaging {
 public:
  virtual ~DeviceStaging() = default;
  virtual Device device() const = 0;
  virtual void* allocate(size_t bytes) = 0;
  virtual void release(void* buffer) noexcept = 0;
  // `host` may change as soon as this returns.
  virtual void upload(void* device_buffer, const void* host, size_t bytes) = 0;
  // The bytes at `device_buffer` once the work queued before has run.
  virtual std::unique_ptr<Download> download(const void* device_buffer, size_t bytes) = 0;
};

// Staging in the memory of GPU `device`, copies on its compute stream.
std::unique_ptr<DeviceStaging> cuda_device_staging(int device);

// `device_only` (buffers on staging's device only) as a communicator that also takes host
// buffers. Everything else (rank, world size, backend, errors) is device_only's.
std::unique_ptr<Communicator> with_host_staging(std::unique_ptr<Communicator> device_only,
                                                std::unique_ptr<DeviceStaging> staging);

}  // namespace bareyolo::dist
