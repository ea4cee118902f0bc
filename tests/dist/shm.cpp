// tests/dist/shm.cpp — what only the shm communicator has: its segment's lifetime and the
// departure notice in it. No /dev/shm/bareyolo-* outlives a job, clean or SIGKILLed, a stale
// segment of the same name (left by a job killed while joining) is replaced, never used, and a
// rank that closes its communicator is named by a peer still waiting for it. Its collectives pass
// the contract suite (communicator.cpp), its faults and desyncs are in faults.cpp and desync.cpp.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "engine/distributed/comm/shm_segment.h"
#include "tests/support/dist_testing.h"

namespace bareyolo::dist {
namespace {

using namespace std::chrono_literals;
using testing::check_ranks_ok;
using testing::run_ranks;

// The shm segments in /dev/shm now.
std::set<std::string> segments() {
  std::set<std::string> names;
  std::error_code missing;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", missing))
    if (entry.path().filename().string().starts_with("bareyolo-"))
      names.insert(entry.path().filename().string());
  return names;
}

// Two ranks that all-reduce once, then end as `end` says.
void allreduce_then(ProcessGroup& group, const std::function<void()>& end) {
  if (group.comm->backend() != Backend::shm) throw std::runtime_error("not on shm");
  std::vector<float> values(1000, float(group.rank() + 1));
  group.comm->allreduce(CommBuffer::of(values.data(), 1000), ReduceOp::sum)->wait();
  if (values[999] != 3.0f)
    throw std::runtime_error("allreduce gave " + std::to_string(values[999]));
  end();
}

TEST_CASE("shm: no segment is left behind by a job, clean or SIGKILLed") {
  const std::set<std::string> before = segments();
  check_ranks_ok(run_ranks(2, [](ProcessGroup& group) { allreduce_then(group, [] {}); }, 30s,
                           {.backend = Backend::shm}));
  CHECK(segments() == before);

  // Both ranks die by SIGKILL with the segment mapped: nothing runs after, yet rank 0 unlinked
  // the name when both had joined, and the kernel frees the memory with the last mapping.
  const auto killed =
      run_ranks(2, [](ProcessGroup& group) { allreduce_then(group, [] { ::raise(SIGKILL); }); },
                30s, {.backend = Backend::shm});
  for (const auto& result : killed) {
    INFO(result.describe());
    CHECK(result.signal == SIGKILL);
  }
  CHECK(segments() == before);
}

TEST_CASE("shm: a stale segment of the same name is replaced, never used") {
  // Before rank 0 creates its segment, a segment of the very name it will take exists, as a
  // job killed while joining leaves it: the right magic and sizes, another job's nonce, and
  // every rank's step counter far ahead (used, it would let the ranks pass their meetings
  // without each other). Rank 0 must replace it and the collectives work.
  const std::set<std::string> before = segments();
  check_ranks_ok(run_ranks(
      2,
      [](ProcessGroup& group) {
        for (int round = 0; round < 3; ++round) allreduce_then(group, [] {});
      },
      30s, {.backend = Backend::shm},
      [](LaunchEnv& env) {
        if (env.rank != 0) return;
        const std::string name = shm_segment_name(env.store_token, env.master_port, 0);
        const int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
        if (fd < 0) throw std::runtime_error("cannot create the stale " + name);
        const size_t bytes = size_t(8) << 20;
        if (::ftruncate(fd, off_t(bytes)) != 0) throw std::runtime_error("ftruncate");
        char* stale =
            static_cast<char*>(::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
        std::memset(stale, 0x7f, bytes);
        std::memcpy(stale, "byoloshm", 8);
        ::munmap(stale, bytes);
        ::close(fd);
      }));
  CHECK(segments() == before);
}

TEST_CASE("shm: a rank that closed its communicator is named at once, not at its exit") {
  // Rank 1 closes its communicator and lives on (as a rank that finished early would); rank 0
  // issues one more collective. It must fail from the departure itself, long before the
  // timeout and before rank 1's process ends. (Rank 0's process itself ends only after rank
  // 1's: its store lingers for clients still connected, store_server.cpp, so the time is taken
  // where the collective fails.)
  const auto results = run_ranks(
      2,
      [](ProcessGroup& group) {
        if (group.rank() == 1) {
          group.comm.reset();
          group.store->set("closed", "1");
          std::this_thread::sleep_for(3s);
          return;
        }
        std::vector<double> values(10, 1.0);
        group.store->get("closed");  // the clock starts once rank 1 has closed (its set-up done)
        const auto issued = std::chrono::steady_clock::now();
        try {
          group.comm->allreduce(CommBuffer::of(values.data(), 10), ReduceOp::sum)->wait();
        } catch (const std::exception&) {
          const std::chrono::duration<double> waited = std::chrono::steady_clock::now() - issued;
          if (waited > 1.5s)
            throw std::runtime_error("the departure was named only after " +
                                     std::to_string(waited.count()) + " s");
          throw;
        }
      },
      30s, {.backend = Backend::shm, .timeout = 20s});
  INFO(results[0].describe());
  CHECK(results[0].exit_code == 1);
  CHECK(results[0].output.find("lost rank 1: it closed its communicator") != std::string::npos);
  CHECK(results[1].ok());
}

}  // namespace
}  // namespace bareyolo::dist
