// engine/distributed/comm/host_staging.cpp — see host_staging.h.
#include "engine/distributed/comm/host_staging.h"

#include <utility>

#include "kernels/device_memory.h"

namespace bareyolo::dist {

namespace {

class CudaDeviceStaging final : public DeviceStaging {
 public:
  explicit CudaDeviceStaging(int gpu) : gpu_(Device::cuda(gpu)) {}
  Device device() const override { return gpu_; }
  void* allocate(size_t bytes) override {
    return allocate_bytes(bytes, gpu_, "the host-staging scratch");
  }
  void release(void* buffer) noexcept override { release_bytes(buffer, gpu_); }
  void copy_to_device(void* device_buffer, const void* host, size_t bytes) override {
    copy_bytes(device_buffer, gpu_, host, Device::cpu(), bytes);
  }
  void copy_to_host(void* host, const void* device_buffer, size_t bytes) override {
    copy_bytes(host, Device::cpu(), device_buffer, gpu_, bytes);
  }

 private:
  Device gpu_;
};

class HostStagingCommunicator final : public Communicator {
 public:
  HostStagingCommunicator(std::unique_ptr<Communicator> inner,
                          std::unique_ptr<DeviceStaging> staging)
      : inner_(std::move(inner)), staging_(std::move(staging)) {}
  ~HostStagingCommunicator() override {
    if (scratch_) staging_->release(scratch_);
  }

  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  Backend backend() const override { return inner_->backend(); }

  WorkHandle allreduce(CommBuffer buffer, ReduceOp op, std::string_view tag) override {
    if (!on_host(buffer)) return inner_->allreduce(buffer, op, tag);
    const CommBuffer staged = stage_in(buffer, 0);
    inner_->allreduce(staged, op, tag)->wait();
    stage_out(staged, buffer);
    return completed_work();
  }

  WorkHandle broadcast(CommBuffer buffer, int root, std::string_view tag) override {
    if (!on_host(buffer)) return inner_->broadcast(buffer, root, tag);
    const CommBuffer staged = stage_in(buffer, 0);
    inner_->broadcast(staged, root, tag)->wait();
    stage_out(staged, buffer);
    return completed_work();
  }

  WorkHandle allgather(CommBuffer send, CommBuffer recv, std::string_view tag) override {
    if (!on_host(send) && !on_host(recv)) return inner_->allgather(send, recv, tag);
    // send's copy (when it is on the host) first in the scratch, recv's after it.
    const size_t recv_offset = on_host(send) ? aligned(size_t(send.bytes())) : 0;
    reserve(recv_offset + size_t(recv.bytes()));
    const CommBuffer staged_send = on_host(send) ? stage_in(send, 0) : send;
    const CommBuffer staged_recv = on_host(recv) ? in_scratch(recv, recv_offset) : recv;
    inner_->allgather(staged_send, staged_recv, tag)->wait();
    if (on_host(recv)) stage_out(staged_recv, recv);
    return completed_work();
  }

  WorkHandle barrier(std::string_view tag) override { return inner_->barrier(tag); }

 private:
  static bool on_host(const CommBuffer& buffer) { return in_host_memory(buffer.device); }
  static size_t aligned(size_t bytes) { return (bytes + 255) / 256 * 256; }

  // The scratch grows to the largest staged collective and stays: the same few sizes recur
  // every step. (One scratch is enough: collectives are issued from one thread, in the same
  // order on every rank, as the contract requires.)
  void reserve(size_t bytes) {
    if (bytes <= scratch_bytes_) return;
    if (scratch_) staging_->release(scratch_);
    scratch_ = nullptr, scratch_bytes_ = 0;
    scratch_ = staging_->allocate(bytes);
    scratch_bytes_ = bytes;
  }

  CommBuffer in_scratch(const CommBuffer& host, size_t offset) const {
    return {static_cast<char*>(scratch_) + offset, host.count, host.dtype, staging_->device()};
  }

  // `host` copied into the scratch at `offset`, as a device buffer.
  CommBuffer stage_in(const CommBuffer& host, size_t offset) {
    reserve(offset + size_t(host.bytes()));
    const CommBuffer staged = in_scratch(host, offset);
    if (host.bytes() > 0) staging_->copy_to_device(staged.data, host.data, size_t(host.bytes()));
    return staged;
  }

  void stage_out(const CommBuffer& staged, const CommBuffer& host) {
    if (host.bytes() > 0) staging_->copy_to_host(host.data, staged.data, size_t(host.bytes()));
  }

  std::unique_ptr<Communicator> inner_;
  std::unique_ptr<DeviceStaging> staging_;
  void* scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
};

}  // namespace

std::unique_ptr<DeviceStaging> cuda_device_staging(int device) {
  return std::make_unique<CudaDeviceStaging>(device);
}

std::unique_ptr<Communicator> with_host_staging(std::unique_ptr<Communicator> device_only,
                                                std::unique_ptr<DeviceStaging> staging) {
  return std::make_unique<HostStagingCommunicator>(std::move(device_only), std::move(staging));
}

}  // namespace bareyolo::dist
