// engine/distributed/comm/tcp_ring.cpp — the TCP ring communicator: the collectives' schedules, the
// comm thread, Work handles and staging of GPU buffers (overview: tcp_ring.h; sockets, frames and
// the failure protocol: ring_link.h).
//
// Notation: N ranks, this is rank r, chunk/block indices are taken modulo N. At each step of
// a schedule a rank sends a region to rank r+1 while it receives one from rank r-1; the steps
// of a collective form one RingPlan that RingLink::run() moves as a pipeline of frames.
#include "engine/distributed/comm/tcp_ring.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <vector>

#include "engine/distributed/comm/even_parts.h"
#include "engine/distributed/comm/ring_link.h"
#include "kernels/device_memory.h"
#include "kernels/devices.h"

namespace bareyolo::dist {
namespace {

// An allreduce segment's chunks hold at most this much (see ring_allreduce).
constexpr size_t kSegmentChunkBytes = size_t{1} << 20;
// An allreduce of at most this many bytes is latency-bound (SyncBN's statistics, the loss's
// counts): small_allreduce, in half the ring's steps.
constexpr size_t kSmallAllreduceBytes = size_t{64} << 10;

constexpr const char* kBackendName = "TCP ring";

int wrap(int index, int n) { return ((index % n) + n) % n; }

// The N chunks of an allreduce (empty chunks send nothing).
using Chunks = EvenParts;

template <class T>
void reduce_into(T* own, const T* received, size_t n, ReduceOp op) {
  if (op == ReduceOp::max) {
    for (size_t i = 0; i < n; ++i) own[i] = received[i] > own[i] ? received[i] : own[i];
  } else {  // sum, and avg's sum before the division
    for (size_t i = 0; i < n; ++i) own[i] += received[i];
  }
}

template <class T>
void divide(T* values, size_t n, int divisor) {
  const T by = static_cast<T>(divisor);
  for (size_t i = 0; i < n; ++i) values[i] /= by;
}

// bf16 is a storage format: each sum, maximum and quotient is computed in float and rounded
// once to bf16 (what NCCL's bf16 reduction does at each step of its ring).
void reduce_into(bf16* own, const bf16* received, size_t n, ReduceOp op) {
  for (size_t i = 0; i < n; ++i) {
    const float a = to_float(own[i]), b = to_float(received[i]);
    own[i] = op == ReduceOp::max ? (b > a ? received[i] : own[i]) : to_bf16(a + b);
  }
}

void divide(bf16* values, size_t n, int divisor) {
  for (size_t i = 0; i < n; ++i) values[i] = to_bf16(to_float(values[i]) / float(divisor));
}

void reduce_bytes(char* own, const char* received, size_t bytes, DType dtype, ReduceOp op) {
  switch (dtype) {
    case DType::f32:
      return reduce_into(reinterpret_cast<float*>(own), reinterpret_cast<const float*>(received),
                         bytes / 4, op);
    case DType::f64:
      return reduce_into(reinterpret_cast<double*>(own), reinterpret_cast<const double*>(received),
                         bytes / 8, op);
    case DType::bf16:
      return reduce_into(reinterpret_cast<bf16*>(own), reinterpret_cast<const bf16*>(received),
                         bytes / 2, op);
    default:
      return reduce_into(reinterpret_cast<int64_t*>(own),
                         reinterpret_cast<const int64_t*>(received), bytes / 8, op);
  }
}

// avg = sum / N, on the reduced chunk before the all-gather, so that every rank ends with the
// same bits. For i64 this is integer division (truncating toward zero).
void divide_bytes(char* values, size_t bytes, DType dtype, int divisor) {
  switch (dtype) {
    case DType::f32:
      return divide(reinterpret_cast<float*>(values), bytes / 4, divisor);
    case DType::f64:
      return divide(reinterpret_cast<double*>(values), bytes / 8, divisor);
    case DType::bf16:
      return divide(reinterpret_cast<bf16*>(values), bytes / 2, divisor);
    default:
      return divide(reinterpret_cast<int64_t*>(values), bytes / 8, divisor);
  }
}

// A buffer's bytes in host memory: the buffer itself, or a host copy of a GPU buffer (made
// when `copy_in`) that copy_back() returns to the GPU.
class HostView {
 public:
  HostView(const CommBuffer& buffer, bool copy_in) : buffer_(buffer) {
    if (in_host_memory(buffer.device) || buffer.bytes() == 0) return;
    staged_.reset(new char[size_t(buffer.bytes())]);
    if (copy_in)
      copy_bytes(staged_.get(), Device::cpu(), buffer.data, buffer.device, size_t(buffer.bytes()));
  }
  char* data() const { return staged_ ? staged_.get() : static_cast<char*>(buffer_.data); }
  void copy_back() const {
    if (!staged_) return;
    copy_bytes(buffer_.data, buffer_.device, staged_.get(), Device::cpu(), size_t(buffer_.bytes()));
  }

 private:
  CommBuffer buffer_;
  std::unique_ptr<char[]> staged_;
};

class RingWork final : public Work {
 public:
  void wait() override {
    std::unique_lock lock(mutex_);
    finished_.wait(lock, [&] { return done_; });
    if (!error_.empty()) throw std::runtime_error(error_);
  }
  bool completed() override {
    std::lock_guard lock(mutex_);
    return done_;
  }
  std::optional<std::chrono::steady_clock::time_point> finished_at() const override {
    std::lock_guard lock(mutex_);
    return finished_at_;
  }
  void finish(std::string error) {
    {
      std::lock_guard lock(mutex_);
      done_ = true;
      error_ = std::move(error);
      finished_at_ = std::chrono::steady_clock::now();
    }
    finished_.notify_all();
  }

 private:
  mutable std::mutex mutex_;
  std::optional<std::chrono::steady_clock::time_point> finished_at_;
  std::condition_variable finished_;
  bool done_ = false;
  std::string error_;
};

// What every rank must agree on for a collective of `op` on `buffer` (its number is given
// when it is queued).
CollectiveFingerprint fingerprint(CollectiveOp op, const CommBuffer& buffer, std::string_view tag) {
  return {.op = op, .dtype = buffer.dtype, .count = buffer.count, .tag = std::string(tag)};
}

// A collective on host memory of at most kSmallAllreduceBytes: its time is latency.
bool latency_bound(const CommBuffer& buffer) {
  return in_host_memory(buffer.device) && size_t(buffer.bytes()) <= kSmallAllreduceBytes;
}

class TcpRingCommunicator final : public Communicator {
 public:
  TcpRingCommunicator(Store& store, int rank, int world_size, const std::string& master_addr,
                      const std::string& token, std::chrono::milliseconds timeout)
      : rank_(rank),
        world_size_(world_size),
        timeout_(timeout),
        link_(store, rank, world_size, master_addr, token, timeout),
        comm_thread_([this] { serve(); }) {}

  ~TcpRingCommunicator() override {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    link_.interrupt();  // a collective waiting on a peer returns at once
    queued_.notify_all();
    comm_thread_.join();
    // The neighbours may still be finishing their last collective: tell them this close is
    // a clean exit, not a death.
    if (broken_.empty()) link_.say_goodbye();
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  Backend backend() const override { return Backend::tcp; }

  WorkHandle allreduce(CommBuffer buffer, ReduceOp op, std::string_view tag) override {
    check_buffer(buffer, "allreduce", kBackendName);
    check_reduction(buffer, op);
    return enqueue(
        latency_bound(buffer), fingerprint(CollectiveOp::all_reduce, buffer, tag),
        [this, buffer, op](const Collective& collective, Clock::time_point deadline) {
          HostView host(buffer, /*copy_in=*/true);
          if (size_t(buffer.bytes()) <= kSmallAllreduceBytes)
            small_allreduce(host.data(), buffer.count, buffer.dtype, op, collective, deadline);
          else
            ring_allreduce(host.data(), buffer.count, buffer.dtype, op, collective, deadline);
          host.copy_back();
        });
  }

  WorkHandle broadcast(CommBuffer buffer, int root, std::string_view tag) override {
    check_buffer(buffer, "broadcast", kBackendName);
    check_broadcast_root(root, world_size_);
    return enqueue(latency_bound(buffer), fingerprint(CollectiveOp::broadcast, buffer, tag),
                   [this, buffer, root](const Collective& collective, Clock::time_point deadline) {
                     HostView host(buffer, /*copy_in=*/rank_ == root);
                     ring_broadcast(host.data(), size_t(buffer.bytes()), root, collective,
                                    deadline);
                     if (rank_ != root) host.copy_back();
                   });
  }

  WorkHandle allgather(CommBuffer send, CommBuffer recv, std::string_view tag) override {
    check_buffer(send, "allgather", kBackendName);
    check_buffer(recv, "allgather", kBackendName);
    check_allgather_buffers(send, recv, world_size_);
    return enqueue(latency_bound(recv), fingerprint(CollectiveOp::all_gather, send, tag),
                   [this, send, recv](const Collective& collective, Clock::time_point deadline) {
                     HostView host_send(send, /*copy_in=*/true);
                     HostView host_recv(recv, /*copy_in=*/false);
                     ring_allgather(host_send.data(), host_recv.data(), size_t(send.bytes()),
                                    collective, deadline);
                     host_recv.copy_back();
                   });
  }

  // An allgather of one value per rank: rank r can only complete it after a frame that every
  // other rank sent after entering the barrier has travelled round to it.
  WorkHandle barrier(std::string_view tag) override {
    return enqueue(/*small=*/true, {.op = CollectiveOp::barrier, .tag = std::string(tag)},
                   [this](const Collective& collective, Clock::time_point deadline) {
                     int64_t mine = rank_;
                     std::vector<int64_t> everyone(size_t(world_size_), -1);
                     ring_allgather(reinterpret_cast<char*>(&mine),
                                    reinterpret_cast<char*>(everyone.data()), sizeof mine,
                                    collective, deadline);
                   });
  }

 private:
  using Collective = CollectiveFingerprint;
  using Job = std::function<void(const Collective& collective, Clock::time_point deadline)>;
  struct Queued {
    Job job;
    Collective collective;
    std::shared_ptr<RingWork> work;
  };

  // Queues a collective behind those issued before it, numbered in issue order; its
  // fingerprint travels in every frame (ring_frame.h).
  // A `small` one (latency-bound, on host memory: SyncBN's ~100 a step) that finds nothing
  // queued or running runs at once on the calling thread instead: the hand-over to the comm
  // thread and back costs two thread wake-ups, more than its bytes, and the caller waits
  // for it anyway. Either way collectives run one at a time, in issue order.
  WorkHandle enqueue(bool small, Collective collective, Job job) {
    auto work = std::make_shared<RingWork>();
    std::unique_lock lock(mutex_);
    if (!broken_.empty()) throw std::runtime_error(broken_);
    collective.sequence = ++issued_;
    Queued queued{std::move(job), std::move(collective), work};
    if (small && queue_.empty() && !running_) {
      running_ = true;  // the comm thread takes nothing until this one is done
      lock.unlock();
      work->finish(run(queued));
      lock.lock();
      running_ = false;
      const bool more = !queue_.empty();  // issued by another thread meanwhile
      lock.unlock();
      if (more) queued_.notify_one();
      return work;
    }
    queue_.push_back(std::move(queued));
    lock.unlock();
    queued_.notify_one();
    return work;
  }

  // The comm thread: runs queued collectives one at a time, in issue order.
  void serve() {
    while (true) {
      Queued next;
      {
        std::unique_lock lock(mutex_);
        queued_.wait(lock, [&] { return stopping_ || (!queue_.empty() && !running_); });
        if (stopping_) {
          for (auto& abandoned : queue_)
            abandoned.work->finish(
                "the TCP ring communicator was destroyed before this collective ran");
          return;
        }
        next = std::move(queue_.front());
        queue_.pop_front();
        running_ = true;
      }
      next.work->finish(run(next));
      std::lock_guard lock(mutex_);
      running_ = false;
    }
  }

  // Runs one collective; "" on success, else the error its Work throws.
  std::string run(const Queued& queued) {
    {
      std::lock_guard lock(mutex_);
      if (!broken_.empty()) return broken_;
    }
    try {
      queued.job(queued.collective, Clock::now() + timeout_);
      return {};
    } catch (const RingFailure& failure) {
      return break_ring(failure);
    } catch (const std::exception& error) {
      const std::string why = stopping_ ? "destroyed its communicator with " +
                                              to_string(queued.collective) + " in flight"
                                        : std::string("failed: ") + error.what();
      return break_ring(RingFailure(rank_, "lost rank " + std::to_string(rank_) + ": it " + why));
    }
  }

  // The failure protocol (ring_link.h): tell the neighbours, then refuse every later call.
  std::string break_ring(const RingFailure& failure) {
    link_.abort(failure);
    std::lock_guard lock(mutex_);
    broken_ = "TCP ring (rank " + std::to_string(rank_) + " of " + std::to_string(world_size_) +
              "): " + failure.what();
    return broken_;
  }

  // The allreduce as one pipeline (RingPlan). A large buffer is cut into segments whose
  // chunks hold at most kSegmentChunkBytes, and the ring schedule below runs on one segment
  // after the other within the same pipeline: a reduced chunk is sent on while it is still in
  // cache, instead of after the whole buffer went past (build/bench_allreduce, 2 ranks at
  // 64 MB, kSegmentChunkBytes varied: 1 MB chunks beat 512 KB, 2 MB, 4 MB and unsegmented).
  void ring_allreduce(char* data, int64_t count, DType dtype, ReduceOp op,
                      const Collective& collective, Clock::time_point deadline) {
    const size_t element_bytes = dtype_size(dtype);
    const int64_t per_segment = int64_t(kSegmentChunkBytes / element_bytes) * world_size_;
    const int64_t segments = std::max<int64_t>(1, (count + per_segment - 1) / per_segment);
    RingPlan plan;
    std::vector<Reduction> reductions;  // one per incoming frame
    for (int64_t segment = 0; segment < segments; ++segment) {
      const int64_t begin = count * segment / segments, end = count * (segment + 1) / segments;
      plan_allreduce_segment(plan, reductions, data + size_t(begin) * element_bytes, end - begin,
                             element_bytes);
    }
    reductions.resize(plan.in.size());
    plan.on_received = [&](size_t frame) {
      const Reduction& reduction = reductions[frame];
      if (reduction.own == nullptr) return;  // an all-gather frame: it landed in place
      const size_t bytes = plan.in[frame].bytes;
      reduce_bytes(reduction.own, scratch_.data(), bytes, dtype, op);
      if (op == ReduceOp::avg && reduction.last_hop)
        divide_bytes(reduction.own, bytes, dtype, world_size_);
    };
    link_.run(plan, collective, deadline);
  }

  // A small allreduce in N-1 steps instead of the ring's 2(N-1): an all-gather of the whole
  // buffers, then every rank sums the N blocks in rank order, so every rank ends with the same
  // bits (for 2 ranks the ring's bits too: a + b == b + a). N times the bytes move, which
  // costs nothing next to a step's latency at these sizes.
  void small_allreduce(char* data, int64_t count, DType dtype, ReduceOp op,
                       const Collective& collective, Clock::time_point deadline) {
    const size_t bytes = size_t(count) * dtype_size(dtype);
    if (gathered_.size() < bytes * size_t(world_size_))
      gathered_.resize(bytes * size_t(world_size_));
    char* blocks = gathered_.data();
    ring_allgather(data, blocks, bytes, collective, deadline);
    std::memcpy(data, blocks, bytes);
    for (int r = 1; r < world_size_; ++r)
      reduce_bytes(data, blocks + size_t(r) * bytes, bytes, dtype, op);
    if (op == ReduceOp::avg) divide_bytes(data, bytes, dtype, world_size_);
  }

  // What an incoming allreduce frame is for: added into `own` (null: nothing to do, an
  // all-gather frame), then divided by N for avg when it is its chunk's last hop.
  struct Reduction {
    char* own = nullptr;
    bool last_hop = false;
  };

  // The ring schedule of one segment, appended to `plan`: rank r sends its own chunk r, then
  // keeps passing on what it receives, frame by frame, each frame as soon as it is in.
  //   Reduce-scatter, steps s = 0 .. N-2: rank r receives chunk r-s-1 — the partial result
  //   its previous neighbour holds — adds it into its own values of that chunk, and sends the
  //   sum on at step s+1. Chunk c starts at rank c and gains one rank's values per hop; after
  //   N-1 hops rank r holds chunk r+1 reduced over every rank (divided by N for avg).
  //   All-gather, steps s = 0 .. N-2: rank r sends chunk r+1 (step 0), then passes on the
  //   finished chunk r-s it received at step s, which lands straight in place.
  // Every rank's result is bit-identical: each chunk is reduced once, by its owner's chain.
  void plan_allreduce_segment(RingPlan& plan, std::vector<Reduction>& reductions, char* data,
                              int64_t count, size_t element_bytes) {
    const int n = world_size_, r = rank_;
    const Chunks chunks{count, n, element_bytes};
    auto chunk = [&](int index) { return data + chunks.offset(wrap(index, n)); };
    auto chunk_bytes = [&](int index) { return chunks.bytes(wrap(index, n)); };

    plan.send(chunk(r), chunk_bytes(r));
    for (int step = 0; step < n - 1; ++step) {
      const int c = r - step - 1;
      const size_t first = plan.receive(scratch_.data(), chunk_bytes(c), /*one_frame_buffer=*/true);
      reductions.resize(first);
      for (size_t offset = 0; offset < chunk_bytes(c); offset += kFrameBytes)
        reductions.push_back({chunk(c) + offset, step == n - 2});
      plan.forward(chunk(c), chunk_bytes(c), first);
    }
    for (int step = 0; step < n - 1; ++step) {
      const int c = r - step;
      const size_t first = plan.receive(chunk(c), chunk_bytes(c));
      if (step < n - 2) plan.forward(chunk(c), chunk_bytes(c), first);
    }
  }

  // A pipeline from the root round the ring: root -> root+1 -> ... -> root-1. Every rank in
  // between forwards each frame as soon as it has arrived, so for a large buffer every link
  // carries data at once and the time is about one buffer's transfer, not N-1 of them.
  void ring_broadcast(char* data, size_t bytes, int root, const Collective& collective,
                      Clock::time_point deadline) {
    const int hops_from_root = wrap(rank_ - root, world_size_);
    RingPlan plan;
    if (hops_from_root == 0) {
      plan.send(data, bytes);
    } else {
      const size_t first = plan.receive(data, bytes);
      if (hops_from_root < world_size_ - 1) plan.forward(data, bytes, first);
    }
    link_.run(plan, collective, deadline);
  }

  // Block q of `recv` is rank q's `send`. Rank r places its own block and sends it; at step
  // s = 0 .. N-2 it receives block r-s-1 and passes it on at step s+1 (all but the last).
  void ring_allgather(const char* send, char* recv, size_t block_bytes,
                      const Collective& collective, Clock::time_point deadline) {
    const int n = world_size_, r = rank_;
    auto block = [&](int index) { return recv + size_t(wrap(index, n)) * block_bytes; };
    if (block(r) != send && block_bytes > 0) std::memmove(block(r), send, block_bytes);
    RingPlan plan;
    plan.send(block(r), block_bytes);
    for (int step = 0; step < n - 1; ++step) {
      const size_t first = plan.receive(block(r - step - 1), block_bytes);
      if (step < n - 2) plan.forward(block(r - step - 1), block_bytes, first);
    }
    link_.run(plan, collective, deadline);
  }

  const int rank_;
  const int world_size_;
  const std::chrono::milliseconds timeout_;
  RingLink link_;  // touched by whoever runs a collective (running_), and interrupt()
  // The comm thread's landing place for one received frame, reduced from there.
  std::vector<char> scratch_ = std::vector<char>(kFrameBytes);
  // small_allreduce's N blocks (whoever runs it), kept between calls: SyncBN issues ~100 a
  // step. At most N x kSmallAllreduceBytes.
  std::vector<char> gathered_;

  std::mutex mutex_;  // guards the members below
  std::condition_variable queued_;
  std::deque<Queued> queue_;
  uint64_t issued_ = 0;
  bool running_ = false;  // a collective is on the link (on the comm thread or a caller's)
  std::string broken_;    // the error of a broken ring; "" while it works
  std::atomic<bool> stopping_ = false;

  std::thread comm_thread_;  // last: starts once everything above exists
};

}  // namespace

std::unique_ptr<Communicator> make_tcp_ring_communicator(Store& store, int rank, int world_size,
                                                         const std::string& master_addr,
                                                         const std::string& token,
                                                         std::chrono::milliseconds timeout) {
  if (world_size < 2 || rank < 0 || rank >= world_size) {
    throw std::invalid_argument(
        "the TCP ring needs world_size >= 2 and 0 <= rank < world_size, "
        "not rank " +
        std::to_string(rank) + " of " + std::to_string(world_size));
  }
  return std::make_unique<TcpRingCommunicator>(store, rank, world_size, master_addr, token,
                                               timeout);
}

}  // namespace bareyolo::dist
