// tests/cuda_nccl.cpp — the NCCL communicator on one GPU: the world-size-1 contract with a real
// NCCL communicator (allreduce sum/avg/max, broadcast, allgather, barrier; sizes 0, 1, 7 and
// 1M+3; results visible to kernels issued after wait()), the errors for host buffers and bad
// arguments, and the timeout: a world of 2 where the second rank never comes must end with an
// error naming what it waited for, not hang.
#include <chrono>
#include <string>

#include "engine/dist/nccl_communicator.h"
#include "engine/dist/store.h"
#include "kernels/ops.h"
#include "tests/cuda_testing.h"

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
  Rng rng(111);
  for (int64_t count : kCounts) {
    INFO(count << " elements");
    const Shape4 s{1, 1, 1, count};
    const Tensor values = random_tensor(rng, s);
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max}) {
      // Written on the compute stream just before: the comm stream must wait for it.
      Tensor buffer = Tensor::empty(s, Device::cuda(0));
      buffer.copy_from(values);
      comm->allreduce(CommBuffer::of(buffer), op)->wait();
      check_close(buffer.to_vector<float>(), values.to_vector<float>(), 0, 0, to_string(op));
    }
    Tensor buffer = values.to(Device::cuda(0));
    WorkHandle work = comm->broadcast(CommBuffer::of(buffer), 0);
    work->wait();
    CHECK(work->completed());
    check_close(buffer.to_vector<float>(), values.to_vector<float>(), 0, 0, "broadcast");

    Tensor received = Tensor::empty(s, Device::cuda(0));
    if (count > 0) cuda::fill_bytes(received.view<float>().data, 0xFF, size_t(count) * 4, 0);
    comm->allgather(CommBuffer::of(buffer), CommBuffer::of(received))->wait();
    // A kernel after wait() sees the gathered values (compute stream ordered after comm).
    Tensor doubled = Tensor::empty(s, Device::cuda(0));
    ops::add_forward<float>(received.view<float>(), received.view<float>(), doubled.view<float>());
    std::vector<float> expected = values.to_vector<float>();
    for (float& v : expected) v *= 2;
    check_close(doubled.to_vector<float>(), expected, 0, 0, "allgather, then a kernel");
  }
  comm->barrier()->wait();
  // Collectives complete in order: waiting on the last implies the earlier ones are done.
  Tensor a = random_tensor(rng, {1, 1, 1, 1000}).to(Device::cuda(0));
  WorkHandle first = comm->allreduce(CommBuffer::of(a), ReduceOp::sum);
  WorkHandle last = comm->barrier();
  last->wait();
  CHECK(first->completed());
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
