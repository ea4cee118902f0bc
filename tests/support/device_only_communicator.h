// tests/support/device_only_communicator.h — NCCL's shape on a CPU build, for the tests of
// host staging (engine/distributed/comm/host_staging.h): a communicator that takes device
// buffers only, and device memory whose copies back to the host arrive when the test says.
//
// A CPU build has no device memory, so HostMemoryAsDevice hands out host memory labelled
// cuda:0, and DeviceOnly refuses any buffer not labelled so, then relabels it and forwards it
// to the real communicator underneath (the TCP ring).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/distributed/comm/host_staging.h"

namespace bareyolo::dist::testing {

inline const Device kFakeGpu = Device::cuda(0);

// Host memory as GPU 0's. Copies run at once, but a download *arrives* only once the test has
// let the device run past it (run_device_through), as a GPU runs behind the host; by default
// the device keeps up. Reading a download that has not arrived is the host waiting for the
// device: counted in host_waits.
class HostMemoryAsDevice final : public DeviceStaging {
 public:
  // Downloads queued so far; the device has run the first `device_done` of them.
  uint64_t downloads = 0;
  uint64_t device_done = UINT64_MAX;
  int host_waits = 0;

  // From now on the device runs only what the test lets it.
  void lag() { device_done = downloads; }
  void run_device_through(uint64_t download) { device_done = download; }

  Device device() const override { return kFakeGpu; }
  void* allocate(size_t bytes) override { return std::malloc(bytes); }
  void release(void* buffer) noexcept override { std::free(buffer); }
  void upload(void* device_buffer, const void* host, size_t bytes) override {
    std::memcpy(device_buffer, host, bytes);
  }
  std::unique_ptr<Download> download(const void* device_buffer, size_t bytes) override {
    return std::make_unique<QueuedDownload>(this, ++downloads, device_buffer, bytes);
  }

 private:
  class QueuedDownload final : public Download {
   public:
    QueuedDownload(HostMemoryAsDevice* device, uint64_t number, const void* from, size_t bytes)
        : device_(device),
          number_(number),
          bytes_(static_cast<const unsigned char*>(from),
                 static_cast<const unsigned char*>(from) + bytes) {}
    bool arrived() const override { return number_ <= device_->device_done; }
    void read(void* host) override {
      if (!arrived()) {
        ++device_->host_waits;
        device_->device_done = number_;
      }
      std::memcpy(host, bytes_.data(), bytes_.size());
    }

   private:
    HostMemoryAsDevice* device_;
    uint64_t number_;
    std::vector<unsigned char> bytes_;
  };
};

// Accepts only buffers on kFakeGpu (throws naming the collective otherwise), then runs the
// collective on the communicator it wraps, with the buffers relabelled as host memory.
// `collectives`, when given, counts them.
class DeviceOnly final : public Communicator {
 public:
  explicit DeviceOnly(std::unique_ptr<Communicator> ring, int* collectives = nullptr)
      : ring_(std::move(ring)), collectives_(collectives) {}
  int rank() const override { return ring_->rank(); }
  int world_size() const override { return ring_->world_size(); }
  Backend backend() const override { return Backend::nccl; }
  WorkHandle allreduce(CommBuffer buffer, ReduceOp op, std::string_view tag) override {
    return ring_->allreduce(on_host("allreduce", buffer), op, tag);
  }
  WorkHandle broadcast(CommBuffer buffer, int root, std::string_view tag) override {
    return ring_->broadcast(on_host("broadcast", buffer), root, tag);
  }
  WorkHandle allgather(CommBuffer send, CommBuffer recv, std::string_view tag) override {
    return ring_->allgather(on_host("allgather", send), on_host("allgather", recv), tag);
  }
  WorkHandle barrier(std::string_view tag) override { return ring_->barrier(tag); }

 private:
  CommBuffer on_host(const char* op, CommBuffer buffer) {
    if (!(buffer.device == kFakeGpu))
      throw std::runtime_error(std::string("a device-only communicator got a ") + op + " of " +
                               std::to_string(buffer.count) + " elements on " +
                               buffer.device.str());
    if (collectives_) ++*collectives_;
    buffer.device = Device::cpu();
    return buffer;
  }
  std::unique_ptr<Communicator> ring_;
  int* collectives_;
};

}  // namespace bareyolo::dist::testing
