// engine/distributed/launch/env.h — rank discovery: who started this process, and what rank it is.
//
// The first page of the distributed chapter. A process learns its place in the job from the
// environment its launcher left, read in this order (the first that is present wins, so that
// torchrun inside a SLURM allocation or mpirun under SLURM reads as the inner launcher):
//
//   1. RANK / WORLD_SIZE / LOCAL_RANK / LOCAL_WORLD_SIZE / MASTER_ADDR / MASTER_PORT — set by
//      torchrun (then TORCHELASTIC_RUN_ID or TORCHELASTIC_USE_AGENT_STORE is set too), by
//      bareyolo's own launcher (then BAREYOLO_SPAWNED=1), or by hand.
//   2. OMPI_COMM_WORLD_RANK / _LOCAL_RANK / _SIZE / _LOCAL_SIZE — OpenMPI's mpirun.
//   3. SLURM_PROCID / SLURM_LOCALID / SLURM_NTASKS (+ SLURM_JOB_NODELIST) — srun. A one-task
//      allocation (SLURM_NTASKS=1) is an interactive shell, not a launcher: it is ignored.
//
// Invariant: every rank of a job derives the same master address and store port from its own
// environment, without talking to anyone — the store is how they start talking.
//
// The environment is passed in as a map so that tests can inject one; process_environment()
// reads the real one.
#pragma once

#include <map>
#include <string>
#include <string_view>

namespace bareyolo::dist {

using EnvMap = std::map<std::string, std::string>;

// The environment of this process (environ), as a map.
EnvMap process_environment();

// Set to "1" by bareyolo's launcher in every worker it forks.
inline constexpr const char* kSpawnedVariable = "BAREYOLO_SPAWNED";
// The per-run secret every store connection must present (see store.h).
inline constexpr const char* kStoreTokenVariable = "BAREYOLO_STORE_TOKEN";
// The store's listening socket, inherited by global rank 0 from bareyolo's launcher.
inline constexpr const char* kStoreFdVariable = "BAREYOLO_STORE_FD";

enum class Launcher { none, manual, torchrun, bareyolo, openmpi, slurm };
const char* to_string(Launcher launcher);

struct LaunchEnv {
  Launcher launcher = Launcher::none;
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0: none given (a single process, or bareyolo's launcher picks one)
  // torchrun already serves its own TCPStore on MASTER_PORT (see store_port()).
  bool master_port_taken_by_torchrun = false;
  bool spawned_by_bareyolo = false;  // BAREYOLO_SPAWNED=1
  // BAREYOLO_STORE_TOKEN; without it "torchrun:<TORCHELASTIC_RUN_ID>" or
  // "slurm:<SLURM_JOB_ID>.<SLURM_STEP_ID>", else "" (the same on every rank).
  std::string store_token;
  bool store_token_given = false;  // it came from BAREYOLO_STORE_TOKEN (a secret)
  int restart_count = 0;           // TORCHELASTIC_RESTART_COUNT: torchrun's restarts so far
  std::string elastic_run_id;      // TORCHELASTIC_RUN_ID: torchrun's job (its --rdzv-id)

  // True when a launcher owns the process count: this process must not spawn workers.
  bool launched() const { return launcher != Launcher::none; }

  // The port of bareyolo's rendezvous store, the same on every rank: MASTER_PORT, except
  // under torchrun, whose agent store already listens on MASTER_PORT (binding it again
  // fails, and connecting to it would speak the wrong protocol): there it is MASTER_PORT + 1.
  // Throws when there is no MASTER_PORT (or MASTER_PORT + 1 would exceed 65535).
  int store_port() const;

  // Throws, saying why, when this process is a worker of bareyolo's launcher: a worker runs
  // the single-device path and must never fork workers of its own. The launcher calls this
  // before it forks.
  void refuse_nested_spawn() const;
};

// Reads the launch environment from `env`. Throws std::runtime_error naming the variable and
// its value when a value is malformed or inconsistent (RANK=abc, RANK >= WORLD_SIZE, RANK
// without WORLD_SIZE, a SLURM job without MASTER_ADDR and SLURM_JOB_NODELIST, ...).
LaunchEnv read_launch_env(const EnvMap& env);

// The first host of a SLURM node list in its compressed form: "node[01-04,07],gpu5" ->
// "node01", "rack[2-3]-n[5,9]" -> "rack2-n5", "gpu5" -> "gpu5". Throws on an empty or
// unbalanced list.
std::string slurm_first_host(std::string_view nodelist);

}  // namespace bareyolo::dist
