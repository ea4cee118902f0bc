// engine/distributed/comm/shm_communicator.cpp — the shm communicator's collectives: what each rank
// copies into its slot, when the ranks meet, and what each reads back (overview:
// shm_communicator.h; the segment: shm_segment.h; meetings and failures: shm_meetings.h).
//
// Notation: N ranks, this is rank r; set(m) is the slot set of data written before meeting m
// (shm_segment.h). A buffer larger than a slot moves in rounds, a slot's worth at a time.
#include "engine/distributed/comm/shm_communicator.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "engine/distributed/comm/even_parts.h"
#include "engine/distributed/comm/shm_meetings.h"
#include "engine/distributed/comm/shm_segment.h"
#include "kernels/bf16.h"
#include "kernels/device_memory.h"

namespace bareyolo::dist {
namespace {

constexpr const char* kBackendName = "shm communicator";
// An allreduce of at most this many bytes is latency-bound: one meeting, then every rank sums
// every buffer itself (reading N times the bytes costs less than a second meeting).
constexpr size_t kSmallAllreduceBytes = size_t{16} << 10;
// Elements a reduction sums at a time: the accumulator stays in L1 while each rank's chunk
// streams past it.
constexpr size_t kReduceChunk = 2048;

// The arithmetic of a reduction on T: bf16 in float, rounded once at the end.
template <class T>
using Acc = std::conditional_t<std::is_same_v<T, bf16>, float, T>;
template <class T>
Acc<T> widen(T value) {
  if constexpr (std::is_same_v<T, bf16>)
    return to_float(value);
  else
    return value;
}
template <class T>
T narrow(Acc<T> value) {
  if constexpr (std::is_same_v<T, bf16>)
    return to_bf16(value);
  else
    return value;
}

// avg's division by N. Where N is a power of two 1/N is exact, and x * (1/N) rounds to the
// same bits as x / N at a fraction of a division's cost; i64 divides (truncating).
template <class A>
struct DivideByRanks {
  explicit DivideByRanks(size_t ranks)
      : ranks(A(ranks)), inverse(A(1) / A(ranks)), exact((ranks & (ranks - 1)) == 0) {}
  A operator()(A value) const {
    if constexpr (std::is_floating_point_v<A>)
      if (exact) return value * inverse;
    return value / ranks;
  }
  A ranks, inverse;
  bool exact;
};

// out[i] = sources[0][i] (op) sources[1][i] (op) ... in rank order (then / N for avg), into
// `out` and, when not null, `copy`. `out` may be one of the sources: each chunk is read whole
// before it is written.
template <class T>
void reduce_in_rank_order(const std::vector<const char*>& sources, size_t count, ReduceOp op,
                          char* out_bytes, char* copy_bytes) {
  Acc<T> acc[kReduceChunk];
  T* out = reinterpret_cast<T*>(out_bytes);
  T* copy = reinterpret_cast<T*>(copy_bytes);
  const DivideByRanks<Acc<T>> average(sources.size());
  for (size_t begin = 0; begin < count; begin += kReduceChunk) {
    const size_t n = std::min(kReduceChunk, count - begin);
    const T* first = reinterpret_cast<const T*>(sources[0]) + begin;
    for (size_t i = 0; i < n; ++i) acc[i] = widen(first[i]);
    for (size_t q = 1; q < sources.size(); ++q) {
      const T* next = reinterpret_cast<const T*>(sources[q]) + begin;
      if (op == ReduceOp::max) {
        for (size_t i = 0; i < n; ++i) acc[i] = std::max(acc[i], widen(next[i]));
      } else {
        for (size_t i = 0; i < n; ++i) acc[i] += widen(next[i]);
      }
    }
    if (op == ReduceOp::avg)
      for (size_t i = 0; i < n; ++i) acc[i] = average(acc[i]);
    for (size_t i = 0; i < n; ++i) out[begin + i] = narrow<T>(acc[i]);
    if (copy) std::memcpy(copy + begin, out + begin, n * sizeof(T));
  }
}

void reduce_bytes(const std::vector<const char*>& sources, size_t bytes, DType dtype, ReduceOp op,
                  char* out, char* copy) {
  switch (dtype) {
    case DType::f32:
      return reduce_in_rank_order<float>(sources, bytes / 4, op, out, copy);
    case DType::f64:
      return reduce_in_rank_order<double>(sources, bytes / 8, op, out, copy);
    case DType::bf16:
      return reduce_in_rank_order<bf16>(sources, bytes / 2, op, out, copy);
    default:
      return reduce_in_rank_order<int64_t>(sources, bytes / 8, op, out, copy);
  }
}

CollectiveFingerprint fingerprint(CollectiveOp op, const CommBuffer& buffer, std::string_view tag) {
  return {.op = op, .dtype = buffer.dtype, .count = buffer.count, .tag = std::string(tag)};
}

// The shm communicator moves host memory only: GPU ranks take NCCL or the TCP ring.
void check_host_buffer(const CommBuffer& buffer, const char* collective) {
  check_buffer(buffer, collective, kBackendName);
  if (!in_host_memory(buffer.device))
    throw std::invalid_argument(std::string(collective) + ": the buffer is on " +
                                buffer.device.str() +
                                "; the shm communicator moves host memory only (use --backend "
                                "nccl or tcp for GPU ranks)");
}

class ShmCommunicator final : public Communicator {
 public:
  ShmCommunicator(Store& store, int rank, int world_size, const std::string& token, int store_port,
                  std::chrono::milliseconds timeout)
      : rank_(rank),
        world_size_(world_size),
        timeout_(timeout),
        segment_(store, rank, world_size, token, store_port, timeout),
        meetings_(segment_, rank, timeout) {
    if (rank == 0) segment_.unlink_name();  // every rank has it mapped now
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  Backend backend() const override { return Backend::shm; }

  WorkHandle allreduce(CommBuffer buffer, ReduceOp op, std::string_view tag) override {
    check_host_buffer(buffer, "allreduce");
    check_reduction(buffer, op);
    return run(fingerprint(CollectiveOp::all_reduce, buffer, tag),
               [&](const Collective& collective, Clock::time_point deadline) {
                 if (size_t(buffer.bytes()) <= kSmallAllreduceBytes)
                   small_allreduce(buffer, op, collective, deadline);
                 else
                   sliced_allreduce(buffer, op, collective, deadline);
               });
  }

  WorkHandle broadcast(CommBuffer buffer, int root, std::string_view tag) override {
    check_host_buffer(buffer, "broadcast");
    check_broadcast_root(root, world_size_);
    return run(fingerprint(CollectiveOp::broadcast, buffer, tag), [&](const Collective& collective,
                                                                      Clock::time_point deadline) {
      copy_through_slots(
          size_t(buffer.bytes()), collective, deadline, [&](size_t at, size_t bytes) {
            if (rank_ == root)
              std::memcpy(segment_.slot(meetings_.next_set(), root), data(buffer) + at, bytes);
            return [this, &buffer, root, at, bytes](int set) {
              if (rank_ != root) std::memcpy(data(buffer) + at, segment_.slot(set, root), bytes);
            };
          });
    });
  }

  WorkHandle allgather(CommBuffer send, CommBuffer recv, std::string_view tag) override {
    check_host_buffer(send, "allgather");
    check_host_buffer(recv, "allgather");
    check_allgather_buffers(send, recv, world_size_);
    return run(fingerprint(CollectiveOp::all_gather, send, tag), [&](const Collective& collective,
                                                                     Clock::time_point deadline) {
      const size_t block = size_t(send.bytes());
      char* own = data(recv) + size_t(rank_) * block;
      if (own != data(send) && block > 0) std::memmove(own, data(send), block);
      copy_through_slots(block, collective, deadline, [&](size_t at, size_t bytes) {
        std::memcpy(segment_.slot(meetings_.next_set(), rank_), own + at, bytes);
        return [this, &recv, block, at, bytes](int set) {
          for (int q = 0; q < world_size_; ++q)
            if (q != rank_)
              std::memcpy(data(recv) + size_t(q) * block + at, segment_.slot(set, q), bytes);
        };
      });
    });
  }

  WorkHandle barrier(std::string_view tag) override {
    return run({.op = CollectiveOp::barrier, .tag = std::string(tag)},
               [&](const Collective& collective, Clock::time_point deadline) {
                 meetings_.meet_first(collective, deadline);
               });
  }

 private:
  using Collective = CollectiveFingerprint;

  static char* data(const CommBuffer& buffer) { return static_cast<char*>(buffer.data); }

  // Runs one collective on this thread, numbered in issue order; a completed Work, or one
  // that throws the failure (the communicator is then broken).
  template <class Job>
  WorkHandle run(Collective collective, const Job& job) {
    std::lock_guard lock(mutex_);
    if (!broken_.empty()) throw std::runtime_error(broken_);
    collective.sequence = ++issued_;
    try {
      job(collective, Clock::now() + timeout_);
      return completed_work();
    } catch (const ShmFailure& failure) {
      return break_with(failure);
    } catch (const std::exception& error) {  // local (out of memory): the peers must not wait
      return break_with(ShmFailure(rank_, "lost rank " + std::to_string(rank_) + ": it failed in " +
                                              to_string(collective) + ": " + error.what()));
    }
  }

  // The failure protocol (shm_meetings.h), then every later call refuses.
  WorkHandle break_with(const ShmFailure& failure) {
    broken_ = "shm communicator (rank " + std::to_string(rank_) + " of " +
              std::to_string(world_size_) + "): " + meetings_.abort(failure);
    return completed_work(broken_);
  }

  // `bytes` a slot at a time: for each round `write(at, n)` fills this rank's part of the slot set
  // of the next meeting and returns what to read from that set after it, `read(set)`. Always at
  // least one meeting, the first checking the fingerprints.
  template <class Write>
  void copy_through_slots(size_t bytes, const Collective& collective, Clock::time_point deadline,
                          const Write& write) {
    const size_t slot = segment_.slot_bytes();
    size_t at = 0;
    do {
      const size_t n = std::min(slot, bytes - at);
      const int set = meetings_.next_set();
      auto read = write(at, n);
      if (at == 0)
        meetings_.meet_first(collective, deadline);
      else
        meetings_.meet(collective, deadline);
      read(set);
      at += n;
    } while (at < bytes);
  }

  // Every rank copies its whole buffer into its slot, meets, and sums every rank's in rank order.
  void small_allreduce(const CommBuffer& buffer, ReduceOp op, const Collective& collective,
                       Clock::time_point deadline) {
    const size_t bytes = size_t(buffer.bytes());
    const int set = meetings_.next_set();
    std::memcpy(segment_.slot(set, rank_), data(buffer), bytes);
    meetings_.meet_first(collective, deadline);
    std::vector<const char*> sources;
    for (int q = 0; q < world_size_; ++q)
      sources.push_back(q == rank_ ? data(buffer) : segment_.slot(set, q));
    reduce_bytes(sources, bytes, buffer.dtype, op, data(buffer), nullptr);
  }

  // Rounds of a slot's worth of elements. In each round, slice s is 1/N of the round's piece:
  //   before meeting m, rank r copies every slice but its own into its slot of set(m);
  //   after it, rank r sums slice r of every rank (its own from its buffer) into its buffer and
  //   into its slot of set(m+1);
  //   after meeting m+1, rank r copies slice q of rank q's slot in set(m+1), for every q != r.
  // Each slice is reduced once, by its owner, so every rank ends with the same bits.
  void sliced_allreduce(const CommBuffer& buffer, ReduceOp op, const Collective& collective,
                        Clock::time_point deadline) {
    const size_t element_bytes = dtype_size(buffer.dtype);
    const int64_t per_round = int64_t(segment_.slot_bytes() / element_bytes);
    const int64_t rounds = (buffer.count + per_round - 1) / per_round;
    for (int64_t round = 0; round < rounds; ++round) {
      const int64_t begin = buffer.count * round / rounds,
                    end = buffer.count * (round + 1) / rounds;
      char* piece = data(buffer) + size_t(begin) * element_bytes;
      const EvenParts slices{end - begin, world_size_, element_bytes};

      const int inputs = meetings_.next_set();
      for (int q = 0; q < world_size_; ++q)
        if (q != rank_)
          std::memcpy(segment_.slot(inputs, rank_) + slices.offset(q), piece + slices.offset(q),
                      slices.bytes(q));
      if (round == 0)
        meetings_.meet_first(collective, deadline);
      else
        meetings_.meet(collective, deadline);

      const int results = meetings_.next_set();
      const size_t mine = slices.offset(rank_);
      std::vector<const char*> sources;
      for (int q = 0; q < world_size_; ++q)
        sources.push_back((q == rank_ ? piece : segment_.slot(inputs, q)) + mine);
      reduce_bytes(sources, slices.bytes(rank_), buffer.dtype, op, piece + mine,
                   segment_.slot(results, rank_) + mine);
      meetings_.meet(collective, deadline);

      for (int q = 0; q < world_size_; ++q)
        if (q != rank_)
          std::memcpy(piece + slices.offset(q), segment_.slot(results, q) + slices.offset(q),
                      slices.bytes(q));
    }
  }

  const int rank_;
  const int world_size_;
  const std::chrono::milliseconds timeout_;
  ShmSegment segment_;
  ShmMeetings meetings_;  // after the segment: it says goodbye through it

  std::mutex mutex_;  // one collective at a time; guards the members below
  uint64_t issued_ = 0;
  std::string broken_;  // the error of a broken communicator; "" while it works
};

}  // namespace

std::unique_ptr<Communicator> make_shm_communicator(Store& store, int rank, int world_size,
                                                    const std::string& token, int store_port,
                                                    std::chrono::milliseconds timeout) {
  if (world_size < 2 || rank < 0 || rank >= world_size) {
    throw std::invalid_argument(
        "the shm communicator needs world_size >= 2 and 0 <= rank < world_size, not rank " +
        std::to_string(rank) + " of " + std::to_string(world_size));
  }
  return std::make_unique<ShmCommunicator>(store, rank, world_size, token, store_port, timeout);
}

}  // namespace bareyolo::dist
