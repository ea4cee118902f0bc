// tests/support/communicator_contract.h — the Communicator contract
// (engine/distributed/comm/communicator.h) as checks one rank runs against any backend: the TCP
// ring and the single-rank communicator in tests/dist/communicator.cpp, NCCL in
// tests/cuda/nccl.cpp.
//
// Every rank calls the same checks in the same order (collectives must be issued alike). A
// check fills its buffers with values that depend on (seed, rank, index) only, so each rank
// computes every other rank's input and the exact expected result locally. Inputs are small
// multiples of 1/8 (and integers for i64): their sums are exact in float in any order, so the
// expected sum, mean (sum / N, rounded once like the backend's) and max are exact values and
// the comparison is bitwise. bf16 inputs lie in [-4, 4]: sums of up to 4 ranks then keep the
// 8 significant bits bf16 has, so they are exact too. A mismatch throws std::runtime_error naming
// the collective, the element, and both values (run inside tests/support/dist_testing.h's ranks: an
// exception is a failed rank with its message).
#pragma once

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "engine/distributed/comm/communicator.h"
#include "engine/tensor.h"

namespace bareyolo::dist::contract {

// Calls check(T{}) for each dtype the contract covers.
template <class Check>
void for_each_dtype(Check check) {
  check(float{});
  check(double{});
  check(int64_t{});
  check(bf16{});
}

// The checks' arithmetic on a dtype: bf16 is computed in float, each result rounded once.
template <class T>
using Math = std::conditional_t<std::is_same_v<T, bf16>, float, T>;
template <class T>
Math<T> to_math(T value) {
  if constexpr (std::is_same_v<T, bf16>)
    return to_float(value);
  else
    return value;
}
template <class T>
T from_math(Math<T> value) {
  if constexpr (std::is_same_v<T, bf16>)
    return to_bf16(value);
  else
    return value;
}

// Rank `rank`'s input for a check: `count` values from the seed.
template <class T>
std::vector<T> input_of(uint64_t seed, int rank, int64_t count) {
  std::mt19937_64 random(seed * 1000003 + uint64_t(rank));
  const int64_t limit = std::is_same_v<T, bf16> ? 32 : 8000;
  std::uniform_int_distribution<int64_t> eighths(-limit, limit);
  std::vector<T> values(static_cast<size_t>(count));
  for (auto& value : values) {
    const int64_t drawn = eighths(random);
    if constexpr (std::is_integral_v<T>) {
      value = T(drawn) * 1000003;  // large enough that a wrong sum cannot hide
    } else {
      value = from_math<T>(Math<T>(drawn) / Math<T>(8));
    }
  }
  return values;
}

// A dense tensor of `values` on `device` ([1, 1, 1, count]).
template <class T>
Tensor tensor_of(const std::vector<T>& values, Device device) {
  return Tensor::from_vector(values, Shape4{1, 1, 1, int64_t(values.size())}, device);
}

template <class T>
void expect_equal(const std::vector<T>& got, const std::vector<T>& want, const std::string& what) {
  if (got.size() != want.size()) {
    throw std::runtime_error(what + ": " + std::to_string(got.size()) + " elements, expected " +
                             std::to_string(want.size()));
  }
  for (size_t i = 0; i < got.size(); ++i) {
    if (to_math(got[i]) != to_math(want[i])) {
      std::ostringstream message;
      message.precision(17);
      message << what << ": element " << i << " of " << got.size() << " is " << to_math(got[i])
              << ", expected " << to_math(want[i]);
      throw std::runtime_error(message.str());
    }
  }
}

inline std::string describe(const char* collective, DType dtype, int64_t count) {
  return std::string(collective) + " of " + std::to_string(count) + " " + dtype_name(dtype);
}

template <class T>
std::vector<T> expected_allreduce(uint64_t seed, int world, int64_t count, ReduceOp op) {
  std::vector<Math<T>> result(size_t(count), Math<T>(0));
  for (int rank = 0; rank < world; ++rank) {
    const std::vector<T> other = input_of<T>(seed, rank, count);
    for (size_t i = 0; i < result.size(); ++i) {
      const Math<T> value = to_math(other[i]);
      result[i] = rank == 0             ? value
                  : op == ReduceOp::max ? std::max(result[i], value)
                                        : result[i] + value;
    }
  }
  std::vector<T> rounded;
  for (Math<T> value : result)
    rounded.push_back(from_math<T>(op == ReduceOp::avg ? value / Math<T>(world) : value));
  return rounded;
}

// The mean of bf16 is refused at the call, on every rank alike, and the buffer left as it was
// (communicator.h says why); every other (dtype, op) is checked bit for bit.
template <class T>
void check_allreduce(Communicator& comm, ReduceOp op, int64_t count, Device device) {
  const uint64_t seed = uint64_t(count) * 7 + uint64_t(op);
  Tensor buffer = tensor_of(input_of<T>(seed, comm.rank(), count), device);
  if (std::is_same_v<T, bf16> && op == ReduceOp::avg) {
    try {
      comm.allreduce(CommBuffer::of(buffer), op)->wait();
    } catch (const std::invalid_argument&) {
      expect_equal(buffer.to_vector<T>(), input_of<T>(seed, comm.rank(), count),
                   describe("refused allreduce", dtype_of<T>(), count) + " (avg)");
      return;
    }
    throw std::runtime_error(describe("allreduce", dtype_of<T>(), count) +
                             " (avg) ran: the mean of bf16 must be refused");
  }
  comm.allreduce(CommBuffer::of(buffer), op)->wait();
  expect_equal(buffer.to_vector<T>(), expected_allreduce<T>(seed, comm.world_size(), count, op),
               describe("allreduce", dtype_of<T>(), count) + " (" + to_string(op) + ")");
}

template <class T>
void check_broadcast(Communicator& comm, int root, int64_t count, Device device) {
  const uint64_t seed = uint64_t(count) * 11 + uint64_t(root);
  Tensor buffer = tensor_of(input_of<T>(seed, comm.rank(), count), device);
  comm.broadcast(CommBuffer::of(buffer), root)->wait();
  expect_equal(buffer.to_vector<T>(), input_of<T>(seed, root, count),
               describe("broadcast", dtype_of<T>(), count) + " from root " + std::to_string(root));
}

template <class T>
void check_allgather(Communicator& comm, int64_t count, Device device) {
  const uint64_t seed = uint64_t(count) * 13;
  const int world = comm.world_size();
  Tensor send = tensor_of(input_of<T>(seed, comm.rank(), count), device);
  Tensor recv = tensor_of(std::vector<T>(size_t(count * world), from_math<T>(-1)), device);
  comm.allgather(CommBuffer::of(send), CommBuffer::of(recv))->wait();
  std::vector<T> expected;
  for (int rank = 0; rank < world; ++rank) {
    const std::vector<T> block = input_of<T>(seed, rank, count);
    expected.insert(expected.end(), block.begin(), block.end());
  }
  expect_equal(recv.to_vector<T>(), expected, describe("allgather", dtype_of<T>(), count));
}

// CLOCK_MONOTONIC in nanoseconds: one clock for every process of this machine.
inline int64_t monotonic_ns() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return int64_t(now.tv_sec) * 1000000000 + now.tv_nsec;
}

// The last rank enters `late` after the others; no rank may leave the barrier before the last
// one entered. Entry and exit times are compared across ranks (allgathered), so the ranks must
// share a machine.
inline void check_barrier(Communicator& comm, std::chrono::milliseconds late, Device device) {
  const int world = comm.world_size();
  comm.barrier()->wait();  // start together
  if (comm.rank() == world - 1) std::this_thread::sleep_for(late);
  const int64_t entered = monotonic_ns();
  comm.barrier()->wait();
  const int64_t left = monotonic_ns();

  Tensor mine = tensor_of(std::vector<int64_t>{entered, left}, device);
  Tensor everyone = tensor_of(std::vector<int64_t>(size_t(2 * world)), device);
  comm.allgather(CommBuffer::of(mine), CommBuffer::of(everyone))->wait();
  const std::vector<int64_t> times = everyone.to_vector<int64_t>();
  int64_t last_entry = 0;
  for (int rank = 0; rank < world; ++rank) last_entry = std::max(last_entry, times[2 * rank]);
  for (int rank = 0; rank < world; ++rank) {
    if (times[2 * rank + 1] < last_entry) {
      throw std::runtime_error("barrier: rank " + std::to_string(rank) + " left it " +
                               std::to_string((last_entry - times[2 * rank + 1]) / 1000) +
                               " us before the last rank entered it");
    }
  }
}

// Several collectives in flight at once, waited for in reverse: each has its own result, and
// once the last is done every earlier one is too.
inline void check_issue_order(Communicator& comm, int64_t count, Device device) {
  const int world = comm.world_size(), rank = comm.rank();
  const int root = world - 1;
  Tensor summed = tensor_of(input_of<float>(1, rank, count), device);
  Tensor broadcast = tensor_of(input_of<double>(2, rank, count), device);
  Tensor maxed = tensor_of(input_of<int64_t>(3, rank, count), device);
  Tensor gathered = tensor_of(std::vector<int64_t>(size_t(world)), device);
  Tensor own = tensor_of(std::vector<int64_t>{int64_t(rank) * 10}, device);

  std::vector<WorkHandle> works = {
      comm.allreduce(CommBuffer::of(summed), ReduceOp::sum),
      comm.broadcast(CommBuffer::of(broadcast), root),
      comm.allreduce(CommBuffer::of(maxed), ReduceOp::max),
      comm.allgather(CommBuffer::of(own), CommBuffer::of(gathered)),
  };
  works.back()->wait();
  // On a GPU (NCCL) wait() orders the compute stream and returns: the last one is complete
  // once its event has happened, which the host waits for here.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!works.back()->completed()) {
    if (std::chrono::steady_clock::now() > deadline)
      throw std::runtime_error("issue order: the last collective did not complete in 30 s");
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  for (size_t i = 0; i < works.size(); ++i) {
    if (!works[i]->completed()) {
      throw std::runtime_error("issue order: collective " + std::to_string(i) +
                               " is not complete although the last one issued after it is");
    }
  }
  for (auto it = works.rbegin(); it != works.rend(); ++it) (*it)->wait();

  expect_equal(summed.to_vector<float>(), expected_allreduce<float>(1, world, count, ReduceOp::sum),
               "issue order: allreduce sum");
  expect_equal(broadcast.to_vector<double>(), input_of<double>(2, root, count),
               "issue order: broadcast");
  expect_equal(maxed.to_vector<int64_t>(),
               expected_allreduce<int64_t>(3, world, count, ReduceOp::max),
               "issue order: allreduce max");
  std::vector<int64_t> tens;
  for (int r = 0; r < world; ++r) tens.push_back(int64_t(r) * 10);
  expect_equal(gathered.to_vector<int64_t>(), tens, "issue order: allgather");
}

}  // namespace bareyolo::dist::contract
