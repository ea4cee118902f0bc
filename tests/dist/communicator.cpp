// tests/dist/communicator.cpp — the Communicator contract (tests/support/communicator_contract.h)
// on every backend this build can run without a GPU: the single-rank communicator (world 1), the
// TCP ring and the shm communicator (worlds 2..4), each rank a forked process on loopback
// (tests/support/dist_testing.h).
// NCCL runs the same checks in tests/cuda/nccl.cpp.
#include <doctest/doctest.h>

#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "engine/distributed/comm/ring_frame.h"
#include "engine/distributed/comm/socket.h"
#include "engine/distributed/comm/store.h"
#include "engine/distributed/comm/tcp_ring.h"
#include "engine/distributed/comm/token_proof.h"
#include "tests/support/communicator_contract.h"
#include "tests/support/dist_testing.h"

namespace bareyolo::dist {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
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
    {"shm", {.backend = Backend::shm}, {2, 3, 4}},
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

const Device kHost = Device::cpu();

// `count` floats in [-333, 333] that are no multiples of a power of two: their sums round.
std::vector<float> rounding_floats(uint32_t seed, int64_t count) {
  std::mt19937 random(seed);
  std::uniform_real_distribution<float> value(-1000.0f, 1000.0f);
  std::vector<float> values(static_cast<size_t>(count));
  for (float& v : values) v = value(random) / 3.0f;
  return values;
}

TEST_CASE(
    "communicator: allreduce sum, avg and max of f32, f64, i64, bf16 (avg refused), any count") {
  on_every_backend([](ProcessGroup& group) {
    contract::for_each_dtype([&]<class T>(T) {
      for (int64_t count : kCounts) {
        for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max})
          contract::check_allreduce<T>(*group.comm, op, count, kHost);
      }
    });
  });
}

// An allreduce of at most 64 KB takes the TCP ring's small path (an all-gather plus a local
// sum), a larger one the ring schedule; the shm communicator's small path ends at 16 KB, and
// its slices move a slot (1 MB for 2 ranks) at a time: counts on both sides of those sizes.
TEST_CASE("communicator: allreduce on both sides of the small-allreduce size") {
  on_every_backend([](ProcessGroup& group) {
    contract::for_each_dtype([&]<class T>(T) {
      const int64_t at_small_limit = (int64_t{64} << 10) / int64_t(sizeof(T));
      const int64_t at_shm_limit = (int64_t{16} << 10) / int64_t(sizeof(T));
      const int64_t slot = (int64_t{1} << 20) / int64_t(sizeof(T));
      for (int64_t count :
           {at_small_limit, at_small_limit + 1, at_shm_limit, at_shm_limit + 1, slot + 1})
        for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max})
          contract::check_allreduce<T>(*group.comm, op, count, kHost);
    });
  });
}

// Sums that round (unlike the contract's exact eighths): every rank must still end with the
// same bits, which a rank-dependent summation order would break from 3 ranks on. 1000 floats
// take both backends' small paths, 300,000 their large ones.
TEST_CASE("communicator: an allreduce that rounds gives every rank the same bits") {
  for (const auto& backend : kBackends) {
    for (int world : backend.worlds) {
      if (world == 1) continue;
      INFO(backend.name << ", world " << world);
      check_ranks_ok(run_ranks(
          world,
          [](ProcessGroup& group) {
            Communicator& comm = *group.comm;
            for (int64_t count : {1000, 300'000}) {
              std::vector<float> values = rounding_floats(uint32_t(17 + comm.rank()), count);
              Tensor buffer = Tensor::from_vector(values, {1, 1, 1, count});
              comm.allreduce(CommBuffer::of(buffer), ReduceOp::avg)->wait();
              Tensor everyone = Tensor::zeros({1, 1, 1, count * comm.world_size()});
              comm.allgather(CommBuffer::of(buffer), CommBuffer::of(everyone))->wait();
              const std::vector<float> all = everyone.to_vector<float>();
              for (size_t i = 0; i < size_t(count); ++i)
                for (int r = 1; r < comm.world_size(); ++r)
                  if (std::memcmp(&all[i], &all[r * size_t(count) + i], sizeof(float)) != 0)
                    throw std::runtime_error(
                        "element " + std::to_string(i) + " of " + std::to_string(count) +
                        ": rank 0 has " + std::to_string(all[i]) + ", rank " + std::to_string(r) +
                        " has " + std::to_string(all[r * size_t(count) + i]));
            }
          },
          100s, backend.options));
    }
  }
}

// The main 2-rank CPU run keeps its exact weights whichever backend auto picks: for 2 ranks the
// shm communicator's sums, means and maxima are the TCP ring's bits (a + b == b + a), on both
// sides of each one's small-allreduce size. Both communicators run in the same two ranks.
TEST_CASE("shm: 2 ranks get the TCP ring's bits") {
  check_ranks_ok(run_ranks(
      2,
      [](ProcessGroup& group) {
        auto ring = make_tcp_ring_communicator(*group.store, group.rank(), 2, "127.0.0.1",
                                               group.env.store_token, 30s);
        for (int64_t count : {1000, 10'000, 20'000, 300'000, (1 << 20) + 3}) {
          for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max}) {
            const std::vector<float> values = rounding_floats(uint32_t(5 + group.rank()), count);
            std::vector<float> by_shm = values, by_tcp = values;
            group.comm->allreduce(CommBuffer::of(by_shm.data(), count), op)->wait();
            ring->allreduce(CommBuffer::of(by_tcp.data(), count), op)->wait();
            if (std::memcmp(by_shm.data(), by_tcp.data(), by_shm.size() * sizeof(float)) != 0)
              throw std::runtime_error("the shm and TCP allreduce (" + std::string(to_string(op)) +
                                       ") of " + std::to_string(count) + " floats differ");
            if (by_shm == values) throw std::runtime_error("the allreduce changed nothing");
          }
        }
      },
      100s, {.backend = Backend::shm}));
}

// tcp_ring.h: a small collective on host memory that finds none queued or running runs on the
// caller's thread and returns complete; behind a large one in flight it waits its turn (run
// at once, it would reach the wire first and the neighbour would refuse its sequence number).
TEST_CASE("tcp ring: a small collective runs at once when the ring is idle, else in turn") {
  for (int world : {2, 3}) {
    INFO("world " << world);
    check_ranks_ok(run_ranks(
        world,
        [](ProcessGroup& group) {
          Communicator& comm = *group.comm;
          const int world = comm.world_size(), rank = comm.rank();
          const float ranks_sum = float(world * (world + 1) / 2);
          std::vector<float> small(1000, float(rank + 1));
          if (!comm.allreduce(CommBuffer::of(small.data(), 1000), ReduceOp::sum)->completed())
            throw std::runtime_error("a small allreduce on an idle ring returned incomplete");
          contract::expect_equal(small, std::vector<float>(1000, ranks_sum), "small, idle");

          std::vector<float> large((size_t{1} << 20) + 3, float(rank + 1)), behind(1000, 1.0f);
          WorkHandle first =
              comm.allreduce(CommBuffer::of(large.data(), int64_t(large.size())), ReduceOp::sum);
          comm.allreduce(CommBuffer::of(behind.data(), 1000), ReduceOp::sum)->wait();
          if (!first->completed())
            throw std::runtime_error("the small allreduce completed before the large one");
          contract::expect_equal(large, std::vector<float>(large.size(), ranks_sum), "large");
          contract::expect_equal(behind, std::vector<float>(1000, float(world)), "small, behind");
        },
        100s, {.backend = Backend::tcp}));
  }
}

TEST_CASE("communicator: broadcast from every root") {
  on_every_backend([](ProcessGroup& group) {
    contract::for_each_dtype([&]<class T>(T) {
      for (int64_t count : kCounts) {
        for (int root = 0; root < group.world_size(); ++root)
          contract::check_broadcast<T>(*group.comm, root, count, kHost);
      }
    });
  });
}

TEST_CASE("communicator: allgather places rank r's block at r on every rank") {
  on_every_backend([](ProcessGroup& group) {
    contract::for_each_dtype([&]<class T>(T) {
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

TEST_CASE("process group: backend auto picks shared memory for CPU ranks on one host") {
  check_ranks_ok(run_ranks(
      2,
      [](ProcessGroup& group) {
        if (group.comm->backend() != Backend::shm || group.comm->world_size() != 2 ||
            group.comm->rank() != group.rank()) {
          throw std::runtime_error(std::string("auto chose ") + to_string(group.comm->backend()) +
                                   " for CPU ranks on one host");
        }
      },
      30s, ProcessGroupOptions{}));
}

TEST_CASE("tcp ring: a neighbour that cannot prove the token is turned away") {
  // A process that connects to rank 1 before rank 0 does, claiming to be rank 0 with a proof
  // made from another token (or replayed from another ring): rank 1 closes it and takes the
  // real rank 0, and the ring then reduces. (Before, the hello carried the token itself.)
  const std::string token = "the-job-token";
  StoreServer server("127.0.0.1", 0, token);
  std::atomic<bool> stranger_done{false};
  std::vector<double> results(2);
  auto rank = [&](int r) {
    if (r == 0)
      while (!stranger_done) std::this_thread::sleep_for(1ms);
    Store store("127.0.0.1", server.port(), token, 10s);
    auto comm = make_tcp_ring_communicator(store, r, 2, "127.0.0.1", token, 10s);
    std::vector<double> value = {double(r + 1)};
    comm->allreduce(CommBuffer::of(value.data(), 1), ReduceOp::sum)->wait();
    results[size_t(r)] = value[0];
  };
  std::jthread rank1(rank, 1);
  // The stranger's connection is queued at rank 1 before rank 0 starts, so it is the first
  // that rank 1 accepts.
  Store store("127.0.0.1", server.port(), token, 10s);
  const std::string address = store.get("ring/1");
  const std::string challenge = store.get("ring/1/challenge");
  Fd stranger = connect_tcp("127.0.0.1", std::stoi(address.substr(address.rfind(':') + 1)),
                            Clock::now() + 5s);
  const std::string proof = token_proof("another-token", "ring", challenge, "0");
  std::string hello(kRingHelloMagic, sizeof kRingHelloMagic);
  const uint32_t fields[2] = {0, uint32_t(proof.size())};
  hello.append(reinterpret_cast<const char*>(fields), sizeof fields);
  hello += proof;
  CHECK(send_all(stranger.get(), hello.data(), hello.size(), Clock::now() + 5s, "rank 1"));
  stranger_done = true;
  std::jthread rank0(rank, 0);
  rank0.join();
  rank1.join();
  // Rank 1 read the stranger's hello, found the proof wrong and closed the socket.
  pollfd closing{stranger.get(), POLLIN, 0};
  REQUIRE(::poll(&closing, 1, 5000) == 1);
  char byte = 0;
  CHECK(::recv(stranger.get(), &byte, 1, 0) <= 0);  // end of stream (or a reset), no data
  CHECK(results[0] == 3.0);
  CHECK(results[1] == 3.0);
}

TEST_CASE("single-machine torchrun ranks share a secret token, never torchrun's run id") {
  // Before: the token was "torchrun:none" (torchrun's default run id), which anyone on the
  // machine could present. The ranks here share a parent (this test), as torchrun's do.
  const auto torchrun = [](LaunchEnv& env) {
    env.launcher = Launcher::torchrun;
    env.store_token = "torchrun:none";
    env.store_token_given = false;
  };
  check_ranks_ok(run_ranks(
      2,
      [](ProcessGroup& group) {
        if (group.env.store_token.size() != 64)
          throw std::runtime_error("the ranks did not derive a token: " + group.env.store_token);
        std::vector<double> value = {double(group.rank() + 1)};
        group.comm->allreduce(CommBuffer::of(value.data(), 1), ReduceOp::sum)->wait();
        if (value[0] != 3.0) throw std::runtime_error("allreduce gave " + std::to_string(value[0]));
      },
      30s, {.backend = Backend::tcp}, torchrun));
  // Rank 0 removed the token's file once both had joined.
  LaunchEnv env;
  torchrun(env);
  env.world_size = env.local_world_size = 2;
  CHECK(derives_local_token(env));
  env.master_port = 1;  // any port: the file's folder is what is checked
  const fs::path folder = fs::path(local_token_file(env, long(::getpid()))).parent_path();
  for (const auto& entry : fs::directory_iterator(folder))
    CHECK(entry.path().filename().string().rfind("store-" + std::to_string(::getpid()) + "-", 0) !=
          0);
}

}  // namespace
}  // namespace bareyolo::dist
