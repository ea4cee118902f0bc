// tests/dist/communicator.cpp — the Communicator contract (tests/support/communicator_contract.h)
// on every backend this build can run without a GPU: the single-rank communicator (world 1) and the
// TCP ring (worlds 2..4), each rank a forked process on loopback (tests/support/dist_testing.h).
// NCCL runs the same checks in tests/cuda/nccl.cpp.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "tests/support/communicator_contract.h"
#include "tests/support/dist_testing.h"

namespace bareyolo::dist {
namespace {

using namespace std::chrono_literals;
using testing::check_ranks_ok;
using testing::run_ranks;

// 0 and 1 (fewer elements than ranks: empty chunks), 7 (not divisible by 2, 3 or 4), and
// 1M + 3 (many frames per chunk, uneven chunks).
const std::vector<int64_t> kCounts = {0, 1, 7, (int64_t{1} << 20) + 3};

struct BackendUnderTest {
  const char* name;
  ProcessGroupOptions options;
  std::vector<int> worlds;
};

const std::vector<BackendUnderTest> kBackends = {
    {"single-rank", {.backend = Backend::tcp}, {1}},
    {"tcp ring", {.backend = Backend::tcp}, {2, 3, 4}},
};

// Runs `body` on every backend and world size; every rank must exit cleanly.
void on_every_backend(const testing::RankBody& body) {
  for (const auto& backend : kBackends) {
    for (int world : backend.worlds) {
      INFO(backend.name << ", world " << world);
      check_ranks_ok(run_ranks(world, body, 100s, backend.options));
    }
  }
}

// Calls check<T> for the three dtypes the contract covers.
template <class Check>
void for_each_dtype(Check check) {
  check(float{});
  check(double{});
  check(int64_t{});
}

const Device kHost = Device::cpu();

TEST_CASE("communicator: allreduce sum, avg and max of f32, f64 and i64, any count") {
  on_every_backend([](ProcessGroup& group) {
    for_each_dtype([&]<class T>(T) {
      for (int64_t count : kCounts) {
        for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max})
          contract::check_allreduce<T>(*group.comm, op, count, kHost);
      }
    });
  });
}

TEST_CASE("communicator: broadcast from every root") {
  on_every_backend([](ProcessGroup& group) {
    for_each_dtype([&]<class T>(T) {
      for (int64_t count : kCounts) {
        for (int root = 0; root < group.world_size(); ++root)
          contract::check_broadcast<T>(*group.comm, root, count, kHost);
      }
    });
  });
}

TEST_CASE("communicator: allgather places rank r's block at r on every rank") {
  on_every_backend([](ProcessGroup& group) {
    for_each_dtype([&]<class T>(T) {
      for (int64_t count : kCounts) contract::check_allgather<T>(*group.comm, count, kHost);
    });
  });
}

TEST_CASE("communicator: a barrier holds every rank until the last one enters") {
  on_every_backend([](ProcessGroup& group) { contract::check_barrier(*group.comm, 200ms, kHost); });
}

TEST_CASE("communicator: collectives in flight together complete in issue order") {
  on_every_backend([](ProcessGroup& group) {
    for (int64_t count : kCounts) contract::check_issue_order(*group.comm, count, kHost);
  });
}

TEST_CASE("communicator: a bad argument is refused at the call and the ring keeps working") {
  on_every_backend([](ProcessGroup& group) {
    Communicator& comm = *group.comm;
    std::vector<float> values(5, 1.0f);
    auto refused = [](auto call, const char* what) {
      try {
        call();
      } catch (const std::invalid_argument&) {
        return;
      }
      throw std::runtime_error(std::string(what) + " was accepted");
    };
    refused([&] { comm.broadcast(CommBuffer::of(values.data(), 5), comm.world_size()); },
            "a broadcast root beyond the ranks");
    refused(
        [&] { comm.allgather(CommBuffer::of(values.data(), 2), CommBuffer::of(values.data(), 1)); },
        "an allgather into a buffer too small");
    comm.allreduce(CommBuffer::of(values.data(), 5), ReduceOp::sum)->wait();
    contract::expect_equal(values, std::vector<float>(5, float(comm.world_size())),
                           "allreduce after refused calls");
  });
}

TEST_CASE("process group: backend auto picks the TCP ring for CPU ranks") {
  check_ranks_ok(run_ranks(
      2,
      [](ProcessGroup& group) {
        if (group.comm->backend() != Backend::tcp || group.comm->world_size() != 2 ||
            group.comm->rank() != group.rank()) {
          throw std::runtime_error(std::string("auto chose ") + to_string(group.comm->backend()) +
                                   " for CPU ranks");
        }
      },
      30s, ProcessGroupOptions{}));
}

}  // namespace
}  // namespace bareyolo::dist
