// tests/cuda/nccl.cpp — the NCCL communicator on one GPU: the communicator contract suite
// (tests/support/communicator_contract.h) at world size 1 with a real NCCL communicator,
// f32/f64/i64, sizes 0, 1, 7 and 1M+3, device buffers; the stream ordering (a collective sees the
// kernel before it, a kernel after wait() sees the collective's result); the errors for host
// buffers and bad arguments; and the timeout: a world of 2 where the second rank never comes must
// end with an error naming what it waited for, not hang.
#include <chrono>
#include <string>

#include "engine/distributed/comm/nccl_communicator.h"
#include "engine/distributed/comm/store.h"
#include "kernels/cuda/runtime/runtime.h"
#include "kernels/ops.h"
#include "tests/support/communicator_contract.h"
#include "tests/support/random_tensor.h"

using namespace bareyolo;
using namespace bareyolo::dist;
using namespace bareyolo::testing;
using namespace std::chrono_literals;

namespace {
const std::string kHost = "127.0.0.1", kToken = "nccl-test";
const int64_t kCounts[] = {0, 1, 7, (1 << 20) + 3};
}  // namespace

TEST_CASE("nccl world size 1 keeps the communicator contract") {
  StoreServer server(kHost, 0, kToken);
  Store store(kHost, server.port(), kToken, 10s);
  std::unique_ptr<Communicator> comm = make_nccl_communicator(store, 0, 1, 0, 30s);
  CHECK(comm->rank() == 0);
  CHECK(comm->world_size() == 1);
  CHECK(comm->backend() == Backend::nccl);
  // The suite every backend is held to (tests/support/communicator_contract.h), on device buffers.
  const Device gpu = Device::cuda(0);
  contract::for_each_dtype([&]<class T>(T) {
    for (int64_t count : kCounts) {
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max})
        contract::check_allreduce<T>(*comm, op, count, gpu);
      contract::check_broadcast<T>(*comm, 0, count, gpu);
      contract::check_allgather<T>(*comm, count, gpu);
    }
  });
  contract::check_barrier(*comm, 0ms, gpu);
  for (int64_t count : kCounts) contract::check_issue_order(*comm, count, gpu);
}

TEST_CASE("nccl orders the comm stream after the compute stream, and back") {
  StoreServer server(kHost, 0, kToken);
  Store store(kHost, server.port(), kToken, 10s);
  std::unique_ptr<Communicator> comm = make_nccl_communicator(store, 0, 1, 0, 30s);
  Rng rng(111);
  const Shape4 s{1, 1, 1, (1 << 22) + 5};
  const Tensor values = random_tensor(rng, s);
  // The buffer is written by a kernel on the compute stream just before the collective: the
  // comm stream must wait for it.
  const Tensor on_gpu = values.to(Device::cuda(0));
  Tensor buffer = Tensor::empty(s, Device::cuda(0));
  ops::add_forward<float>(on_gpu.view<float>(), on_gpu.view<float>(), buffer.view<float>());
  Tensor received = Tensor::empty(s, Device::cuda(0));
  cuda::fill_bytes(received.view<float>().data, 0xFF, size_t(s.numel()) * 4, 0);  // NaN
  comm->allgather(CommBuffer::of(buffer), CommBuffer::of(received))->wait();
  // And a kernel issued after wait() sees the gathered values.
  Tensor doubled = Tensor::empty(s, Device::cuda(0));
  ops::add_forward<float>(received.view<float>(), received.view<float>(), doubled.view<float>());
  std::vector<float> expected = values.to_vector<float>();
  for (float& v : expected) v *= 4;
  check_close(doubled.to_vector<float>(), expected, 0, 0, "add, allgather, add");
}

TEST_CASE("nccl rejects host buffers and bad arguments with a sentence") {
  StoreServer server(kHost, 0, kToken);
  Store store(kHost, server.port(), kToken, 10s);
  std::unique_ptr<Communicator> comm = make_nccl_communicator(store, 0, 1, 0, 30s);
  Tensor host = Tensor::zeros({1, 1, 1, 4});
  CHECK_THROWS_WITH_AS(comm->allreduce(CommBuffer::of(host), ReduceOp::sum),
                       doctest::Contains("TCP backend"), std::invalid_argument);
  Tensor device = Tensor::zeros({1, 1, 1, 4}, Device::cuda(0));
  CHECK_THROWS_WITH_AS(comm->broadcast(CommBuffer::of(device), 1), doctest::Contains("root 1"),
                       std::invalid_argument);
  Tensor small = Tensor::zeros({1, 1, 1, 3}, Device::cuda(0));
  CHECK_THROWS_AS(comm->allgather(CommBuffer::of(device), CommBuffer::of(small)),
                  std::invalid_argument);
  CHECK_THROWS_WITH_AS(make_nccl_communicator(store, 0, 1, 4096, 30s),
                       doctest::Contains("cuda:4096"), std::invalid_argument);
}

TEST_CASE("nccl: a rank that never joins ends in a timeout error, not a hang") {
  StoreServer server(kHost, 0, kToken);
  Store store(kHost, server.port(), kToken, 10s);
  const auto start = std::chrono::steady_clock::now();
  // Rank 0 of a world of 2; rank 1 never comes.
  CHECK_THROWS_WITH_AS(make_nccl_communicator(store, 0, 2, 0, 2s),
                       doctest::Contains("did not finish within"), std::runtime_error);
  CHECK(std::chrono::steady_clock::now() - start < 30s);
}
