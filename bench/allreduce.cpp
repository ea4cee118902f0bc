// bench/allreduce.cpp — bench_allreduce: the float32 allreduce (avg) of the TCP ring (on loopback)
// and of the shm communicator between 2 ranks of this host, sizes 4 KB .. 64 MB, beside memcpy's
// bandwidth measured in the same run and, when Python with torch is installed,
// torch.distributed's gloo all_reduce on the same sizes (bench/gloo_allreduce.py, run after
// ours, in the same run).
//
// Bus bandwidth = bytes x 2(N-1)/N / time: the bytes each rank sends (and receives) in a ring
// allreduce, per second — comparable across N and with the link's own rate. For 2 ranks on
// loopback every byte also costs the kernel a copy on each side, so memcpy's rate is the
// ceiling to keep in mind.
//
// Beside each backend's time per 64 MB call, the CPU time rank 0's process spent on it (all its
// threads, spinning included): on a loaded machine the wall time also counts the waits for a
// descheduled peer, the CPU time is what the backend costs.
//
// Then a gradient bucket of 8 MB (yolov5n's gradients are 7.1 MB) as the reducer sends it
// over the TCP ring: in f32, and as bf16 buckets (--grad-dtype bf16) including the two
// conversions each way. The last line is machine-readable (x: the TCP ring, s: shm):
//   RESULT busbw_64MB_GBps=<x> memcpy_GBps=<m> gloo_busbw_64MB_GBps=<g> ratio_vs_gloo=<x/g>
//          bf16_bucket_speedup=<f32 time / bf16 time> shm_busbw_64MB_GBps=<s>
//          shm_ratio_vs_gloo=<s/g> shm_fraction_of_memcpy=<s/m>
//          tcp_4KB_us=<t> shm_4KB_us=<u> gloo_4KB_us=<v> shm_4KB_speedup_vs_gloo=<v/u>
//          tcp_cpu_ms_64MB=<c> shm_cpu_ms_64MB=<d>
// (gloo's figures and the ratios to them are nan without torch).
//
//   bench_allreduce            every size, ours and gloo taking turns twice (about a minute)
//   bench_allreduce --quick    4 KB, 1 MB and 64 MB, a few calls each, no gloo (a second)
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "bench/python_peer.h"                        // defines: bench::find_python_running
#include "engine/distributed/comm/socket.h"           // defines: listen_tcp, bound_port
#include "engine/distributed/launch/process_group.h"  // defines: init_process_group, ProcessGroup
#include "engine/shipped_files.h"                     // defines: shipped_file
#include "kernels/ops.h"                              // defines: convert_to_bf16, convert_from_bf16

namespace {

using namespace bareyolo;
using namespace bareyolo::dist;
using Clock = std::chrono::steady_clock;

constexpr int kWorld = 2;
constexpr int64_t kHeadlineBytes = int64_t{64} << 20;
// Timing on a shared machine: each size is timed in kSamples samples and the best one counts;
// ours and gloo take turns for `rounds` rounds and each keeps its best round, so a burst of
// load from other processes does not decide the ratio.
constexpr int kSamples = 3;
constexpr int64_t kBucketBytes = int64_t{8} << 20;  // of f32 gradients

struct Plan {
  std::vector<int64_t> sizes;  // bytes
  double seconds_per_size;
  bool with_gloo;
  int rounds;
};

Plan plan_for(bool quick) {
  if (quick) return {{4 << 10, 1 << 20, kHeadlineBytes}, 0.0, false, 1};
  Plan plan{{}, 0.3, true, 2};
  for (int64_t bytes = 4 << 10; bytes <= kHeadlineBytes; bytes *= 2) plan.sizes.push_back(bytes);
  return plan;
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// CPU seconds this process has used, all threads.
double process_cpu_seconds() {
  timespec used{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &used);
  return double(used.tv_sec) + double(used.tv_nsec) * 1e-9;
}

// memcpy between two 64 MB buffers (already touched), best of a few: bytes copied per second.
double memcpy_gbps() {
  std::vector<char> from(size_t(kHeadlineBytes), 1), to(size_t(kHeadlineBytes), 0);
  double best = 1e30;
  for (int round = 0; round < 5; ++round) {
    auto start = Clock::now();
    std::memcpy(to.data(), from.data(), from.size());
    best = std::min(best, seconds_since(start));
  }
  return double(kHeadlineBytes) / best / 1e9;
}

// A warm-up call, then kSamples timed samples of back-to-back calls: the best sample's time
// per call. Every rank makes the same number of calls (rank 0 decides and broadcasts it), as
// collectives must be issued alike.
template <class Call>
double seconds_per_call(Communicator& comm, const Plan& plan, Call call) {
  call();
  auto start = Clock::now();
  call();
  const double per_sample = std::max(plan.seconds_per_size, 0.05) / kSamples;
  int64_t calls = std::clamp<int64_t>(int64_t(per_sample / seconds_since(start)), 1, 1000);
  comm.broadcast(CommBuffer::of(&calls, 1), 0)->wait();
  double best = 1e30;
  for (int sample = 0; sample < kSamples; ++sample) {
    comm.barrier()->wait();
    start = Clock::now();
    for (int64_t i = 0; i < calls; ++i) call();
    best = std::min(best, seconds_since(start) / double(calls));
  }
  return best;
}

// One rank: every size in f32 (the 64 MB one also in CPU time), then (`with_bucket`) the 8 MB
// bucket in f32 and as a bf16 bucket; rank 0 writes "f32|cpu|bf16 bytes seconds" lines to
// `report_fd`.
void run_rank(ProcessGroup& group, const Plan& plan, bool with_bucket, int report_fd) {
  Communicator& comm = *group.comm;
  auto report = [&](const char* wire, int64_t bytes, double seconds) {
    if (group.rank() == 0) dprintf(report_fd, "%s %lld %.9f\n", wire, (long long)bytes, seconds);
  };
  std::vector<int64_t> sizes = plan.sizes;
  if (with_bucket && std::find(sizes.begin(), sizes.end(), kBucketBytes) == sizes.end())
    sizes.push_back(kBucketBytes);
  for (int64_t bytes : sizes) {
    std::vector<float> values(size_t(bytes / 4), 1.0f);
    const CommBuffer buffer = CommBuffer::of(values.data(), int64_t(values.size()));
    auto call = [&] { comm.allreduce(buffer, ReduceOp::avg)->wait(); };
    report("f32", bytes, seconds_per_call(comm, plan, call));
    if (bytes != kHeadlineBytes) continue;
    constexpr int kCpuCalls = 5;
    comm.barrier()->wait();
    const double cpu_before = process_cpu_seconds();
    for (int i = 0; i < kCpuCalls; ++i) call();
    report("cpu", bytes, (process_cpu_seconds() - cpu_before) / kCpuCalls);
  }
  if (!with_bucket) return;
  // The reducer's bf16 bucket: round into the bf16 copy, sum it, widen the mean back.
  std::vector<float> gradients(size_t(kBucketBytes / 4), 0.5f);
  std::vector<bf16> wire(gradients.size());
  const View<float> wide = flat_view(gradients.data(), int64_t(gradients.size()));
  const View<bf16> narrow = flat_view(wire.data(), int64_t(wire.size()));
  report("bf16", kBucketBytes, seconds_per_call(comm, plan, [&] {
           ops::convert_to_bf16(wide, narrow);
           comm.allreduce(CommBuffer::of(wire.data(), int64_t(wire.size())), ReduceOp::sum)->wait();
           ops::convert_from_bf16(narrow, wide, float(comm.world_size()));
         }));
}

struct Timings {
  std::map<int64_t, double> f32;       // seconds per call by bytes
  double cpu_headline = std::nan("");  // CPU seconds of rank 0's process per 64 MB call
  double bf16_bucket = std::nan("");
};

// Forks the ranks of `backend` (rank 0 serves the store on a socket bound here, as the launcher
// does) and returns rank 0's timings; exits on a failed rank.
Timings run_ours(const Plan& plan, Backend backend) {
  Fd store_socket = listen_tcp("127.0.0.1", 0);
  const int port = bound_port(store_socket.get());
  int report[2];
  if (::pipe(report) != 0) std::exit(1);
  std::vector<pid_t> pids;
  std::fflush(stdout);
  for (int rank = 0; rank < kWorld; ++rank) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(report[0]);
      if (rank == 0) ::setenv(kStoreFdVariable, std::to_string(store_socket.get()).c_str(), 1);
      int status = 0;
      try {
        LaunchEnv env;
        env.launcher = Launcher::manual;
        env.rank = env.local_rank = rank;
        env.world_size = env.local_world_size = kWorld;
        env.master_port = port;
        env.store_token = "bench-allreduce";
        ProcessGroup group = init_process_group(env, {.backend = backend});
        run_rank(group, plan, /*with_bucket=*/backend == Backend::tcp, report[1]);
      } catch (const std::exception& error) {
        std::fprintf(stderr, "bench_allreduce rank %d: %s\n", rank, error.what());
        status = 1;
      }
      ::_exit(status);
    }
    pids.push_back(pid);
  }
  store_socket.reset();
  ::close(report[1]);

  std::string lines;
  char chunk[4096];
  ssize_t got;
  while ((got = ::read(report[0], chunk, sizeof chunk)) > 0) lines.append(chunk, size_t(got));
  ::close(report[0]);
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::fprintf(stderr, "bench_allreduce: a rank failed (status %d)\n", status);
      std::exit(1);
    }
  }
  Timings timings;
  char wire[8];
  long long bytes;
  double value;
  for (const char* line = lines.c_str();
       std::sscanf(line, "%7s %lld %lf", wire, &bytes, &value) == 3;) {
    if (std::strcmp(wire, "f32") == 0)
      timings.f32[bytes] = value;
    else if (std::strcmp(wire, "cpu") == 0)
      timings.cpu_headline = value;
    else
      timings.bf16_bucket = value;
    line = std::strchr(line, '\n');
    if (!line) break;
    ++line;
  }
  return timings;
}

// gloo's seconds per call by size, from bench/gloo_allreduce.py; empty without torch.
std::map<int64_t, double> run_gloo(const Plan& plan) {
  std::map<int64_t, double> seconds;
  const std::string python =
      bench::find_python_running("import torch.distributed as d; assert d.is_available()");
  if (python.empty()) {
    std::printf("gloo: no Python with torch.distributed found: its columns are nan\n");
    return seconds;
  }
  int port;
  {
    Fd probe = listen_tcp("127.0.0.1", 0);
    port = bound_port(probe.get());
  }
  std::string sizes;
  for (int64_t bytes : plan.sizes) sizes += (sizes.empty() ? "" : ",") + std::to_string(bytes);
  const std::string command = python + " -I " + shipped_file("bench/gloo_allreduce.py") +
                              " --port " + std::to_string(port) + " --sizes " + sizes +
                              " --seconds-per-size " + std::to_string(plan.seconds_per_size);
  std::fflush(stdout);
  FILE* output = ::popen(command.c_str(), "r");
  if (!output) return seconds;
  char line[256];
  long long bytes;
  double value;
  while (std::fgets(line, sizeof line, output)) {
    if (std::sscanf(line, "gloo bytes=%lld seconds=%lf", &bytes, &value) == 2)
      seconds[bytes] = value;
  }
  if (::pclose(output) != 0)
    std::printf("gloo: %s failed; its columns are partial\n", command.c_str());
  return seconds;
}

double bus_gbps(int64_t bytes, double seconds) {
  return double(bytes) * 2.0 * (kWorld - 1) / kWorld / seconds / 1e9;
}

double lookup_busbw(const std::map<int64_t, double>& seconds, int64_t bytes) {
  auto found = seconds.find(bytes);
  return found == seconds.end() ? std::nan("") : bus_gbps(bytes, found->second);
}

// A size's time in microseconds, nan when it was not measured.
double micros(const std::map<int64_t, double>& seconds, int64_t bytes) {
  auto found = seconds.find(bytes);
  return found == seconds.end() ? std::nan("") : found->second * 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const Plan plan = plan_for(quick);
  const double memcpy_rate = memcpy_gbps();
  std::printf(
      "float32 allreduce (avg) between %d ranks: TCP ring on loopback, shm; memcpy %.2f GB/s\n",
      kWorld, memcpy_rate);
  std::map<int64_t, double> tcp, shm, gloo;
  double bf16_bucket = 1e30, tcp_cpu = 1e30, shm_cpu = 1e30;
  auto keep_best = [](std::map<int64_t, double>& best, const std::map<int64_t, double>& round) {
    for (const auto& [bytes, seconds] : round)
      best[bytes] = best.count(bytes) ? std::min(best[bytes], seconds) : seconds;
  };
  for (int round = 0; round < plan.rounds; ++round) {
    const Timings timings = run_ours(plan, Backend::tcp);
    keep_best(tcp, timings.f32);
    bf16_bucket = std::min(bf16_bucket, timings.bf16_bucket);
    tcp_cpu = std::min(tcp_cpu, timings.cpu_headline);
    const Timings shm_timings = run_ours(plan, Backend::shm);
    keep_best(shm, shm_timings.f32);
    shm_cpu = std::min(shm_cpu, shm_timings.cpu_headline);
    if (plan.with_gloo) keep_best(gloo, run_gloo(plan));
  }

  std::printf("%10s %10s %11s %10s %11s %10s %11s %9s %9s\n", "bytes", "tcp_us", "tcp_GBps",
              "shm_us", "shm_GBps", "gloo_us", "gloo_GBps", "tcp/gloo", "shm/gloo");
  for (int64_t bytes : plan.sizes) {
    const double tcp_bw = lookup_busbw(tcp, bytes), shm_bw = lookup_busbw(shm, bytes),
                 gloo_bw = lookup_busbw(gloo, bytes);
    std::printf("%10lld %10.1f %11.3f %10.1f %11.3f %10.1f %11.3f %9.2f %9.2f\n", (long long)bytes,
                micros(tcp, bytes), tcp_bw, micros(shm, bytes), shm_bw, micros(gloo, bytes),
                gloo_bw, tcp_bw / gloo_bw, shm_bw / gloo_bw);
  }
  std::printf("64 MB: CPU time of rank 0's process per call: TCP ring %.1f ms, shm %.1f ms\n",
              tcp_cpu * 1e3, shm_cpu * 1e3);
  const double f32_bucket = tcp.at(kBucketBytes);
  std::printf(
      "8 MB gradient bucket (TCP ring): f32 %.1f us; bf16 bucket (rounded, all-reduced, widened "
      "back) %.1f us: %.2fx\n",
      f32_bucket * 1e6, bf16_bucket * 1e6, f32_bucket / bf16_bucket);
  const double headline = lookup_busbw(tcp, kHeadlineBytes);
  const double shm_headline = lookup_busbw(shm, kHeadlineBytes);
  const double gloo_headline = lookup_busbw(gloo, kHeadlineBytes);
  constexpr int64_t kLatencyBytes = 4 << 10;
  std::printf(
      "RESULT busbw_64MB_GBps=%.3f memcpy_GBps=%.2f gloo_busbw_64MB_GBps=%.3f "
      "ratio_vs_gloo=%.2f bf16_bucket_speedup=%.2f shm_busbw_64MB_GBps=%.3f "
      "shm_ratio_vs_gloo=%.2f shm_fraction_of_memcpy=%.2f tcp_4KB_us=%.1f shm_4KB_us=%.1f "
      "gloo_4KB_us=%.1f shm_4KB_speedup_vs_gloo=%.1f tcp_cpu_ms_64MB=%.1f shm_cpu_ms_64MB=%.1f\n",
      headline, memcpy_rate, gloo_headline, headline / gloo_headline, f32_bucket / bf16_bucket,
      shm_headline, shm_headline / gloo_headline, shm_headline / memcpy_rate,
      micros(tcp, kLatencyBytes), micros(shm, kLatencyBytes), micros(gloo, kLatencyBytes),
      micros(gloo, kLatencyBytes) / micros(shm, kLatencyBytes), tcp_cpu * 1e3, shm_cpu * 1e3);
  return std::isfinite(headline) && std::isfinite(shm_headline) &&
                 std::isfinite(f32_bucket / bf16_bucket)
             ? 0
             : 1;
}
