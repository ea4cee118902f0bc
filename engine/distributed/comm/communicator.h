// engine/distributed/comm/communicator.h — the collectives every backend offers, and the contract
// they keep.
//
// A Communicator connects the `world_size` ranks of a job. Each collective is issued by every
// rank, in the same order on every rank (the training step is a static sequence, so this holds
// by construction), and returns a Work handle; the data may move in the background (the TCP
// ring's comm thread, NCCL's comm stream) until wait() returns. Until then the buffer belongs
// to the communicator: the caller neither reads nor writes it. A backend may also complete a
// collective before it returns (the TCP ring does for small ones on host memory), so a rank
// must not make its peers' entry into a collective wait for something it does after issuing
// it.
//
// Contract, held by one test suite for every backend (tests/dist/communicator.cpp):
//   - allreduce(buf, op): every rank ends with the element-wise sum / mean / max of all ranks'
//     buffers. Any count, including 0 and counts not divisible by world_size. The mean of bf16
//     is refused (check_reduction): each backend would round it differently (NCCL scales by
//     1/N rounded to bf16, 0.2% too large at 3 ranks), so a bf16 caller sums and divides in
//     float itself, as the gradient reducer does.
//   - broadcast(buf, root): every rank ends with root's buffer.
//   - allgather(send, recv): recv (world_size x send.count elements) ends with rank r's send
//     buffer at [r * send.count, (r + 1) * send.count), on every rank.
//   - barrier(): returns on a rank only once every rank has entered it.
//   - Collectives complete in issue order; wait() on a later Work implies the earlier are done.
//   - A peer that dies or a wait that exceeds the timeout makes wait() throw, with a message
//     naming the rank that was lost or waited for; it never hangs. After such an error the
//     communicator is broken: every later call throws the same error.
//   - world_size 1: every collective is a no-op that completes at once.
//
// Each collective takes a `tag`, the caller's name for it ("bucket 3", "SyncBN model.2.cv1.bn",
// "validation gather"; "" names none). With its number in the issue order, the operation, the
// dtype and the count it makes the collective's fingerprint (collective_fingerprint.h): a
// backend that checks fingerprints (the TCP ring) fails every rank at once when two ranks meet
// in different collectives, naming both, instead of mixing their bytes. Tags must therefore
// agree across ranks as the collectives themselves do.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/distributed/comm/collective_fingerprint.h"
#include "engine/distributed/launch/device_spec.h"
#include "engine/tensor.h"

namespace bareyolo::dist {

enum class ReduceOp { sum, avg, max };
const char* to_string(ReduceOp op);

// A contiguous buffer of `count` elements of `dtype` (f32, f64, i64 or bf16) in host memory or
// in the memory of GPU `device.index` (NCCL only; the TCP ring stages device buffers through
// the host). bf16 reduces in float, each result rounded once to bf16 (sum and max only).
struct CommBuffer {
  void* data = nullptr;
  int64_t count = 0;
  DType dtype = DType::f32;
  Device device = Device::cpu();

  int64_t bytes() const { return count * int64_t(dtype_size(dtype)); }
  // The whole of a contiguous tensor.
  static CommBuffer of(Tensor& tensor);
  template <class T>
  static CommBuffer of(T* data, int64_t count, Device device = Device::cpu());
};

// One collective of a recording, as the watched communicator numbers it again at each replay
// (watched_communicator.h). A recording's (Communicator::end_recording) are empty where nothing
// keeps them.
struct RecordedCollective {
  CollectiveFingerprint collective;
  int64_t bytes = 0;
};
using RecordedCollectives = std::vector<RecordedCollective>;

// One collective in flight.
class Work {
 public:
  virtual ~Work() = default;
  // Makes the collective's result what later work sees: for host buffers the host blocks until
  // the result is in the buffer; for a GPU's buffers (NCCL) the device's compute stream waits
  // for it and the host goes on queueing work, so that a training step never waits for the
  // device (kernels/step_guard.h). Throws as the contract says on a lost peer or a timeout
  // (on a GPU: one the watchdog has already seen).
  virtual void wait() = 0;
  // True once wait() would return at once (or throw).
  virtual bool completed() = 0;
  // When the backend finished the collective, where it knows (the TCP ring's comm thread);
  // nothing otherwise or while it runs. For the trace (engine/trace.h).
  virtual std::optional<std::chrono::steady_clock::time_point> finished_at() const {
    return std::nullopt;
  }
};
using WorkHandle = std::shared_ptr<Work>;

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual Backend backend() const = 0;

  // The default tag is declared here only: callers hold a Communicator&.
  virtual WorkHandle allreduce(CommBuffer buffer, ReduceOp op, std::string_view tag = {}) = 0;
  virtual WorkHandle broadcast(CommBuffer buffer, int root, std::string_view tag = {}) = 0;
  virtual WorkHandle allgather(CommBuffer send, CommBuffer recv, std::string_view tag = {}) = 0;
  virtual WorkHandle barrier(std::string_view tag = {}) = 0;

  // Marks the end of an optimizer step, issued alike on every rank after its gradients are
  // reduced: a communicator that checks once a step that every rank issued the same
  // collectives (watched_communicator.h) does so here. Nothing by default.
  virtual void end_step() {}

  // --cuda-graph with a communicator (models/train/solver.h). Whether the collectives issued
  // while this rank's GPU compute stream is recorded as a CUDA graph go into the recording and
  // run again at each replay: NCCL's (its calls follow the capture onto its own stream), no host
  // backend's. Recording and replaying are collective, as issuing is: every rank records the
  // same collectives and replays them at the same points (NCCL's rule for captured calls).
  virtual bool records_in_cuda_graphs() const { return false; }
  // Brackets the issuing of one recording; what end_recording returns goes with each replay.
  virtual void begin_recording() {}
  virtual RecordedCollectives end_recording() { return {}; }
  // Replays a recording: `launch` enqueues the graph. A communicator that no longer works throws
  // before (the replayed collectives would wait for peers that are gone), and one that numbers
  // and watches its collectives does so for the replayed ones as for issued ones.
  virtual void replay(const RecordedCollectives& recording, std::string_view what,
                      const std::function<void()>& launch) {
    (void)recording, (void)what;
    launch();
  }
};

// A Work that is complete already: what a collective returns that finished before returning.
// With an `error`, wait() throws it (a collective that failed before returning).
WorkHandle completed_work(std::string error = {});

// The argument checks every backend makes at the call, each throwing std::invalid_argument that
// names the value: a buffer of a supported dtype (f32, f64, i64, bf16; `backend` names who says
// so), count >= 0, data for count > 0, on a device this build has; a reduction the dtype
// has; a broadcast root among the ranks; an allgather's receive buffer of world_size x the send
// count, in the send dtype.
void check_buffer(const CommBuffer& buffer, const char* collective, const char* backend);
void check_broadcast_root(int root, int world_size);
// An allreduce's op on the buffer's dtype: avg of bf16 is refused (the contract above says why).
void check_reduction(const CommBuffer& buffer, ReduceOp op);
void check_allgather_buffers(const CommBuffer& send, const CommBuffer& recv, int world_size);

// The communicator of a one-rank job: every collective returns a completed Work.
std::unique_ptr<Communicator> make_single_rank_communicator(Backend backend = Backend::tcp);

template <class T>
CommBuffer CommBuffer::of(T* data, int64_t count, Device device) {
  return {static_cast<void*>(data), count, dtype_of<T>(), device};
}

}  // namespace bareyolo::dist
