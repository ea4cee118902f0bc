// engine/distributed/launch/launcher.cpp — forking the workers and supervising them (contract:
// launcher.h).
//
// The parent's loop waits in poll() on the workers' output pipes and on a self-pipe that the
// signal handlers write (SIGCHLD: a worker ended; SIGINT/SIGTERM: stop the run), reaps only
// its own workers by pid (waitpid(pid, WNOHANG), never -1: the caller may have children of
// its own), and leaves when every worker is reaped.
#include "engine/distributed/launch/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>  // sigabbrev_np
#include <optional>
#include <random>
#include <stdexcept>
#include <string_view>
#include <thread>

#include "engine/distributed/comm/progress_board.h"
#include "engine/distributed/comm/socket.h"
#include "engine/distributed/comm/store.h"
#include "engine/distributed/launch/stall_monitor.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/devices.h"

namespace bareyolo::dist {
namespace {

using namespace std::chrono_literals;

constexpr size_t kReadBytes = 64 * 1024;
// A worker that writes this much without a newline (a progress bar redrawn with \r) still
// gets its output forwarded.
constexpr size_t kLongestLineBytes = 64 * 1024;
// After a worker fails, how long the others get to notice on their own (a lost peer fails
// their collective within moments) before SIGTERM: a worker that fails by itself says what it
// was waiting for and writes its flight record (flight_recorder.h); one killed says nothing.
constexpr auto kNoticePeriod = 2s;
// poll() wakes at least this often, so a lost wake-up costs a moment, never a hang.
constexpr auto kSupervisorTick = 500ms;
// CUDA's first call can take seconds on a machine with many GPUs.
constexpr auto kGpuProbeTimeout = 60s;

constexpr int kRelayedSignals[] = {SIGINT, SIGTERM, SIGCHLD};

// "exited with status 3", "was killed by signal 9 (SIGKILL)".
std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int signal = WTERMSIG(status);
    return "was killed by signal " + std::to_string(signal) + " (" + signal_name(signal) + ")" +
           (WCOREDUMP(status) ? ", core dumped" : "");
  }
  return "ended with wait status " + std::to_string(status);
}

bool succeeded(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

// A pipe whose ends are close-on-exec; the read end is non-blocking for the poll() loop.
std::pair<Fd, Fd> make_pipe() {
  int ends[2];
  if (::pipe2(ends, O_CLOEXEC) != 0) throw std::runtime_error(errno_message("pipe2 failed"));
  Fd read_end(ends[0]), write_end(ends[1]);
  ::fcntl(read_end.get(), F_SETFL, O_NONBLOCK);
  return {std::move(read_end), std::move(write_end)};
}

std::string random_token() {
  std::random_device entropy;
  char text[33];
  for (int i = 0; i < 4; ++i) std::snprintf(text + 8 * i, 9, "%08x", entropy());
  return text;
}

void write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    ssize_t written = ::write(fd, text.data(), text.size());
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return;
    text.remove_prefix(static_cast<size_t>(written));
  }
}

// ---- signals reaching the parent ------------------------------------------------------

std::atomic<int> g_signal_pipe_write{-1};

extern "C" void relay_signal(int signal) {
  int saved_errno = errno;
  unsigned char byte = static_cast<unsigned char>(signal);
  [[maybe_unused]] ssize_t ignored = ::write(g_signal_pipe_write.load(), &byte, 1);
  errno = saved_errno;
}

// While alive, SIGINT, SIGTERM and SIGCHLD become bytes on a pipe the supervisor polls; the
// caller's handlers come back on destruction. One launch per process at a time.
class SignalRelay {
 public:
  SignalRelay() {
    auto [read_end, write_end] = make_pipe();
    ::fcntl(write_end.get(), F_SETFL, O_NONBLOCK);  // a full pipe drops bytes, never blocks
    int expected = -1;
    if (!g_signal_pipe_write.compare_exchange_strong(expected, write_end.get()))
      throw std::runtime_error("launch_workers is already running in this process");
    read_ = std::move(read_end);
    write_ = std::move(write_end);
    struct sigaction action {};
    action.sa_handler = relay_signal;
    action.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigemptyset(&action.sa_mask);
    for (size_t i = 0; i < std::size(kRelayedSignals); ++i)
      ::sigaction(kRelayedSignals[i], &action, &previous_[i]);
  }
  ~SignalRelay() {
    for (size_t i = 0; i < std::size(kRelayedSignals); ++i)
      ::sigaction(kRelayedSignals[i], &previous_[i], nullptr);
    g_signal_pipe_write.store(-1);
  }
  SignalRelay(const SignalRelay&) = delete;
  SignalRelay& operator=(const SignalRelay&) = delete;

  int read_fd() const { return read_.get(); }
  int write_fd() const { return write_.get(); }

  // The signals received since the last call.
  std::vector<int> take() {
    std::vector<int> signals;
    unsigned char bytes[64];
    ssize_t count;
    while ((count = ::read(read_.get(), bytes, sizeof bytes)) > 0)
      signals.insert(signals.end(), bytes, bytes + count);
    return signals;
  }

  // In a worker: what exec() would leave — the caller's ignored signals stay ignored, every
  // handler (the relay's, a test framework's) becomes the default action.
  void reset_in_child() const {
    for (size_t i = 0; i < std::size(kRelayedSignals); ++i) {
      bool ignored = previous_[i].sa_handler == SIG_IGN;
      ::signal(kRelayedSignals[i], ignored ? SIG_IGN : SIG_DFL);
    }
  }

 private:
  Fd read_, write_;
  struct sigaction previous_[std::size(kRelayedSignals)]{};
};

// Blocks SIGINT and SIGTERM in the forking thread while the workers are forked, so that a
// child cannot run the relay's handler before it resets its signals.
class SignalsBlockedWhileForking {
 public:
  SignalsBlockedWhileForking() {
    sigset_t blocked;
    sigemptyset(&blocked);
    sigaddset(&blocked, SIGINT);
    sigaddset(&blocked, SIGTERM);
    ::pthread_sigmask(SIG_BLOCK, &blocked, &original_);
  }
  ~SignalsBlockedWhileForking() { restore(); }
  void restore() const { ::pthread_sigmask(SIG_SETMASK, &original_, nullptr); }

 private:
  sigset_t original_;
};

// ---- output forwarding -----------------------------------------------------------------

// One worker stream (its stdout or stderr) copied line by line to the parent's, prefixed.
class LineForwarder {
 public:
  LineForwarder(Fd pipe, FILE* sink, std::string prefix)
      : pipe_(std::move(pipe)), sink_(sink), prefix_(std::move(prefix)) {}

  int fd() const { return pipe_.get(); }
  bool open() const { return static_cast<bool>(pipe_); }

  // Reads once; returns false when nothing more is there for now (or ever: then closed).
  bool read_available() {
    char bytes[kReadBytes];
    ssize_t count = ::read(pipe_.get(), bytes, sizeof bytes);
    if (count < 0 && errno == EINTR) return true;
    if (count < 0 && errno == EAGAIN) return false;
    if (count <= 0) {  // end of the stream (or a broken pipe): the last partial line too
      if (!pending_.empty()) emit(pending_);
      pending_.clear();
      pipe_.reset();
      return false;
    }
    pending_.append(bytes, static_cast<size_t>(count));
    size_t start = 0, newline;
    while ((newline = pending_.find('\n', start)) != std::string::npos) {
      emit(std::string_view(pending_).substr(start, newline - start));
      start = newline + 1;
    }
    pending_.erase(0, start);
    if (pending_.size() >= kLongestLineBytes) {
      emit(pending_);
      pending_.clear();
    }
    return true;
  }

  // Forwards what is left without waiting for the end of the stream: a grandchild of the
  // worker may hold the pipe open long after the worker is gone.
  void finish() {
    while (open() && read_available()) {
    }
    if (!pending_.empty()) emit(pending_);
    pending_.clear();
    pipe_.reset();
  }

 private:
  void emit(std::string_view line) {
    std::string text = prefix_;
    text.append(line).push_back('\n');
    std::fwrite(text.data(), 1, text.size(), sink_);
    std::fflush(sink_);
  }

  Fd pipe_;
  FILE* sink_;
  std::string prefix_;
  std::string pending_;
};

// ---- the worker's side of fork() -------------------------------------------------------

// One core count for all the workers of this node, unless the user set BAREYOLO_THREADS:
// N workers each starting a thread per core would oversubscribe the machine N times.
// And, when the workers' threads fit the cores this process may use, each worker is bound to
// its own share of them (local rank r: the r-th block of `threads` cores): a rank's threads
// (compute, pool, communicator) then never land on another rank's core. Unbound, with one
// rank per core, a rank woken from a collective was often placed on the core where the other
// rank was computing and waited there for a time slice: SyncBN's 114 collectives a step then
// cost yolov5n@320 2 ranks x 8 images ~17-21% of its throughput (build/bench_train's
// ddp2_scaling with this function's binding left out, commit da8994d).
void share_cores_among_workers(int workers_on_node, int local_rank) {
  cpu_set_t allowed;
  std::vector<int> cores;  // the cores this process may run on
  if (::sched_getaffinity(0, sizeof allowed, &allowed) == 0)
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
      if (CPU_ISSET(cpu, &allowed)) cores.push_back(cpu);
  const bool threads_set_by_user = std::getenv("BAREYOLO_THREADS") != nullptr;
  const int available =
      cores.empty() ? static_cast<int>(std::thread::hardware_concurrency()) : int(cores.size());
  const int threads = threads_set_by_user ? ThreadPool::global().num_threads()
                                          : std::max(1, available / workers_on_node);
  if (int(cores.size()) >= workers_on_node * threads) {
    cpu_set_t own;
    CPU_ZERO(&own);
    for (int t = 0; t < threads; ++t) CPU_SET(cores[size_t(local_rank * threads + t)], &own);
    ::sched_setaffinity(0, sizeof own, &own);  // refused: the worker stays unbound
  }
  if (threads_set_by_user) return;
  ::setenv("BAREYOLO_THREADS", std::to_string(threads).c_str(), 1);
  ThreadPool::global().resize(threads);  // after binding: the pool's threads inherit it
}

struct WorkerSetup {
  const LaunchPlan& plan;
  int local_rank;
  EnvMap environment;
  int stdout_fd, stderr_fd;
  int store_fd;                 // -1 except in global rank 0
  std::vector<int> parent_fds;  // the parent's pipe ends: closed in the worker
  pid_t parent;
  ProgressBoard* board;  // shared with the parent: this worker's heartbeat goes there
};

[[noreturn]] void become_worker(const WorkerSetup& setup, const SignalRelay& relay,
                                const SignalsBlockedWhileForking& blocked,
                                const std::function<int(int)>& worker) {
  relay.reset_in_child();
  // A worker must not outlive its supervisor (killed with SIGKILL, it cannot stop them).
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (::getppid() != setup.parent) ::_exit(1);  // the parent died before prctl
  blocked.restore();
  ::dup2(setup.stdout_fd, STDOUT_FILENO);
  ::dup2(setup.stderr_fd, STDERR_FILENO);
  for (int fd : setup.parent_fds) ::close(fd);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines reach the parent as they are printed
  int code = 1;
  try {  // nothing may escape into the caller's code: even bad_alloc ends here
    for (const auto& [name, value] : setup.environment) ::setenv(name.c_str(), value.c_str(), 1);
    if (setup.store_fd >= 0) {
      ::fcntl(setup.store_fd, F_SETFD, 0);  // kept open also if the worker exec()s bareyolo
      ::setenv(kStoreFdVariable, std::to_string(setup.store_fd).c_str(), 1);
    }
    share_cores_among_workers(setup.plan.nproc, setup.local_rank);
    const int rank = setup.plan.global_rank(setup.local_rank);
    set_inherited_progress_board(setup.board, rank);
    const Heartbeat heartbeat(*setup.board, rank);
    int result = worker(setup.local_rank);
    code = result >= 0 && result <= 255 ? result : 1;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "error: %s\n", error.what());
  } catch (...) {
    std::fprintf(stderr, "error: a worker threw an exception that is not a std::exception\n");
  }
  std::fflush(nullptr);
  ::_exit(code);  // never back into the caller's code, nor its atexit handlers
}

// ---- the parent's side -----------------------------------------------------------------

struct Worker {
  int local_rank;
  int rank;
  std::string name;  // "rank 1" or "rank 1 (cuda:1)"
  pid_t pid;
  std::optional<int> wait_status;  // set once reaped
  LineForwarder out, err;
  std::string stall;  // why the supervisor killed it, when it found it stalled
};

class Supervisor {
 public:
  Supervisor(const LaunchPlan& plan, SignalRelay& relay)
      : plan_(plan),
        relay_(relay),
        board_(make_shared_progress_board(plan.global_rank(0), plan.nproc)),
        stalls_(plan.stall_timeout) {}
  // On an exception before run() finished: no worker may outlive the launcher.
  ~Supervisor() {
    for (Worker& worker : workers_) {
      if (worker.wait_status) continue;
      ::kill(worker.pid, SIGKILL);
      ::waitpid(worker.pid, nullptr, 0);
    }
  }

  void fork_worker(int local_rank, const EnvMap& environment, int store_fd,
                   const SignalsBlockedWhileForking& blocked,
                   const std::function<int(int)>& worker) {
    auto [out_read, out_write] = make_pipe();
    auto [err_read, err_write] = make_pipe();
    WorkerSetup setup{plan_,
                      local_rank,
                      environment,
                      out_write.get(),
                      err_write.get(),
                      store_fd,
                      {relay_.read_fd(), relay_.write_fd(), out_read.get(), err_read.get(),
                       out_write.get(), err_write.get()},
                      ::getpid(),
                      board_.get()};
    for (const Worker& other : workers_) {
      if (other.out.open()) setup.parent_fds.push_back(other.out.fd());
      if (other.err.open()) setup.parent_fds.push_back(other.err.fd());
    }
    pid_t pid = ::fork();
    if (pid < 0)
      throw std::runtime_error(
          errno_message("cannot fork the worker of local rank " + std::to_string(local_rank)));
    if (pid == 0) become_worker(setup, relay_, blocked, worker);
    int rank = plan_.global_rank(local_rank);
    std::string name = "rank " + std::to_string(rank);
    if (!plan_.cuda_indices.empty())
      name += " (cuda:" + std::to_string(plan_.cuda_indices[local_rank]) + ")";
    std::string prefix = "[rank" + std::to_string(rank) + "]: ";
    workers_.push_back(Worker{local_rank, rank, name, pid, std::nullopt,
                              LineForwarder(std::move(out_read), stdout, prefix),
                              LineForwarder(std::move(err_read), stderr, prefix), ""});
  }

  // Runs until every worker is reaped; returns the launch's exit code.
  int run(LaunchEnd* end) {
    while (std::any_of(workers_.begin(), workers_.end(),
                       [](const Worker& worker) { return !worker.wait_status; })) {
      wait_for_events();
      for (int signal : relay_.take())
        if (signal == SIGINT || signal == SIGTERM) forward_interrupt(signal);
      for (Worker& worker : workers_) {
        if (worker.out.open()) worker.out.read_available();
        if (worker.err.open()) worker.err.read_available();
      }
      reap();
      if (!stop_deadline_) kill_stalled();
      if (terminate_at_ && Clock::now() >= *terminate_at_) {
        terminate_at_.reset();
        signal_running(SIGTERM);
      }
      if (stop_deadline_ && !killed_ && Clock::now() >= *stop_deadline_) kill_the_rest();
    }
    for (Worker& worker : workers_) {
      worker.out.finish();
      worker.err.finish();
    }
    return report(end);
  }

 private:
  void wait_for_events() {
    std::vector<pollfd> watched{{relay_.read_fd(), POLLIN, 0}};
    for (const Worker& worker : workers_) {
      if (worker.out.open()) watched.push_back({worker.out.fd(), POLLIN, 0});
      if (worker.err.open()) watched.push_back({worker.err.fd(), POLLIN, 0});
    }
    auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(kSupervisorTick);
    for (const std::optional<Clock::time_point>& moment :
         {terminate_at_, killed_ ? std::nullopt : stop_deadline_}) {
      if (!moment) continue;
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*moment - Clock::now());
      wait = std::clamp(left + 1ms, 0ms, wait);
    }
    ::poll(watched.data(), watched.size(), static_cast<int>(wait.count()));
  }

  void reap() {
    // Of the failures reaped together, a worker killed by a signal is the cause: its peers
    // exit with an error only once they notice it is gone.
    Worker* failed = nullptr;
    for (Worker& worker : workers_) {
      int status = 0;
      if (worker.wait_status || ::waitpid(worker.pid, &status, WNOHANG) != worker.pid) continue;
      worker.wait_status = status;
      if (succeeded(status) || stop_deadline_) continue;  // a failure after the stop is its echo
      if (!failed || (WIFSIGNALED(status) && !WIFSIGNALED(*failed->wait_status))) failed = &worker;
    }
    if (!failed) return;
    first_failure_ = failed;
    say(describe(*failed) + ": stopping the other workers");
    terminate_at_ = Clock::now() + kNoticePeriod;
    stop_deadline_ = *terminate_at_ + plan_.grace;
  }

  // A worker that made no progress for plan.stall_timeout (stall_monitor.h) gets SIGKILL — a
  // stopped process cannot act on SIGTERM — and its death then stops the run like any failure.
  void kill_stalled() {
    if (plan_.stall_timeout.count() <= 0) return;
    stalls_.observe(board_->read(), Clock::now());
    for (const Stall& stall : stalls_.stalled()) {
      for (Worker& worker : workers_) {
        if (worker.rank != stall.rank || worker.wait_status || !worker.stall.empty()) continue;
        worker.stall = stall.message();
        say(worker.stall + ": sending it SIGKILL (--stall-timeout " +
            seconds_text(plan_.stall_timeout) + ")");
        ::kill(worker.pid, SIGKILL);
      }
    }
  }

  void forward_interrupt(int signal) {
    if (!interrupted_by_) interrupted_by_ = signal;
    say("received " + signal_name(signal) + ": asked to stop, forwarding it to every worker");
    signal_running(signal);
    if (!stop_deadline_) stop_deadline_ = Clock::now() + plan_.grace;
  }

  void kill_the_rest() {
    killed_ = true;
    std::string names;
    for (const Worker& worker : workers_)
      if (!worker.wait_status) names += (names.empty() ? "" : ", ") + worker.name;
    if (names.empty()) return;
    say(names + " still running " + seconds_text(plan_.grace) +
        " after being told to stop: " + "sending SIGKILL");
    signal_running(SIGKILL);
  }

  void signal_running(int signal) {
    for (const Worker& worker : workers_)
      if (!worker.wait_status) ::kill(worker.pid, signal);
  }

  int report(LaunchEnd* end) {
    if (end) end->interrupted_by = interrupted_by_.value_or(0);
    if (first_failure_) {
      int status = *first_failure_->wait_status;
      const std::string failure = describe(*first_failure_);
      if (end) end->failure = failure;
      say("failed: " + failure + " (the first worker to fail)");
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    if (interrupted_by_) {
      say("stopped every worker, as " + signal_name(*interrupted_by_) + " asked");
      return 128 + *interrupted_by_;
    }
    return 0;
  }

  // "rank 1 was killed by signal 9 (SIGKILL)"; a stalled worker is named by its stall.
  static std::string describe(const Worker& worker) {
    if (!worker.stall.empty()) return worker.stall + "; the launcher killed it";
    return worker.name + " " + describe_wait_status(*worker.wait_status);
  }

  static void say(const std::string& line) {
    std::fprintf(stderr, "[launcher]: %s\n", line.c_str());
    std::fflush(stderr);
  }

  const LaunchPlan& plan_;
  SignalRelay& relay_;
  std::vector<Worker> workers_;
  std::unique_ptr<ProgressBoard> board_;  // the workers' heartbeats (progress_board.h)
  StallMonitor stalls_;
  const Worker* first_failure_ = nullptr;
  std::optional<int> interrupted_by_;
  std::optional<Clock::time_point> terminate_at_;   // SIGTERM for whoever is left by then
  std::optional<Clock::time_point> stop_deadline_;  // SIGKILL for whoever is left by then
  bool killed_ = false;
};

void refuse_unsafe_fork() {
  LaunchEnv environment = read_launch_env(process_environment());
  try {
    environment.refuse_nested_spawn();
  } catch (const std::runtime_error& error) {
    throw std::runtime_error(
        std::string("launch_workers was called inside one of its own workers, which would fork "
                    "workers recursively: ") +
        error.what() +
        ". The code that launches workers must not run again in a worker (bareyolo's "
        "counterpart of Python's `if __name__ == \"__main__\":` guard).");
  }
  if (cuda_initialized()) {
    throw std::runtime_error(
        "cannot fork workers: this process has already initialised CUDA, and a forked child "
        "cannot use the CUDA state it inherits. Start the workers before anything touches the "
        "GPU — run `bareyolo train --device 0,1 ...`, which forks them first — or start one "
        "process per GPU with torchrun (`torchrun --nproc-per-node 2 bareyolo train ...`).");
  }
}

std::string field_text(const char* field, long long value) {
  return std::string(field) + "=" + std::to_string(value);
}

}  // namespace

std::string signal_name(int signal) {
  const char* abbreviation = ::sigabbrev_np(signal);
  return abbreviation ? std::string("SIG") + abbreviation : "signal " + std::to_string(signal);
}

void LaunchPlan::validate() const {
  auto fail = [](const std::string& sentence) { throw std::runtime_error(sentence); };
  if (nproc < 1) fail(field_text("nproc", nproc) + ": a node runs at least one worker");
  if (nnodes < 1) fail(field_text("nnodes", nnodes) + ": a run has at least one node");
  if (node_rank < 0 || node_rank >= nnodes)
    fail(field_text("node_rank", node_rank) + " must be in [0, " + field_text("nnodes", nnodes) +
         ") (nodes count from 0)");
  if (master_port < 0 || master_port > 65535)
    fail(field_text("master_port", master_port) +
         " is not a TCP port (1..65535, or 0 to pick one)");
  if (master_addr.empty()) fail("master_addr is empty: give global rank 0's host name or address");
  if (nnodes > 1 && master_port == 0)
    fail(field_text("nnodes", nnodes) + " needs master_port: give every node the same free port");
  if (nnodes > 1 && store_token.empty())
    fail(field_text("nnodes", nnodes) +
         " needs a store token: give every node the same secret (BAREYOLO_STORE_TOKEN)");
  if (!cuda_indices.empty() && static_cast<int>(cuda_indices.size()) != nproc)
    fail(std::to_string(cuda_indices.size()) + " CUDA devices for " + field_text("nproc", nproc) +
         " workers: give one device per worker, or none for CPU workers");
  for (int index : cuda_indices)
    if (index < 0) fail("CUDA device index " + std::to_string(index) + " is negative");
  if (grace < 0ms) fail("grace=" + seconds_text(grace) + " is negative");
}

EnvMap worker_environment(const LaunchPlan& plan, int local_rank, int master_port,
                          const std::string& store_token) {
  return {{"RANK", std::to_string(plan.global_rank(local_rank))},
          {"LOCAL_RANK", std::to_string(local_rank)},
          {"WORLD_SIZE", std::to_string(plan.world_size())},
          {"LOCAL_WORLD_SIZE", std::to_string(plan.nproc)},
          {"MASTER_ADDR", plan.master_addr},
          {"MASTER_PORT", std::to_string(master_port)},
          {kSpawnedVariable, "1"},
          {kStoreTokenVariable, store_token}};
}

int launch_workers(const LaunchPlan& plan, const std::function<int(int local_rank)>& worker,
                   LaunchEnd* end) {
  plan.validate();
  refuse_unsafe_fork();
  // Node 0 binds the store's port now and hands the socket to rank 0 (see launcher.h).
  Fd store_socket;
  int master_port = plan.master_port;
  if (plan.node_rank == 0) {
    store_socket = listen_tcp(store_bind_host(plan.master_addr), plan.master_port);
    master_port = bound_port(store_socket.get());
  }
  const std::string token = plan.store_token.empty() ? random_token() : plan.store_token;

  SignalRelay relay;
  Supervisor supervisor(plan, relay);
  std::fflush(nullptr);  // or the workers would print the parent's buffered output again
  {
    SignalsBlockedWhileForking blocked;
    for (int local_rank = 0; local_rank < plan.nproc; ++local_rank) {
      supervisor.fork_worker(local_rank, worker_environment(plan, local_rank, master_port, token),
                             store_socket.get(), blocked, worker);
      store_socket.reset();  // rank 0 holds it now; later workers never see it
    }
  }
  return supervisor.run(end);
}

int run_in_probe_child(const std::function<int()>& probe, const std::string& what,
                       std::chrono::milliseconds timeout) {
  auto [read_end, write_end] = make_pipe();
  std::fflush(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(errno_message("cannot fork a process for " + what));
  if (pid == 0) {
    std::string reply;
    try {
      reply = "ok " + std::to_string(probe());
    } catch (const std::exception& error) {
      reply = std::string("error ") + error.what();
    } catch (...) {
      reply = "error an exception that is not a std::exception";
    }
    write_all(write_end.get(), reply);
    ::_exit(0);
  }
  write_end.reset();
  std::string reply;
  Clock::time_point deadline = Clock::now() + timeout;
  for (char bytes[4096];;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    pollfd entry{read_end.get(), POLLIN, 0};
    if (left <= 0ms || ::poll(&entry, 1, static_cast<int>(left.count()) + 1) == 0) {
      if (Clock::now() < deadline) continue;
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      throw std::runtime_error(what + " took longer than " + seconds_text(timeout) +
                               " in a probe process: it was killed");
    }
    ssize_t count = ::read(read_end.get(), bytes, sizeof bytes);
    if (count == 0) break;
    if (count > 0) reply.append(bytes, static_cast<size_t>(count));
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (reply.starts_with("ok ")) return std::stoi(reply.substr(3));
  if (reply.starts_with("error ")) throw std::runtime_error(what + " failed: " + reply.substr(6));
  throw std::runtime_error(what + " failed: its probe process " + describe_wait_status(status));
}

int count_gpus_without_initializing() {
  if (!cuda_compiled()) return 0;
  if (cuda_initialized()) return usable_gpu_count();  // nothing left to protect
  return run_in_probe_child([] { return usable_gpu_count(); }, "counting the GPUs",
                            kGpuProbeTimeout);
}

}  // namespace bareyolo::dist
