// engine/distributed/launch/process_group.h — joining the job: the rendezvous store and the
// communicator a rank trains with, from its launch environment (env.h) in one call.
//
// Rank 0 serves the store (store.h) on store_bind_host(MASTER_ADDR):store_port() — or, when
// BAREYOLO_STORE_FD=<fd> is set, on that already listening socket, which bareyolo's launcher
// bound on port 0 before forking (so no other process can take the port in between). Every
// rank, rank 0 included, connects a Store client with the run's token and waits until every
// rank has joined (rendezvous.h: within the rendezvous timeout, saying what it waits for),
// then the communicator is built: the single-rank one for world_size 1, else the TCP ring
// (tcp_ring.h), shared memory (shm_communicator.h) or NCCL (nccl_communicator.h, wrapped by
// host_staging.h for the host buffers a step sends). One rank that asks for NCCL gets a real NCCL
// communicator and a private store, so that one GPU can run NCCL's path end to end.
//
// Backend "auto" (no backend in the options) is decided the same way on every rank: each rank
// publishes its host (with its IPC and PID namespaces) and device in the store; NCCL when this
// build has it and every rank is on a GPU no other rank shares, shared memory when every rank is
// a CPU rank of one host, the TCP ring otherwise (CPU ranks on several hosts, "--device 0,0").
//
// The communicator is watched (watched_communicator.h: numbered collectives, a flight record,
// the rank's progress, the desync check BAREYOLO_DESYNC_CHECK asks for). Its progress board
// (progress_board.h) is the one bareyolo's launcher shared with its workers; under any other
// launcher the rank starts a heartbeat into the store, and rank 0 watches every rank's for
// stalls (stall_monitor.h) when options.stall_timeout is set.
#pragma once

#include <chrono>
#include <memory>
#include <optional>

#include "engine/distributed/comm/communicator.h"
#include "engine/distributed/comm/progress_board.h"
#include "engine/distributed/comm/store.h"
#include "engine/distributed/comm/watched_communicator.h"
#include "engine/distributed/launch/env.h"
#include "engine/distributed/launch/rendezvous.h"
#include "engine/distributed/launch/stall_monitor.h"

namespace bareyolo::dist {

struct ProcessGroupOptions {
  std::optional<Backend> backend;  // nullopt: auto, as above
  // Bounds joining the job (rendezvous.h): until every rank has announced itself.
  RendezvousOptions rendezvous = {};
  // Bounds every store call and every collective after that.
  std::chrono::milliseconds timeout = kDefaultStoreTimeout;
  Device device = Device::cpu();  // this rank's device: NCCL's GPU
  // Under torchrun, SLURM or mpirun: rank 0 ends the job when a rank makes no progress for
  // this long (stall_monitor.h); 0: no watch. bareyolo's launcher watches its workers itself.
  std::chrono::milliseconds stall_timeout{0};
};

struct ProcessGroup {
  LaunchEnv env;
  std::unique_ptr<StoreServer> server;  // rank 0 only
  std::unique_ptr<Store> store;  // null for world_size 1 (nobody to meet), unless NCCL was asked
  // Without bareyolo's launcher: the heartbeat's own store connection and board, the board the
  // communicator reads peers from, and rank 0's stall watch.
  std::unique_ptr<Store> heartbeat_store, peers_store;
  std::unique_ptr<ProgressBoard> heartbeat_board, store_board;
  ProgressBoard* peers = nullptr;  // where the communicator reads the other ranks' progress
  std::unique_ptr<Heartbeat> heartbeat;
  std::unique_ptr<StallWatch> stall_watch;
  // Declared last, so destroyed first: the communicator may still talk to the store.
  std::unique_ptr<Communicator> comm;
  WatchedCommunicator* watched = nullptr;  // comm, when it is a watched one (several ranks)

  int rank() const { return env.rank; }
  int world_size() const { return env.world_size; }
  // True when collectives go through a real backend: more than one rank, or one rank that
  // asked for NCCL (which then runs every collective of a step, as a data-parallel job does).
  bool communicates() const { return store != nullptr; }
};

// Joins the job `env` describes. Throws std::runtime_error with the cause (a malformed
// BAREYOLO_STORE_FD, an unreachable or foreign store, a rank that never joined within the
// rendezvous timeout, NCCL asked for on the CPU, ...).
ProcessGroup init_process_group(const LaunchEnv& env, const ProcessGroupOptions& options = {});

// A job of one machine under torchrun, mpirun or srun without BAREYOLO_STORE_TOKEN would
// otherwise rendezvous with a token anyone can guess ("torchrun:none"). Its ranks share a
// parent process (the launcher's agent on the machine), so init_process_group makes them a
// secret one: rank 0 writes a random token into this file — in a folder only this user can
// read, named by that parent, the store port and torchrun's restart count — the other ranks
// read it, and rank 0 removes it once every rank has joined.
bool derives_local_token(const LaunchEnv& env);
std::string local_token_file(const LaunchEnv& env, long parent_pid);

}  // namespace bareyolo::dist
