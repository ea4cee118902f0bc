// tests/support/dist_testing.h — runs a test body on N forked ranks over loopback, each with its
// own ProcessGroup, and reports how every rank ended.
//
//   auto results = run_ranks(3, [](ProcessGroup& group) {
//     ...collectives on *group.comm...; throw std::runtime_error("...") on a wrong result
//   });
//   check_ranks_ok(results);
//
// The parent binds the store's port (port 0: the OS picks a free one) and hands the listening
// socket to rank 0 through BAREYOLO_STORE_FD, as bareyolo's launcher does; every rank gets a
// manual LaunchEnv (rank, world size, 127.0.0.1, the port, a token). Inside a rank, check
// results with plain exceptions, never doctest macros: the child is a copy of the test
// program, and its doctest state dies with it. An exception leaving the body is printed as
// "rank R: what()" and the rank exits 1; success is exit 0. The parent captures each rank's
// stdout and stderr, waits at most `timeout` (then SIGKILLs the ranks still running and marks
// them timed out) and notes when each rank ended.
#pragma once

#include <doctest/doctest.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "engine/distributed/comm/socket.h"
#include "engine/distributed/launch/process_group.h"

namespace bareyolo::dist::testing {

struct RankResult {
  int rank = 0;
  int exit_code = -1;      // the status passed to _exit, or -1 when killed by a signal
  int signal = 0;          // the signal that ended it, or 0
  bool timed_out = false;  // still running at the timeout (then killed)
  std::string output;      // its stdout and stderr
  std::chrono::steady_clock::time_point ended;

  bool ok() const { return exit_code == 0 && !timed_out; }
  std::string describe() const {
    std::string how = timed_out ? "timed out"
                      : signal  ? "killed by signal " + std::to_string(signal)
                                : "exit " + std::to_string(exit_code);
    return "rank " + std::to_string(rank) + ": " + how + (output.empty() ? "" : "\n" + output);
  }
};

using RankBody = std::function<void(ProcessGroup& group)>;

// The backends of CPU ranks on one host, for tests that hold for each. (A struct, not a pair:
// clang 14 cannot name a structured binding inside a lambda, and doctest's INFO is one.)
struct CpuBackend {
  const char* name;
  Backend backend;
};
inline const std::vector<CpuBackend> kCpuBackends = {{"tcp ring", Backend::tcp},
                                                     {"shm", Backend::shm}};
// Changes what a rank's launcher would have told it (by default: a manual launch on loopback
// with a per-test token).
using LaunchEdit = std::function<void(LaunchEnv& env)>;

namespace detail {

[[noreturn]] inline void run_child(int rank, int world, int port, int store_fd, int output_fd,
                                   const RankBody& body, const ProcessGroupOptions& options,
                                   const LaunchEdit& edit) {
  ::dup2(output_fd, STDOUT_FILENO);
  ::dup2(output_fd, STDERR_FILENO);
  if (rank == 0) {
    ::setenv(kStoreFdVariable, std::to_string(store_fd).c_str(), 1);
  } else {
    ::close(store_fd);
  }
  int status = 0;
  try {
    LaunchEnv env;
    env.launcher = Launcher::manual;
    env.rank = env.local_rank = rank;
    env.world_size = env.local_world_size = world;
    env.master_addr = "127.0.0.1";
    env.master_port = port;
    env.store_token = "dist-test-" + std::to_string(port);
    if (edit) edit(env);
    ProcessGroup group = init_process_group(env, options);
    body(group);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "rank %d: %s\n", rank, error.what());
    status = 1;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  ::_exit(status);
}

}  // namespace detail

inline std::vector<RankResult> run_ranks(int world, const RankBody& body,
                                         std::chrono::seconds timeout = std::chrono::seconds(60),
                                         const ProcessGroupOptions& options = {},
                                         const LaunchEdit& edit = {}) {
  Fd store_socket = listen_tcp("127.0.0.1", 0);
  const int port = bound_port(store_socket.get());
  std::vector<RankResult> results(static_cast<size_t>(world));
  std::vector<pid_t> pids(static_cast<size_t>(world));
  std::vector<Fd> outputs(static_cast<size_t>(world));
  std::fflush(stdout);
  std::fflush(stderr);
  for (int rank = 0; rank < world; ++rank) {
    int pipe_fds[2];
    REQUIRE(::pipe2(pipe_fds, O_CLOEXEC) == 0);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::close(pipe_fds[0]);
      detail::run_child(rank, world, port, store_socket.get(), pipe_fds[1], body, options, edit);
    }
    ::close(pipe_fds[1]);
    ::fcntl(pipe_fds[0], F_SETFL, O_NONBLOCK);
    outputs[size_t(rank)].reset(pipe_fds[0]);
    pids[size_t(rank)] = pid;
    results[size_t(rank)].rank = rank;
  }
  store_socket.reset();  // rank 0 owns it now

  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto drain = [&](size_t rank) {
    char chunk[4096];
    ssize_t got;
    while (outputs[rank] && (got = ::read(outputs[rank].get(), chunk, sizeof chunk)) > 0)
      results[rank].output.append(chunk, size_t(got));
  };
  size_t running = size_t(world);
  while (running > 0) {
    std::vector<pollfd> entries;
    for (auto& output : outputs) entries.push_back({output.get(), POLLIN, 0});  // -1: ignored
    ::poll(entries.data(), entries.size(), 20);
    const bool late = std::chrono::steady_clock::now() >= deadline;
    for (size_t rank = 0; rank < size_t(world); ++rank) {
      drain(rank);
      if (pids[rank] == 0) continue;
      int status = 0;
      pid_t ended = ::waitpid(pids[rank], &status, WNOHANG);
      if (ended != pids[rank] && late) {  // a rank that ended just now did not time out
        ::kill(pids[rank], SIGKILL);
        results[rank].timed_out = true;
        ended = ::waitpid(pids[rank], &status, 0);
      }
      if (ended != pids[rank]) continue;
      results[rank].ended = std::chrono::steady_clock::now();
      if (WIFEXITED(status)) results[rank].exit_code = WEXITSTATUS(status);
      if (WIFSIGNALED(status)) results[rank].signal = WTERMSIG(status);
      pids[rank] = 0;
      --running;
      drain(rank);
      outputs[rank].reset();
    }
  }
  return results;
}

// A check inside a rank's body: throws `what` (the rank then exits 1 with it) unless `ok`.
inline void require(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error(what);
}

// Fails the current test, with every rank's story, unless all ranks exited 0.
inline void check_ranks_ok(const std::vector<RankResult>& results) {
  for (const auto& result : results) CHECK_MESSAGE(result.ok(), result.describe());
}

}  // namespace bareyolo::dist::testing
