// engine/distributed/comm/host_staging.cpp — see host_staging.h.
#include "engine/distributed/comm/host_staging.h"

#include <memory>
#include <utility>

#include "kernels/device_memory.h"
#include "kernels/round_up.h"
#include "kernels/staged_copies.h"

namespace bareyolo::dist {

namespace {

class StagedDownloadOf final : public Download {
 public:
  StagedDownloadOf(const void* device_buffer, const Device& device, size_t bytes)
      : download_(device_buffer, device, bytes) {}
  bool arrived() const override { return download_.arrived(); }
  void read(void* host) override { download_.read(host); }

 private:
  StagedDownload download_;
};

class CudaDeviceStaging final : public DeviceStaging {
 public:
  explicit CudaDeviceStaging(int gpu) : gpu_(Device::cuda(gpu)) {}
  Device device() const override { return gpu_; }
  void* allocate(size_t bytes) override {
    return allocate_bytes(bytes, gpu_, "the host-staging scratch");
  }
  void release(void* buffer) noexcept override { release_bytes(buffer, gpu_); }
  void upload(void* device_buffer, const void* host, size_t bytes) override {
    upload_without_waiting(device_buffer, gpu_, host, bytes);
  }
  std::unique_ptr<Download> download(const void* device_buffer, size_t bytes) override {
    return std::make_unique<StagedDownloadOf>(device_buffer, gpu_, bytes);
  }

 private:
  Device gpu_;
};

// A collective on host buffers, staged: the inner collective, then its result's way back to the
// host (queued after it); the result lands in the caller's buffer in wait().
class StagedWork final : public Work {
 public:
  StagedWork(WorkHandle inner, std::unique_ptr<Download> result, void* host)
      : inner_(std::move(inner)), result_(std::move(result)), host_(host) {}

  void wait() override {
    if (result_) result_->read(host_);
    result_.reset();
    inner_->wait();  // a communicator broken meanwhile (NCCL's watchdog) throws here
  }
  bool completed() override { return !result_ || result_->arrived(); }

 private:
  WorkHandle inner_;
  std::unique_ptr<Download> result_;  // until wait() has read it
  void* host_;
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
    return staged_out(inner_->allreduce(staged, op, tag), staged, buffer);
  }

  WorkHandle broadcast(CommBuffer buffer, int root, std::string_view tag) override {
    if (!on_host(buffer)) return inner_->broadcast(buffer, root, tag);
    const CommBuffer staged = stage_in(buffer, 0);
    return staged_out(inner_->broadcast(staged, root, tag), staged, buffer);
  }

  WorkHandle allgather(CommBuffer send, CommBuffer recv, std::string_view tag) override {
    if (!on_host(send) && !on_host(recv)) return inner_->allgather(send, recv, tag);
    // send's copy (when it is on the host) first in the scratch, recv's after it.
    const size_t recv_offset = on_host(send) ? round_up(size_t(send.bytes()), 256) : 0;
    reserve(recv_offset + size_t(recv.bytes()));
    const CommBuffer staged_send = on_host(send) ? stage_in(send, 0) : send;
    const CommBuffer staged_recv = on_host(recv) ? in_scratch(recv, recv_offset) : recv;
    WorkHandle work = inner_->allgather(staged_send, staged_recv, tag);
    if (!on_host(recv)) {
      // The compute stream waits for it now (on a GPU the host does not), so that the next
      // staged collective's copy into the scratch comes after this one has read send's copy.
      work->wait();
      return work;
    }
    return staged_out(std::move(work), staged_recv, recv);
  }

  WorkHandle barrier(std::string_view tag) override { return inner_->barrier(tag); }
  // A recorded step's collectives take device buffers only (the step's host values are
  // uploaded before it): they pass straight through, as ever.
  bool records_in_cuda_graphs() const override { return inner_->records_in_cuda_graphs(); }
  void begin_recording() override { inner_->begin_recording(); }
  RecordedCollectives end_recording() override { return inner_->end_recording(); }
  void replay(const RecordedCollectives& recording, std::string_view what,
              const std::function<void()>& launch) override {
    inner_->replay(recording, what, launch);
  }

 private:
  static bool on_host(const CommBuffer& buffer) { return in_host_memory(buffer.device); }

  // The scratch grows to the largest staged collective and stays: the same few sizes recur
  // every step. One scratch is enough: collectives are issued from one thread, and the device
  // runs each one's copies in, collective and copy out before the next one's (all queued on
  // its compute stream); a scratch given back for a larger one is reused in that order too.
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
    if (host.bytes() > 0) staging_->upload(staged.data, host.data, size_t(host.bytes()));
    return staged;
  }

  // The collective's result on its way from `staged` back to `host`: the device's later work
  // (the copy) waits for the collective, the host for neither.
  WorkHandle staged_out(WorkHandle collective, const CommBuffer& staged, const CommBuffer& host) {
    if (host.bytes() == 0) return collective;
    collective->wait();
    return std::make_shared<StagedWork>(
        std::move(collective), staging_->download(staged.data, size_t(host.bytes())), host.data);
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
