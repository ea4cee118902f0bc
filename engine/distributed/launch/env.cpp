// engine/distributed/launch/env.cpp — reading the launcher's variables (order and invariant:
// env.h).
#include "engine/distributed/launch/env.h"

#include <charconv>
#include <cstdlib>
#include <optional>
#include <stdexcept>

extern char** environ;

namespace bareyolo::dist {
namespace {

// One launcher's names for the four numbers.
struct RankVariables {
  const char* rank;
  const char* local_rank;
  const char* world_size;
  const char* local_world_size;
};
constexpr RankVariables kTorchVariables{"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE"};
constexpr RankVariables kOpenMpiVariables{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                                          "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"};
constexpr RankVariables kSlurmVariables{"SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS",
                                        "SLURM_NTASKS_PER_NODE"};

// SLURM gives no MASTER_PORT: every rank derives the same one from the job id.
constexpr int kSlurmPortBase = 20000;
constexpr int kSlurmPortRange = 20000;

std::optional<std::string> lookup(const EnvMap& env, const char* name) {
  auto it = env.find(name);
  if (it == env.end()) return std::nullopt;
  return it->second;
}

// The integer value of `name`, or nullopt when it is not set; throws when it is not a number
// in [min_value, max_value].
std::optional<long long> read_integer(const EnvMap& env, const char* name, long long min_value,
                                      long long max_value) {
  auto text = lookup(env, name);
  if (!text) return std::nullopt;
  long long value = 0;
  const char* end = text->data() + text->size();
  auto [stop, error] = std::from_chars(text->data(), end, value);
  if (text->empty() || error != std::errc() || stop != end || value < min_value ||
      value > max_value) {
    throw std::runtime_error("environment variable " + std::string(name) + "='" + *text +
                             "' is not an integer in [" + std::to_string(min_value) + ", " +
                             std::to_string(max_value) + "]: fix or unset it");
  }
  return value;
}

std::string variable_text(const char* name, long long value) {
  return std::string(name) + "=" + std::to_string(value);
}

// Fills rank, local_rank, world_size and local_world_size from one launcher's variables.
// Absent local values mean one node: LOCAL_RANK = RANK, LOCAL_WORLD_SIZE = WORLD_SIZE.
void read_ranks(const EnvMap& env, const RankVariables& names, LaunchEnv& out) {
  constexpr long long kMaxRanks = 1 << 20;
  long long rank = *read_integer(env, names.rank, 0, kMaxRanks);
  auto world_size = read_integer(env, names.world_size, 1, kMaxRanks);
  if (!world_size) {
    throw std::runtime_error(variable_text(names.rank, rank) + " is set but " + names.world_size +
                             " is not: a launcher sets both; set " + names.world_size +
                             " to the number of processes");
  }
  if (rank >= *world_size) {
    throw std::runtime_error(variable_text(names.rank, rank) + " must be smaller than " +
                             variable_text(names.world_size, *world_size) +
                             " (ranks count from 0): check the launcher's settings");
  }
  long long local_world_size =
      read_integer(env, names.local_world_size, 1, *world_size).value_or(*world_size);
  long long local_rank = read_integer(env, names.local_rank, 0, kMaxRanks).value_or(rank);
  if (local_rank >= local_world_size) {
    throw std::runtime_error(variable_text(names.local_rank, local_rank) +
                             " must be smaller than the ranks on this node, " +
                             variable_text(names.local_world_size, local_world_size));
  }
  out.rank = static_cast<int>(rank);
  out.world_size = static_cast<int>(*world_size);
  out.local_rank = static_cast<int>(local_rank);
  out.local_world_size = static_cast<int>(local_world_size);
}

Launcher rank_launcher(const EnvMap& env) {
  if (lookup(env, kSpawnedVariable) == "1") return Launcher::bareyolo;
  if (lookup(env, "TORCHELASTIC_RUN_ID") || lookup(env, "TORCHELASTIC_USE_AGENT_STORE"))
    return Launcher::torchrun;
  return Launcher::manual;
}

bool slurm_launched(const EnvMap& env) {
  auto tasks = read_integer(env, "SLURM_NTASKS", 1, 1 << 20);
  return lookup(env, "SLURM_PROCID") && tasks && *tasks > 1;
}

// MASTER_ADDR, or for SLURM the first host of the allocation. Several nodes with neither is
// an error: 127.0.0.1 would silently give each node its own store.
void read_master(const EnvMap& env, LaunchEnv& out) {
  if (auto addr = lookup(env, "MASTER_ADDR"); addr && !addr->empty()) {
    out.master_addr = *addr;
  } else if (auto nodes = lookup(env, "SLURM_JOB_NODELIST");
             nodes && out.launcher == Launcher::slurm) {
    out.master_addr = slurm_first_host(*nodes);
  } else if (out.local_world_size < out.world_size) {
    throw std::runtime_error(
        "the job spans several nodes (world size " + std::to_string(out.world_size) + ", " +
        std::to_string(out.local_world_size) +
        " on this node) but MASTER_ADDR is not set: set it to rank 0's host name");
  }
  if (auto port = read_integer(env, "MASTER_PORT", 1, 65535)) {
    out.master_port = static_cast<int>(*port);
  } else if (out.launcher == Launcher::slurm) {
    if (auto job = read_integer(env, "SLURM_JOB_ID", 0, 1LL << 62))
      out.master_port = kSlurmPortBase + static_cast<int>(*job % kSlurmPortRange);
  }
}

// BAREYOLO_STORE_TOKEN, else the external launcher's run id: every rank of a run shares it,
// and a store left over from another run refuses it.
std::string store_token(const EnvMap& env) {
  if (auto token = lookup(env, kStoreTokenVariable)) return *token;
  if (auto run = lookup(env, "TORCHELASTIC_RUN_ID")) return "torchrun:" + *run;
  if (auto job = lookup(env, "SLURM_JOB_ID"))
    return "slurm:" + *job + "." + lookup(env, "SLURM_STEP_ID").value_or("");
  return "";
}

}  // namespace

EnvMap process_environment() {
  EnvMap env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    std::string_view text(*entry);
    size_t equals = text.find('=');
    if (equals == std::string_view::npos) continue;
    env.emplace(std::string(text.substr(0, equals)), std::string(text.substr(equals + 1)));
  }
  return env;
}

const char* to_string(Launcher launcher) {
  switch (launcher) {
    case Launcher::none:
      return "none";
    case Launcher::manual:
      return "RANK/WORLD_SIZE variables";
    case Launcher::torchrun:
      return "torchrun";
    case Launcher::bareyolo:
      return "bareyolo's launcher";
    case Launcher::openmpi:
      return "OpenMPI";
    case Launcher::slurm:
      return "SLURM";
  }
  return "unknown";
}

LaunchEnv read_launch_env(const EnvMap& env) {
  LaunchEnv out;
  out.spawned_by_bareyolo = lookup(env, kSpawnedVariable) == "1";
  out.store_token = store_token(env);
  out.store_token_given = lookup(env, kStoreTokenVariable).has_value();
  if (auto restarts = lookup(env, "TORCHELASTIC_RESTART_COUNT"))
    out.restart_count = std::atoi(restarts->c_str());
  out.elastic_run_id = lookup(env, "TORCHELASTIC_RUN_ID").value_or("");
  if (lookup(env, "RANK")) {
    out.launcher = rank_launcher(env);
    read_ranks(env, kTorchVariables, out);
  } else if (lookup(env, "OMPI_COMM_WORLD_RANK")) {
    out.launcher = Launcher::openmpi;
    read_ranks(env, kOpenMpiVariables, out);
  } else if (slurm_launched(env)) {
    out.launcher = Launcher::slurm;
    read_ranks(env, kSlurmVariables, out);
  } else {
    return out;
  }
  out.master_port_taken_by_torchrun = out.launcher == Launcher::torchrun;
  read_master(env, out);
  return out;
}

int LaunchEnv::store_port() const {
  if (master_port == 0) {
    throw std::runtime_error("rank " + std::to_string(rank) + " (launcher: " + to_string(launcher) +
                             ") has no MASTER_PORT in its environment: "
                             "set MASTER_PORT to a free port, the same on every rank");
  }
  if (!master_port_taken_by_torchrun) return master_port;
  if (master_port == 65535) {
    throw std::runtime_error(
        "MASTER_PORT=65535 under torchrun: bareyolo's store uses "
        "MASTER_PORT + 1, which does not exist; pick a lower port");
  }
  return master_port + 1;
}

void LaunchEnv::refuse_nested_spawn() const {
  if (!spawned_by_bareyolo) return;
  throw std::runtime_error("this process was started by bareyolo's launcher as rank " +
                           std::to_string(rank) +
                           "; it must not spawn workers itself (each worker trains on the "
                           "one device of its LOCAL_RANK; unset " +
                           kSpawnedVariable + " only if this process was not started by bareyolo)");
}

std::string slurm_first_host(std::string_view nodelist) {
  std::string host;
  size_t i = 0;
  while (i < nodelist.size() && nodelist[i] != ',') {
    if (nodelist[i] != '[') {
      host += nodelist[i++];
      continue;
    }
    size_t close = nodelist.find(']', i);
    if (close == std::string_view::npos) break;
    std::string_view range = nodelist.substr(i + 1, close - i - 1);
    host += range.substr(0, range.find_first_of("-,"));
    i = close + 1;
  }
  bool balanced = i == nodelist.size() || nodelist[i] == ',';
  if (host.empty() || !balanced || host.find_first_of("[]") != std::string::npos) {
    throw std::runtime_error("SLURM_JOB_NODELIST='" + std::string(nodelist) +
                             "' is not a SLURM node list such as 'node[01-04,07],gpu5': "
                             "set MASTER_ADDR to rank 0's host name instead");
  }
  return host;
}

}  // namespace bareyolo::dist
