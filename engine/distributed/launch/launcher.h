// engine/distributed/launch/launcher.h — the last page of the distributed chapter: bareyolo's own
// launcher, which forks one worker process per local rank and supervises them (torchrun's job, done
// in-process with fork()).
//
// What a worker gets: the environment a launcher leaves (env.h) — RANK = node_rank × nproc +
// local_rank, LOCAL_RANK, WORLD_SIZE = nnodes × nproc, LOCAL_WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT, BAREYOLO_SPAWNED=1 and the run's store token; global rank 0 also inherits the
// store's listening socket as BAREYOLO_STORE_FD. Its stdout and stderr are pipes to the parent,
// which prints every line prefixed "[rank<N>]: ". It runs worker(local_rank) and _exit()s with
// its result: a worker never returns into the code that called launch_workers.
//
// Invariants:
//  - the parent never initialises CUDA (a forked child cannot use a CUDA context it inherits):
//    launch_workers refuses to fork once this process has touched CUDA, and
//    count_gpus_without_initializing() asks a short-lived child instead;
//  - the store's port is bound in the parent before forking and handed to rank 0 as an open
//    socket, so no other process can take it between choosing and listening;
//  - the first worker to fail (non-zero exit or a signal) stops the run: the others get two
//    seconds to notice and fail on their own (saying what they waited for), then SIGTERM, then
//    SIGKILL after the grace period; SIGINT or SIGTERM sent to the parent is
//    forwarded to every worker and ends the run the same way;
//  - a worker cannot launch workers of its own (BAREYOLO_SPAWNED=1 makes that an error);
//  - every worker beats into a progress board shared with the parent (progress_board.h); with
//    plan.stall_timeout set, the parent kills a worker that stalls and names it.
//
// While launch_workers runs, the process's handlers for SIGINT, SIGTERM and SIGCHLD are the
// launcher's (restored when it returns); a worker starts with them as exec() would leave
// them: ignored if the caller ignored them, the default action otherwise. Unless
// BAREYOLO_THREADS is set, each worker's CPU thread pool gets cores / nproc threads.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "engine/distributed/launch/env.h"

namespace bareyolo::dist {

struct LaunchPlan {
  int nproc = 1;  // workers on this node
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";  // global rank 0's host
  int master_port = 0;                    // 0: node 0 picks a free one (several nodes: required)
  std::vector<int> cuda_indices;          // the GPU of each local rank; empty for CPU ranks
  std::string store_token;  // "" : a random one; several nodes: required, the same on each
  std::chrono::milliseconds grace = std::chrono::seconds(5);  // SIGTERM -> SIGKILL
  // A worker without progress for this long is stalled (stall_monitor.h): the launcher names it
  // and kills it, which stops the run (or restarts it under --max-restarts); 0: no watch.
  std::chrono::milliseconds stall_timeout{0};

  int world_size() const { return nnodes * nproc; }
  int global_rank(int local_rank) const { return node_rank * nproc + local_rank; }
  // Throws std::runtime_error naming the field and its value when the plan is inconsistent.
  void validate() const;
};

// The variables launch_workers sets in the worker of `local_rank` (pure; for tests and logs).
// `master_port` is the port actually used (the one picked when plan.master_port is 0).
EnvMap worker_environment(const LaunchPlan& plan, int local_rank, int master_port,
                          const std::string& store_token);

// How a launch ended, for a caller that may start the job again (--max-restarts): only a
// worker's failure is worth a restart, never a person's SIGINT.
struct LaunchEnd {
  std::string failure;     // "rank 1 was killed by signal 9 (SIGKILL)"; empty: none failed
  int interrupted_by = 0;  // SIGINT or SIGTERM, when one reached the launcher; 0: none did
};

// "SIGTERM", "SIGKILL"; "signal 64" for one without a name.
std::string signal_name(int signal);

// Forks plan.nproc workers running worker(local_rank), supervises them as described above and
// returns 0 when every worker exited 0; otherwise prints the first failure (rank, exit status
// or signal name) to stderr and returns the failed worker's exit status, 128 + its signal, or
// 128 + the signal that interrupted the parent; `end`, when given, says which. A worker's
// result outside 0..255 exits 1; an exception it throws prints "error: <what>" and exits 1.
// Throws std::runtime_error before forking anything when this process is itself a worker (the
// recursion guard), when it has initialised CUDA, or when the plan is invalid.
int launch_workers(const LaunchPlan& plan, const std::function<int(int local_rank)>& worker,
                   LaunchEnd* end = nullptr);

// Runs probe() in a forked child and returns its result; the parent's state (CUDA above all)
// stays untouched. Throws naming `what` when the probe throws, crashes or takes longer than
// `timeout` (the child is then killed).
int run_in_probe_child(const std::function<int()>& probe, const std::string& what,
                       std::chrono::milliseconds timeout);

// The number of usable GPUs, counted in a probe child so that this process does not
// initialise CUDA (0 in a build without CUDA, without forking).
int count_gpus_without_initializing();

}  // namespace bareyolo::dist
