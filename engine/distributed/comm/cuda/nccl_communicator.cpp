// engine/distributed/comm/cuda/nccl_communicator.cpp — the NCCL backend (see nccl_communicator.h
// and the contract in communicator.h). Plain C++ over the CUDA runtime and NCCL; CUDA builds only.
//
// Ordering. Each collective: an event recorded on the compute stream, which the comm stream
// waits for (the buffer's producers have run), the NCCL call on the comm stream, and a `done`
// event recorded after it. Work::wait() makes the compute stream wait for `done` (kernels
// issued later see the result, and the caching allocator may reuse the buffer on its own
// stream); the host goes on queueing work, as communicator.h says of device buffers. A
// barrier's wait() alone also blocks the host until `done` has happened: the contract's
// barrier holds every rank until the last one enters (it is never part of a training step).
//
// Failure. The communicator is non-blocking (ncclConfig_t::blocking = 0), so no NCCL call can
// block the host indefinitely: every call is followed by polling ncclCommGetAsyncError until it
// leaves ncclInProgress, within the timeout. A watchdog thread looks at the collectives in
// flight every kWatchdogPeriod: when NCCL reports an asynchronous error (a peer's connection
// dropped) or the oldest collective has been in flight longer than the timeout, it records
// the reason and calls ncclCommAbort, which also releases NCCL kernels stuck on the GPU.
// From then on wait() and every new call throw that reason.
//
// Locking: `nccl_mutex_` serialises the NCCL calls of the issuing thread and the watchdog's
// abort; the reason of a failure sits in the shared `Health`, which Work objects keep alive.
//
// CUDA graphs. Issued while the compute stream is being captured (the Solver recording a step,
// --cuda-graph on), a collective's event record, wait and NCCL call go into the recording, which
// then holds the comm stream's work too (NCCL follows a capture onto its stream); the host's
// wait() only orders the streams, as always. A replay runs them again (replay(): the watchdog
// treats each replay as one collective in flight).
//
// Recorded graphs hold the communicator: from NCCL 2.26 on, its destruction (an abort too)
// waits until every graph that recorded its calls is destroyed, and the graphs belong to the
// issuing thread's caller (the Solver). So once a graph has recorded a call, only the watchdog
// aborts: the issuing thread that meets a failure marks the communicator broken and throws,
// and unwinding destroys the graphs, which lets the abort finish; it never waits for
// `nccl_mutex_`, which the abort holds (it throws the failure instead), and the watchdog holds
// nothing else meanwhile. The Solver is gone before the communicator is destroyed.
#include <nccl.h>

// Non-blocking communicators (ncclConfig_t, ncclCommFinalize) came with NCCL 2.14.
#if NCCL_VERSION_CODE < NCCL_VERSION(2, 14, 0)
#error "bareyolo's NCCL backend needs NCCL 2.14 or newer"
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include "engine/distributed/comm/nccl_communicator.h"
#include "kernels/cuda/runtime/check.h"
#include "kernels/cuda/runtime/runtime.h"

namespace bareyolo::dist {

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kWatchdogPeriod = std::chrono::milliseconds(100);
constexpr const char* kUniqueIdKey = "nccl/unique_id";

std::string seconds(std::chrono::milliseconds t) {
  return std::to_string(double(t.count()) / 1000.0) + " s";
}

// Whether the communicator still works, and if not, why (shared with the Work handles).
class Health {
 public:
  bool broken() const { return broken_.load(); }
  // The first reason wins: later ones are consequences.
  void fail(const std::string& reason) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (broken_) return;
    reason_ = reason;
    broken_ = true;
  }
  [[noreturn]] void throw_reason() const {
    std::lock_guard<std::mutex> lock(mutex_);
    throw std::runtime_error(reason_);
  }
  void throw_if_broken() const {
    if (broken()) throw_reason();
  }

 private:
  std::atomic<bool> broken_{false};
  mutable std::mutex mutex_;
  std::string reason_;
};

// One collective in flight: its completion event on the comm stream.
struct InFlight {
  cudaEvent_t done = nullptr;
  Clock::time_point issued;
  std::string what;  // "allreduce #3 (1024 x f32, sum)"
  ~InFlight() {
    if (done) cudaEventDestroy(done);
  }
};

class NcclWork final : public Work {
 public:
  NcclWork(std::shared_ptr<InFlight> flight, std::shared_ptr<Health> health, int device,
           cudaStream_t compute)
      : flight_(std::move(flight)),
        health_(std::move(health)),
        device_(device),
        compute_(compute) {}

  // Stream-ordered: the compute stream waits for the collective and the host goes on. A
  // collective that never completes is the watchdog's: it aborts the communicator, which ends
  // the device's wait, and the next collective or host read of a result reports why.
  void wait() override {
    if (!flight_) return;  // nothing was issued (an empty buffer)
    health_->throw_if_broken();
    BAREYOLO_CUDA_CHECK(cudaSetDevice(device_));
    BAREYOLO_CUDA_CHECK(cudaStreamWaitEvent(compute_, flight_->done, 0));
  }

  // A device fault is no completion: it is thrown (the barrier's wait would otherwise return).
  bool completed() override {
    if (!flight_ || health_->broken()) return true;
    const cudaError_t status = cudaEventQuery(flight_->done);
    if (status == cudaErrorNotReady) {
      (void)cudaGetLastError();  // an answer, not an error for the next launch
      return false;
    }
    BAREYOLO_CUDA_CHECK(status);
    return true;
  }

 private:
  std::shared_ptr<InFlight> flight_;
  std::shared_ptr<Health> health_;
  int device_;
  cudaStream_t compute_;
};

// A barrier's Work: wait() returns once the collective has happened, on the host too. A peer
// that never enters is the watchdog's, whose abort ends the wait with its reason.
class HostWaitingWork final : public Work {
 public:
  HostWaitingWork(WorkHandle work, std::shared_ptr<Health> health)
      : work_(std::move(work)), health_(std::move(health)) {}
  void wait() override {
    work_->wait();
    while (!work_->completed()) std::this_thread::sleep_for(std::chrono::microseconds(50));
    health_->throw_if_broken();
  }
  bool completed() override { return work_->completed(); }

 private:
  WorkHandle work_;
  std::shared_ptr<Health> health_;
};

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return ncclFloat32;
    case DType::f64:
      return ncclFloat64;
    case DType::i64:
      return ncclInt64;
    case DType::bf16:
      return ncclBfloat16;
    default:
      throw std::invalid_argument(
          std::string("NCCL collectives take f32, f64, i64 or bf16 buffers, not ") +
          dtype_name(dtype));
  }
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return ncclSum;
    case ReduceOp::avg:
      return ncclAvg;  // sum / world_size inside NCCL: no extra kernel
    case ReduceOp::max:
      return ncclMax;
  }
  throw std::invalid_argument("unknown reduce op");
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(Store& store, int rank, int world_size, int device,
                   std::chrono::milliseconds timeout)
      : rank_(rank),
        world_size_(world_size),
        device_(device),
        timeout_(timeout),
        health_(std::make_shared<Health>()) {
    if (world_size < 1 || rank < 0 || rank >= world_size)
      throw std::invalid_argument("NCCL communicator: rank " + std::to_string(rank) +
                                  " is not in a world of " + std::to_string(world_size));
    if (timeout.count() <= 0)
      throw std::invalid_argument("NCCL communicator: the timeout must be positive, got " +
                                  std::to_string(timeout.count()) + " ms");
    if (device < 0 || device >= cuda::device_count())
      throw std::invalid_argument(
          "NCCL communicator: rank " + std::to_string(rank) +
          " asks for cuda:" + std::to_string(device) + ", but " +
          (cuda::device_count() == 0
               ? cuda::unavailable_reason()
               : std::to_string(cuda::device_count()) + " GPU(s) are visible") +
          "; use --backend tcp for CPU ranks");
    BAREYOLO_CUDA_CHECK(cudaSetDevice(device_));
    compute_ = static_cast<cudaStream_t>(cuda::compute_stream(device_));
    // A constructor that throws runs no destructor: what was made is released here.
    try {
      // Everything that may fail before joining: a rank that throws once NCCL holds its place
      // would leave its peers waiting for it until their timeout.
      BAREYOLO_CUDA_CHECK(cudaStreamCreateWithFlags(&comm_stream_, cudaStreamNonBlocking));
      BAREYOLO_CUDA_CHECK(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
      barrier_value_ = static_cast<float*>(cuda::malloc_device(sizeof(float), device_));
      BAREYOLO_CUDA_CHECK(cudaMemsetAsync(barrier_value_, 0, sizeof(float), compute_));

      ncclUniqueId id;
      if (rank == 0) {
        check(ncclGetUniqueId(&id), "ncclGetUniqueId");
        store.set(kUniqueIdKey, std::string_view(reinterpret_cast<const char*>(&id), sizeof id));
      } else {
        const std::string value = store.get(kUniqueIdKey);
        if (value.size() != sizeof id)
          throw std::runtime_error("NCCL communicator: the store's " + std::string(kUniqueIdKey) +
                                   " holds " + std::to_string(value.size()) + " bytes, not an " +
                                   "ncclUniqueId (" + std::to_string(sizeof id) +
                                   "); another job may share this MASTER_PORT");
        std::memcpy(&id, value.data(), sizeof id);
      }

      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      config.blocking = 0;  // every call returns; settle() bounds the wait
      {
        std::lock_guard<std::mutex> lock(nccl_mutex_);
        const ncclResult_t status = ncclCommInitRankConfig(&comm_, world_size, id, rank, &config);
        // (what NCCL may have made of comm_ before it failed is aborted below)
        if (status != ncclSuccess && status != ncclInProgress)
          check(status, "ncclCommInitRankConfig");
        settle_locked("joining the NCCL communicator (ncclCommInitRankConfig) of " +
                      std::to_string(world_size) + " ranks");
      }
    } catch (...) {
      {
        std::lock_guard<std::mutex> lock(nccl_mutex_);
        abort_locked();
      }
      release_cuda_resources();
      throw;
    }
    watchdog_ = std::thread([this] { watch(); });
  }

  ~NcclCommunicator() override {
    {
      std::lock_guard<std::mutex> lock(watch_mutex_);
      stopping_ = true;
    }
    watch_wake_.notify_all();
    if (watchdog_.joinable()) watchdog_.join();
    cudaSetDevice(device_);
    {
      std::lock_guard<std::mutex> lock(nccl_mutex_);
      if (comm_) {
        // Collectives still in flight may wait for peers that will never come: abort rather
        // than finalize (which would wait for them).
        bool idle = true;
        for (const auto& flight : in_flight_)
          idle = idle && cudaEventQuery(flight->done) == cudaSuccess;
        if (idle && !health_->broken()) {
          ncclCommFinalize(comm_);
          ncclResult_t state = ncclInProgress;
          // Bounded apart from the collectives' timeout (3 hours by default): finalizing only
          // flushes this rank's finished work, and a peer gone since must not hold the exit.
          const auto deadline = Clock::now() + std::min<std::chrono::milliseconds>(
                                                   timeout_, std::chrono::seconds(30));
          while (ncclCommGetAsyncError(comm_, &state) == ncclSuccess && state == ncclInProgress &&
                 Clock::now() < deadline)
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
          if (state == ncclSuccess)
            ncclCommDestroy(comm_);
          else
            ncclCommAbort(comm_);
        } else {
          ncclCommAbort(comm_);
        }
        comm_ = nullptr;
      }
    }
    release_cuda_resources();
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  Backend backend() const override { return Backend::nccl; }

  // The tags are not checked here: NCCL carries no fingerprint (communicator.h).
  WorkHandle allreduce(CommBuffer buffer, ReduceOp op, std::string_view) override {
    require_on_device("allreduce", buffer);
    check_reduction(buffer, op);
    const ncclDataType_t type = nccl_type(buffer.dtype);
    return issue("allreduce", buffer, std::string(", ") + to_string(op), [&](cudaStream_t s) {
      return ncclAllReduce(buffer.data, buffer.data, size_t(buffer.count), type, nccl_op(op), comm_,
                           s);
    });
  }

  WorkHandle broadcast(CommBuffer buffer, int root, std::string_view) override {
    require_on_device("broadcast", buffer);
    check_broadcast_root(root, world_size_);
    const ncclDataType_t type = nccl_type(buffer.dtype);
    return issue("broadcast", buffer, ", root " + std::to_string(root), [&](cudaStream_t s) {
      return ncclBroadcast(buffer.data, buffer.data, size_t(buffer.count), type, root, comm_, s);
    });
  }

  WorkHandle allgather(CommBuffer send, CommBuffer recv, std::string_view) override {
    require_on_device("allgather", send);
    require_on_device("allgather", recv);
    check_allgather_buffers(send, recv, world_size_);
    const ncclDataType_t type = nccl_type(send.dtype);
    return issue("allgather", send, "", [&](cudaStream_t s) {
      return ncclAllGather(send.data, recv.data, size_t(send.count), type, comm_, s);
    });
  }

  // A one-element all-reduce: no rank gets its result before every rank has sent its element;
  // its wait() blocks the host until then.
  WorkHandle barrier(std::string_view tag) override {
    return std::make_shared<HostWaitingWork>(
        allreduce(CommBuffer::of(barrier_value_, 1, Device::cuda(device_)), ReduceOp::sum, tag),
        health_);
  }

  bool records_in_cuda_graphs() const override { return true; }

  // A replay on a communicator the watchdog aborted would launch collectives that never end:
  // refused. The replay's work, its collectives included, is watched as one collective in
  // flight (the timeout, a peer's failure).
  void replay(const RecordedCollectives&, std::string_view what,
              const std::function<void()>& launch) override {
    {
      const std::unique_lock<std::mutex> lock = lock_unless_broken();  // no abort meanwhile
      launch();
    }
    auto flight = new_flight(std::string(what) + " (a replayed CUDA graph's collectives)");
    BAREYOLO_CUDA_CHECK(cudaEventRecord(flight->done, compute_));
    flight->issued = Clock::now();
    watch_flight(std::move(flight));
  }

 private:
  static bool failed(ncclResult_t status) {
    return status != ncclSuccess && status != ncclInProgress;
  }
  std::string failure(ncclResult_t status, const std::string& call) const {
    return "NCCL error on rank " + std::to_string(rank_) + ": " + call +
           " failed: " + ncclGetErrorString(status) +
           (comm_ ? std::string(" (") + ncclGetLastError(comm_) + ")" : "");
  }
  void check(ncclResult_t status, const std::string& call) const {
    if (failed(status)) throw std::runtime_error(failure(status, call));
  }

  void require_on_device(const char* op, const CommBuffer& buffer) const {
    check_buffer(buffer, op, "NCCL communicator");
    if (!buffer.device.is_cuda() || buffer.device.index != device_)
      throw std::invalid_argument(std::string("NCCL ") + op + ": the buffer is on " +
                                  buffer.device.str() +
                                  ", but this rank's communicator works on "
                                  "cuda:" +
                                  std::to_string(device_) + " (host buffers: use the TCP backend)");
  }

  // The comm stream (once its work is done), the event and the barrier's element.
  void release_cuda_resources() noexcept {
    if (comm_stream_) {
      cudaStreamSynchronize(comm_stream_);
      cudaStreamDestroy(comm_stream_);
    }
    if (ready_) cudaEventDestroy(ready_);
    cuda::free_device(barrier_value_, device_);
    (void)cudaGetLastError();
  }

  // Waits (holding nccl_mutex_) until the communicator's last call has left ncclInProgress;
  // an error or the timeout aborts the communicator and throws the reason.
  void settle_locked(const std::string& what) {
    const auto deadline = Clock::now() + timeout_;
    ncclResult_t state = ncclInProgress;
    while (true) {
      const ncclResult_t status = ncclCommGetAsyncError(comm_, &state);
      if (status != ncclSuccess) state = status;
      if (state != ncclInProgress) break;
      if (Clock::now() > deadline) {
        fail_locked("NCCL on rank " + std::to_string(rank_) + ": " + what +
                    " did not finish within " + seconds(timeout_) + " (a rank of the " +
                    std::to_string(world_size_) +
                    " is missing or stuck); the communicator was aborted");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    if (state != ncclSuccess) {
      fail_locked("NCCL on rank " + std::to_string(rank_) + ": " + what +
                  " failed: " + ncclGetErrorString(state) + " (" + ncclGetLastError(comm_) +
                  "); the communicator was aborted");
    }
  }

  // nccl_mutex_, or the failure's exception once the communicator is broken (see the file
  // comment: the watchdog may hold the mutex for as long as recorded graphs live).
  std::unique_lock<std::mutex> lock_unless_broken() {
    while (true) {
      std::unique_lock<std::mutex> lock(nccl_mutex_, std::try_to_lock);
      health_->throw_if_broken();
      if (lock.owns_lock()) return lock;
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  // Marks the communicator broken for `reason`, aborts it and throws the failure: the abort
  // happens here, or, once graphs have recorded its calls, on the watchdog's thread within its
  // period (an abort then waits until they are destroyed, and this thread's caller owns them:
  // it must throw and unwind first). What is thrown is the first failure's reason.
  [[noreturn]] void fail_locked(const std::string& reason) {
    health_->fail(reason);
    if (!recorded_) abort_locked();
    health_->throw_reason();
  }

  // Aborts the communicator (nccl_mutex_ held), which also releases NCCL kernels stuck on the GPU.
  void abort_locked() {
    if (comm_) ncclCommAbort(comm_);
    comm_ = nullptr;
  }

  template <class Call>
  WorkHandle issue(const char* op, const CommBuffer& buffer, const std::string& detail,
                   Call&& call) {
    health_->throw_if_broken();
    const int64_t sequence = ++issued_;
    if (buffer.count == 0)  // every rank issues the same empty collective: nothing to move
      return std::make_shared<NcclWork>(nullptr, health_, device_, compute_);
    auto flight =
        new_flight(std::string(op) + " #" + std::to_string(sequence) + " (" +
                   std::to_string(buffer.count) + " x " + dtype_name(buffer.dtype) + detail + ")");
    // The comm stream starts once the compute stream's work so far (the buffer's producers)
    // is done.
    BAREYOLO_CUDA_CHECK(cudaEventRecord(ready_, compute_));
    BAREYOLO_CUDA_CHECK(cudaStreamWaitEvent(comm_stream_, ready_, 0));
    // Recorded into a CUDA graph (the compute stream is being captured, and the comm stream with
    // it): from this call on a graph holds the communicator (fail_locked). `done` then orders the
    // graph's streams only, and the watchdog cannot ask a recorded event whether it happened;
    // each replay is watched instead (replay()).
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    BAREYOLO_CUDA_CHECK(cudaStreamIsCapturing(compute_, &capture));
    const bool recording = capture != cudaStreamCaptureStatusNone;
    if (recording) recorded_ = true;
    {
      const std::unique_lock<std::mutex> lock = lock_unless_broken();
      // A call NCCL refuses leaves its error as the communicator's state: broken from here on,
      // with this reason (not a later call's "a peer failed").
      if (const ncclResult_t status = call(comm_stream_); failed(status)) {
        fail_locked(failure(status, std::string("nccl ") + op) + "; the communicator was aborted");
      }
      settle_locked(flight->what);
      BAREYOLO_CUDA_CHECK(cudaEventRecord(flight->done, comm_stream_));
      flight->issued = Clock::now();
    }
    if (!recording) watch_flight(flight);
    return std::make_shared<NcclWork>(flight, health_, device_, compute_);
  }

  // Work in flight named `what`, its `done` event made (not recorded yet).
  std::shared_ptr<InFlight> new_flight(std::string what) {
    auto flight = std::make_shared<InFlight>();
    flight->what = std::move(what);
    BAREYOLO_CUDA_CHECK(cudaSetDevice(device_));
    BAREYOLO_CUDA_CHECK(cudaEventCreateWithFlags(&flight->done, cudaEventDisableTiming));
    return flight;
  }

  // From now on the watchdog watches `flight` (its timeout; the order of completion).
  void watch_flight(std::shared_ptr<InFlight> flight) {
    std::lock_guard<std::mutex> lock(watch_mutex_);
    in_flight_.push_back(std::move(flight));
  }

  // The watchdog: drops completed collectives; aborts on an asynchronous NCCL error or when
  // the oldest collective in flight exceeds the timeout (collectives complete in order), and
  // carries out an abort the issuing thread left to it (fail_locked). It aborts holding
  // nccl_mutex_ only: an abort may wait for recorded graphs (see the file comment), and the
  // issuing thread takes watch_mutex_ to watch what it issued.
  void watch() {
    cudaSetDevice(device_);
    while (true) {
      std::string reason;
      {
        std::unique_lock<std::mutex> lock(watch_mutex_);
        watch_wake_.wait_for(lock, kWatchdogPeriod, [this] { return stopping_; });
        if (stopping_) return;
        while (!in_flight_.empty() && cudaEventQuery(in_flight_.front()->done) == cudaSuccess)
          in_flight_.pop_front();
        (void)cudaGetLastError();  // cudaErrorNotReady is not sticky, but keep the slate clean
        if (!in_flight_.empty() && Clock::now() - in_flight_.front()->issued > timeout_)
          reason = "NCCL on rank " + std::to_string(rank_) + ": " + in_flight_.front()->what +
                   " did not complete within " + seconds(timeout_) + " (a rank of the " +
                   std::to_string(world_size_) + " is missing or stuck); the communicator " +
                   "was aborted";
      }
      std::unique_lock<std::mutex> nccl(nccl_mutex_, std::try_to_lock);
      if (!nccl.owns_lock() || !comm_) continue;  // an issue is settling: it has its own bound
      ncclResult_t state = ncclSuccess;
      if (reason.empty() && !health_->broken() &&
          ncclCommGetAsyncError(comm_, &state) == ncclSuccess && state != ncclSuccess &&
          state != ncclInProgress)
        reason = "NCCL on rank " + std::to_string(rank_) + " reported " +
                 ncclGetErrorString(state) + " (" + ncclGetLastError(comm_) +
                 "): a peer rank failed or its connection was lost; the communicator was aborted";
      if (!reason.empty()) health_->fail(reason);
      if (health_->broken()) abort_locked();
    }
  }

  const int rank_, world_size_, device_;
  const std::chrono::milliseconds timeout_;
  std::shared_ptr<Health> health_;
  cudaStream_t compute_ = nullptr, comm_stream_ = nullptr;
  cudaEvent_t ready_ = nullptr;
  float* barrier_value_ = nullptr;
  int64_t issued_ = 0;

  std::mutex nccl_mutex_;  // NCCL calls on comm_, and comm_ itself
  ncclComm_t comm_ = nullptr;
  std::atomic<bool> recorded_{false};  // a CUDA graph recorded a call (issue())

  std::mutex watch_mutex_;  // in_flight_, stopping_
  std::condition_variable watch_wake_;
  std::deque<std::shared_ptr<InFlight>> in_flight_;
  bool stopping_ = false;
  std::thread watchdog_;
};

}  // namespace

bool nccl_compiled() { return true; }

std::optional<cuda::LibraryVersion> nccl_version() {
  // NCCL encodes its version as 10000 major + 100 minor + patch (22809 = 2.28.9).
  auto decode = [](int code) {
    return cuda::Version{code / 10000, code % 10000 / 100, code % 100};
  };
  int loaded = 0;
  ncclGetVersion(&loaded);
  return cuda::LibraryVersion{"NCCL", decode(loaded), decode(NCCL_VERSION_CODE)};
}

std::unique_ptr<Communicator> make_nccl_communicator(Store& store, int rank, int world_size,
                                                     int cuda_device,
                                                     std::chrono::milliseconds timeout) {
  return std::make_unique<NcclCommunicator>(store, rank, world_size, cuda_device, timeout);
}

}  // namespace bareyolo::dist
