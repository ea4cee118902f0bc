// tests/dist/launcher.cpp — the launcher with real processes. Each test forks a "launcher
// process" (so that its signals, exits and fork()s stay away from the test runner) whose
// stdout and stderr the test reads; that process calls launch_workers and exits with its
// result. Workers talk over loopback on the port the launcher picked. Every wait has a
// deadline, so a broken launcher fails a test instead of hanging the suite.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <regex>
#include <set>
#include <stdexcept>
#include <thread>

#include "engine/distributed/comm/socket.h"
#include "engine/distributed/launch/launcher.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cuda/runtime/runtime.h"

namespace bareyolo::dist {
namespace {

using namespace std::chrono_literals;
using Worker = std::function<int(int)>;

constexpr auto kTimeout = 20s;  // only reached when the launcher is broken

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

size_t count_of(const std::string& text, const std::string& part) {
  size_t count = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++count;
  return count;
}

// Listening TCP sockets this process holds (on `port`, or on any port when 0).
int listening_sockets(int port = 0) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    int fd = std::stoi(entry.path().filename().string());
    int listening = 0;
    socklen_t length = sizeof listening;
    if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &length) != 0 || !listening)
      continue;
    if (port == 0 || bound_port(fd) == port) ++count;
  }
  return count;
}

void sleep_until_killed() {
  for (int i = 0; i < 600; ++i) std::this_thread::sleep_for(100ms);
}

// A launcher process: forked, its output captured, launch_workers(plan, worker) run in it
// after `prepare` (which may change its environment). It prints one line after
// launch_workers returns and exits with the returned value (99 when launch_workers threw).
class LauncherProcess {
 public:
  LauncherProcess(const LaunchPlan& plan, const Worker& worker,
                  const std::function<void()>& prepare = {})
      : start_(Clock::now()) {
    int out[2], err[2];
    REQUIRE(::pipe(out) == 0);
    REQUIRE(::pipe(err) == 0);
    std::fflush(nullptr);
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::dup2(out[1], STDOUT_FILENO);
      ::dup2(err[1], STDERR_FILENO);
      for (int fd : {out[0], out[1], err[0], err[1]}) ::close(fd);
      int code = 99;
      try {
        if (prepare) prepare();
        code = launch_workers(plan, worker);
        std::printf("launch_workers returned %d; parent listens on %d sockets\n", code,
                    listening_sockets());
      } catch (const std::exception& error) {
        std::printf("launch_workers threw: %s\n", error.what());
      }
      std::fflush(nullptr);
      ::_exit(code);
    }
    ::close(out[1]);
    ::close(err[1]);
    out_.reset(out[0]);
    err_.reset(err[0]);
  }
  ~LauncherProcess() {
    if (!exited_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  pid_t pid() const { return pid_; }
  const std::string& out() const { return out_text_; }
  const std::string& err() const { return err_text_; }

  // Reads output until `text` has appeared `times` times in stdout or stderr; false at the
  // deadline.
  bool wait_for(const std::string& text, size_t times = 1) {
    Clock::time_point deadline = Clock::now() + kTimeout;
    while (count_of(out_text_ + err_text_, text) < times) {
      if (Clock::now() >= deadline || !read_some(deadline)) return false;
    }
    return true;
  }

  // Reads everything until the process ends; returns its exit code (-1 on the deadline).
  int finish() {
    Clock::time_point deadline = Clock::now() + kTimeout;
    while (read_some(deadline)) {
    }
    while (Clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        exited_ = true;
        seconds_ = seconds_since(start_);
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(10ms);
    }
    FAIL_CHECK("the launcher process did not end within " << seconds_text(kTimeout));
    return -1;
  }
  double seconds() const { return seconds_; }

 private:
  // Waits for output on either pipe and appends it; false once both are closed or at the
  // deadline.
  bool read_some(Clock::time_point deadline) {
    std::vector<pollfd> watched;
    if (out_) watched.push_back({out_.get(), POLLIN, 0});
    if (err_) watched.push_back({err_.get(), POLLIN, 0});
    if (watched.empty()) return false;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left <= 0ms || ::poll(watched.data(), watched.size(), static_cast<int>(left.count())) <= 0)
      return false;
    for (const pollfd& entry : watched) {
      if (!entry.revents) continue;
      Fd& pipe = entry.fd == out_.get() ? out_ : err_;
      std::string& text = entry.fd == out_.get() ? out_text_ : err_text_;
      char bytes[4096];
      ssize_t count = ::read(entry.fd, bytes, sizeof bytes);
      if (count <= 0)
        pipe.reset();
      else
        text.append(bytes, static_cast<size_t>(count));
    }
    return true;
  }

  Clock::time_point start_;
  pid_t pid_ = -1;
  Fd out_, err_;
  std::string out_text_, err_text_;
  bool exited_ = false;
  double seconds_ = 0;
};

// Prints the worker's view of its environment; global rank 0 accepts one connection from
// every other rank on the socket it inherited, the others connect to MASTER_PORT.
int report_and_rendezvous(int local_rank) {
  LaunchEnv env = read_launch_env(process_environment());
  std::printf("rank=%d local=%d world=%d local_world=%d addr=%s port=%d token=%s by=%s\n", env.rank,
              env.local_rank, env.world_size, env.local_world_size, env.master_addr.c_str(),
              env.master_port, env.store_token.c_str(), to_string(env.launcher));
  std::fprintf(stderr, "to stderr from local rank %d\n", local_rank);
  std::printf("threads=%d of BAREYOLO_THREADS=%s\n", ThreadPool::global().num_threads(),
              std::getenv("BAREYOLO_THREADS"));
  const char* store_fd = std::getenv(kStoreFdVariable);
  if (env.rank != 0) {
    if (store_fd || listening_sockets(env.master_port) != 0)
      throw std::runtime_error("a rank other than 0 holds the store's socket");
    Fd connection = connect_tcp(env.master_addr, env.master_port, Clock::now() + 10s);
    unsigned char rank = static_cast<unsigned char>(env.rank);
    send_all(connection.get(), &rank, 1, Clock::now() + 10s, "rank 0");
    std::printf("partial line from rank %d", env.rank);  // no newline: flushed at exit
    return 0;
  }
  if (!store_fd) throw std::runtime_error("rank 0 got no BAREYOLO_STORE_FD");
  int listening = std::atoi(store_fd);
  if (bound_port(listening) != env.master_port)
    throw std::runtime_error("the inherited socket is not bound to MASTER_PORT");
  if (::fcntl(listening, F_GETFD) & FD_CLOEXEC)
    throw std::runtime_error("the inherited socket is still close-on-exec");
  std::set<int> peers;
  while (static_cast<int>(peers.size()) < env.world_size - 1) {
    pollfd entry{listening, POLLIN, 0};
    if (::poll(&entry, 1, 10000) != 1) throw std::runtime_error("no connection within 10 s");
    Fd connection(::accept(listening, nullptr, nullptr));
    if (!connection) continue;
    unsigned char rank = 0;
    recv_all(connection.get(), &rank, 1, Clock::now() + 10s, "a peer");
    peers.insert(rank);
  }
  std::printf("rank 0 accepted %zu peers on MASTER_PORT\n", peers.size());
  return 0;
}

// The field `name` ("port", "token") of every "rank=" line, in order.
std::vector<std::string> fields(const std::string& out, const std::string& name) {
  std::vector<std::string> values;
  std::regex pattern(name + "=(\\S+)");
  for (std::sregex_iterator it(out.begin(), out.end(), pattern), end; it != end; ++it)
    values.push_back((*it)[1]);
  return values;
}

// (No ';' in test names: ctest's doctest discovery splits names there.)
TEST_CASE("dist launcher: workers get their ranks, rank 0 the store's socket, output prefixed") {
  LaunchPlan plan;
  plan.nproc = 3;
  LauncherProcess launcher(plan, report_and_rendezvous);
  CHECK(launcher.finish() == 0);
  const std::string& out = launcher.out();
  INFO("stdout:\n" << out << "\nstderr:\n" << launcher.err());
  for (int rank = 0; rank < 3; ++rank) {
    std::string r = std::to_string(rank);
    CHECK(out.find("[rank" + r + "]: rank=" + r + " local=" + r +
                   " world=3 local_world=3 addr=127.0.0.1 port=") != std::string::npos);
    CHECK(launcher.err().find("[rank" + r + "]: to stderr from local rank " + r + "\n") !=
          std::string::npos);
  }
  CHECK(count_of(out, "by=bareyolo's launcher") == 3);
  CHECK(out.find("[rank0]: rank 0 accepted 2 peers on MASTER_PORT") != std::string::npos);
  CHECK(out.find("[rank2]: partial line from rank 2\n") != std::string::npos);
  // One port and one token for the whole run; the port was picked (not 0).
  std::vector<std::string> ports = fields(out, "port"), tokens = fields(out, "token");
  REQUIRE(ports.size() == 3);
  REQUIRE(tokens.size() == 3);
  CHECK(std::set<std::string>(ports.begin(), ports.end()).size() == 1);
  CHECK(std::stoi(ports[0]) > 0);
  CHECK(std::set<std::string>(tokens.begin(), tokens.end()).size() == 1);
  CHECK(tokens[0].size() == 32);
  // Three ranks share the cores (BAREYOLO_THREADS was unset) and the pool follows it.
  int threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / 3);
  if (!std::getenv("BAREYOLO_THREADS")) {
    CHECK(count_of(out, "threads=" + std::to_string(threads) +
                            " of BAREYOLO_THREADS=" + std::to_string(threads) + "\n") == 3);
  }
  // Only the launcher process came back from launch_workers, unprefixed, and it let go of the
  // store's socket.
  CHECK(count_of(out, "launch_workers returned") == 1);
  CHECK(out.find("\nlaunch_workers returned 0; parent listens on 0 sockets\n") !=
        std::string::npos);
}

TEST_CASE("dist launcher: every run gets its own store token") {
  LaunchPlan plan;
  Worker print_token = [](int) {
    std::printf("token=%s\n", read_launch_env(process_environment()).store_token.c_str());
    return 0;
  };
  LauncherProcess first(plan, print_token), second(plan, print_token);
  CHECK(first.finish() == 0);
  CHECK(second.finish() == 0);
  std::vector<std::string> a = fields(first.out(), "token"), b = fields(second.out(), "token");
  REQUIRE(a.size() == 1);
  REQUIRE(b.size() == 1);
  CHECK(a[0] != b[0]);
}

TEST_CASE("dist launcher: several nodes — global ranks, one store on node 0's given port") {
  int port = 0;
  {
    Fd probe = listen_tcp("127.0.0.1", 0);
    port = bound_port(probe.get());
  }
  LaunchPlan node0;
  node0.nproc = 2;
  node0.nnodes = 2;
  node0.master_port = port;
  node0.store_token = "two-nodes-on-one-machine";
  LaunchPlan node1 = node0;
  node1.node_rank = 1;
  LauncherProcess first(node0, report_and_rendezvous), second(node1, report_and_rendezvous);
  CHECK(first.finish() == 0);
  CHECK(second.finish() == 0);
  INFO("node 0:\n" << first.out() << first.err() << "\nnode 1:\n" << second.out() << second.err());
  std::string expected = "world=4 local_world=2 addr=127.0.0.1 port=" + std::to_string(port) +
                         " token=two-nodes-on-one-machine";
  CHECK(first.out().find("[rank0]: rank=0 local=0 " + expected) != std::string::npos);
  CHECK(first.out().find("[rank1]: rank=1 local=1 " + expected) != std::string::npos);
  CHECK(second.out().find("[rank2]: rank=2 local=0 " + expected) != std::string::npos);
  CHECK(second.out().find("[rank3]: rank=3 local=1 " + expected) != std::string::npos);
  CHECK(first.out().find("rank 0 accepted 3 peers") != std::string::npos);
}

TEST_CASE("dist launcher: the first failing worker stops the others and is named") {
  // Rank 1 exits 3 once the others are ready; rank 0 dies of the SIGTERM at once, rank 2
  // ignores it and is killed after the grace period.
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  LaunchPlan plan;
  plan.nproc = 3;
  plan.grace = 1s;
  Worker worker = [ready](int local_rank) {
    if (local_rank == 2) std::signal(SIGTERM, SIG_IGN);
    if (local_rank != 1) {
      [[maybe_unused]] ssize_t sent = ::write(ready[1], "r", 1);
      sleep_until_killed();
      return 0;
    }
    char byte;
    for (int i = 0; i < 2; ++i)
      if (::read(ready[0], &byte, 1) != 1) return 10;
    return 3;
  };
  LauncherProcess launcher(plan, worker);
  ::close(ready[0]);
  ::close(ready[1]);
  CHECK(launcher.finish() == 3);
  const std::string& err = launcher.err();
  INFO("stderr:\n" << err);
  CHECK(err.find("[launcher]: rank 1 exited with status 3: stopping the other workers\n") !=
        std::string::npos);
  CHECK(err.find("[launcher]: rank 2 still running 1 s after being told to stop: sending "
                 "SIGKILL\n") != std::string::npos);
  CHECK(err.find("[launcher]: failed: rank 1 exited with status 3") != std::string::npos);
  CHECK(launcher.seconds() >= 1.0);  // the grace period was given
  CHECK(launcher.seconds() < 4.0);

  // Without a worker that ignores SIGTERM, nobody waits for the grace period.
  plan.nproc = 2;
  plan.grace = 10s;
  LauncherProcess prompt(plan, [](int local_rank) {
    if (local_rank == 0) sleep_until_killed();
    return 3;
  });
  CHECK(prompt.finish() == 3);
  CHECK(prompt.seconds() < 5.0);
  CHECK(prompt.err().find("SIGKILL") == std::string::npos);
}

TEST_CASE("dist launcher: a worker killed by a signal is reported with the signal's name") {
  LaunchPlan plan;
  plan.nproc = 2;
  LauncherProcess launcher(plan, [](int local_rank) {
    if (local_rank == 0) sleep_until_killed();
    std::raise(SIGKILL);
    return 0;
  });
  CHECK(launcher.finish() == 128 + SIGKILL);
  INFO("stderr:\n" << launcher.err());
  CHECK(launcher.err().find("rank 1 was killed by signal 9 (SIGKILL): stopping the other "
                            "workers") != std::string::npos);
}

TEST_CASE("dist launcher: a worker's exception is printed and its rank fails") {
  LaunchPlan plan;
  LauncherProcess launcher(plan, [](int) -> int { throw std::runtime_error("boom"); });
  CHECK(launcher.finish() == 1);
  CHECK(launcher.err().find("[rank0]: error: boom\n") != std::string::npos);
  CHECK(launcher.err().find("[launcher]: failed: rank 0 exited with status 1") !=
        std::string::npos);
  CHECK(count_of(launcher.out(), "launch_workers returned") == 1);
}

TEST_CASE("dist launcher: SIGINT to the launcher reaches every worker") {
  LaunchPlan plan;
  plan.nproc = 2;
  LauncherProcess launcher(plan, [](int local_rank) {
    std::signal(SIGINT, [](int) {
      const char line[] = "got SIGINT\n";
      [[maybe_unused]] ssize_t written = ::write(STDOUT_FILENO, line, sizeof line - 1);
      ::_exit(0);
    });
    std::printf("ready %d\n", local_rank);
    sleep_until_killed();
    return 0;
  });
  REQUIRE(launcher.wait_for("ready", 2));
  Clock::time_point interrupted = Clock::now();
  ::kill(launcher.pid(), SIGINT);
  CHECK(launcher.finish() == 128 + SIGINT);
  CHECK(seconds_since(interrupted) < 3.0);
  INFO("stdout:\n" << launcher.out() << "\nstderr:\n" << launcher.err());
  CHECK(launcher.out().find("[rank0]: got SIGINT\n") != std::string::npos);
  CHECK(launcher.out().find("[rank1]: got SIGINT\n") != std::string::npos);
  CHECK(launcher.err().find(
            "[launcher]: received SIGINT: asked to stop, forwarding it to every worker") !=
        std::string::npos);
  CHECK(launcher.err().find("[launcher]: stopped every worker, as SIGINT asked") !=
        std::string::npos);
}

TEST_CASE("dist launcher: a worker cannot launch workers (the recursion guard)") {
  LaunchPlan plan;
  plan.nproc = 2;
  Worker nested = [plan](int) {
    try {
      launch_workers(plan, [](int) { return 0; });
    } catch (const std::runtime_error& error) {
      std::printf("refused: %s\n", error.what());
      return 0;
    }
    std::printf("a worker launched workers\n");
    return 1;
  };
  LauncherProcess launcher(plan, nested);
  CHECK(launcher.finish() == 0);
  INFO("stdout:\n" << launcher.out());
  CHECK(count_of(launcher.out(),
                 "refused: launch_workers was called inside one of its own "
                 "workers, which would fork workers recursively") == 2);
  CHECK(count_of(launcher.out(), "if __name__ == \"__main__\":") == 2);

  // The same for any process whose environment says it is a worker.
  LauncherProcess marked(plan, nested, [] { ::setenv(kSpawnedVariable, "1", 1); });
  CHECK(marked.finish() == 99);
  CHECK(marked.out().find("launch_workers threw: launch_workers was called inside one of its "
                          "own workers") != std::string::npos);
}

// The number of threads that ran chunks of one loop over `pool`, all 64 chunks covered (-1
// otherwise). Each chunk waits, a few seconds at most, until every thread of the pool has
// joined the loop, so a slow thread start (sanitizers, a busy machine) is not mistaken for a
// missing thread; the pool's threads are then all idle again when the loop returns.
int threads_joining_a_loop(ThreadPool& pool) {
  std::mutex mutex;
  std::set<std::thread::id> threads;
  std::atomic<int64_t> covered{0};
  Clock::time_point deadline = Clock::now() + 5s;
  pool.parallel_for(64, 1, [&](int64_t begin, int64_t end) {
    covered += end - begin;
    std::unique_lock<std::mutex> lock(mutex);
    threads.insert(std::this_thread::get_id());
    while (static_cast<int>(threads.size()) < pool.num_threads() && Clock::now() < deadline) {
      lock.unlock();
      std::this_thread::sleep_for(1ms);
      lock.lock();
    }
  });
  return covered.load() == 64 ? static_cast<int>(threads.size()) : -1;
}

TEST_CASE("dist launcher: the thread pool works in a child forked after the parent used it") {
  ThreadPool pool(3);
  ThreadPool idle(3);  // runs no loop in the child before it is resized
  // Every thread of both pools has started and is parked when fork() copies them (a thread
  // still starting may hold the sanitizers' allocator lock, which their fork does not reset).
  REQUIRE(threads_joining_a_loop(pool) == 3);
  REQUIRE(threads_joining_a_loop(idle) == 3);
  std::fflush(nullptr);
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    int threads = threads_joining_a_loop(pool);
    idle.resize(2);  // would join the parent's threads, which do not exist here
    // 0: every chunk, on all 3 threads; else the number of threads seen (-1: chunks missed).
    ::_exit(threads == 3 ? 0 : 10 + threads);
  }
  int status = -1;
  Clock::time_point deadline = Clock::now() + kTimeout;
  while (::waitpid(child, &status, WNOHANG) != child && Clock::now() < deadline)
    std::this_thread::sleep_for(10ms);
  if (Clock::now() >= deadline) ::kill(child, SIGKILL);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("dist launcher: a probe child computes a value without touching the parent") {
  static int touched = 0;
  pid_t parent = ::getpid();
  CHECK(run_in_probe_child([] { return ++touched + static_cast<int>(::getpid()); }, "probing",
                           kTimeout) != 1 + parent);
  CHECK(touched == 0);
  CHECK(run_in_probe_child([] { return 41 + 1; }, "probing", kTimeout) == 42);
  CHECK_THROWS_WITH_AS(run_in_probe_child([]() -> int { throw std::runtime_error("no GPU"); },
                                          "counting the GPUs", kTimeout),
                       "counting the GPUs failed: no GPU", std::runtime_error);
  CHECK_THROWS_WITH_AS(run_in_probe_child([] { return std::raise(SIGKILL); }, "probing", kTimeout),
                       doctest::Contains("probing failed: its probe process was killed by "
                                         "signal 9 (SIGKILL)"),
                       std::runtime_error);
  Clock::time_point start = Clock::now();
  CHECK_THROWS_WITH_AS(run_in_probe_child(
                           [] {
                             sleep_until_killed();
                             return 0;
                           },
                           "probing", 300ms),
                       "probing took longer than 0.3 s in a probe process: it was killed",
                       std::runtime_error);
  CHECK(seconds_since(start) < 3.0);
}

TEST_CASE(
    "dist launcher: GPUs are counted in a probe child, a parent that touched CUDA cannot "
    "fork workers") {
  int gpus = count_gpus_without_initializing();
  CHECK_FALSE(cuda::initialized());
  if (!cuda::compiled()) CHECK(gpus == 0);
  MESSAGE("GPUs counted in a probe child: " << gpus);
  if (!cuda::compiled()) return;  // without CUDA nothing can initialise it
  LauncherProcess launcher(
      LaunchPlan{}, [](int) { return 0; }, [] { cuda::device_count(); });
  if (gpus == 0) {  // no driver or no device: no CUDA state to inherit, so forking is fine
    CHECK(launcher.finish() == 0);
    return;
  }
  CHECK(launcher.finish() == 99);
  CHECK(launcher.out().find("launch_workers threw: cannot fork workers: this process has "
                            "already initialised CUDA") != std::string::npos);
  CHECK(launcher.out().find("torchrun") != std::string::npos);
}

}  // namespace
}  // namespace bareyolo::dist
