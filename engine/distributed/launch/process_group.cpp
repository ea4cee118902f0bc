// engine/distributed/launch/process_group.cpp — store, then communicator, for one rank (see
// process_group.h).
#include "engine/distributed/launch/process_group.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>

#include "engine/atomic_file.h"
#include "engine/distributed/comm/host_staging.h"
#include "engine/distributed/comm/nccl_communicator.h"
#include "engine/distributed/comm/progress_board.h"
#include "engine/distributed/comm/shm_communicator.h"
#include "engine/distributed/comm/socket.h"
#include "engine/distributed/comm/tcp_ring.h"
#include "engine/distributed/comm/token_proof.h"

namespace bareyolo::dist {
namespace {

// The listening socket named by BAREYOLO_STORE_FD, taken over by this process (the variable is
// removed so that nothing else in it claims the same descriptor); an empty Fd when unset.
Fd inherited_store_socket() {
  const char* text = std::getenv(kStoreFdVariable);
  if (text == nullptr) return Fd();
  const std::string value = text;
  char* end = nullptr;
  const long fd = std::strtol(value.c_str(), &end, 10);
  int listening = 0;
  socklen_t length = sizeof listening;
  if (value.empty() || *end != '\0' || fd < 0 ||
      ::getsockopt(int(fd), SOL_SOCKET, SO_ACCEPTCONN, &listening, &length) != 0 || !listening) {
    throw std::runtime_error(std::string(kStoreFdVariable) + "=" + value +
                             " is not a listening socket this process inherited; it is set by "
                             "bareyolo's launcher for rank 0 only — unset it to bind MASTER_PORT");
  }
  ::unsetenv(kStoreFdVariable);
  return Fd(int(fd));
}

// The store of a job that spans machines listens on every interface, where anyone who can
// reach the port may connect: its token must then be a secret, not empty and not one derived
// from the launcher's job id (torchrun's default run id is "none"; a SLURM job id is public).
// On loopback only this machine's processes can connect, and a derived token keeps runs apart.
std::unique_ptr<StoreServer> serve_store(const LaunchEnv& env) {
  Fd inherited = inherited_store_socket();
  if (inherited) return std::make_unique<StoreServer>(std::move(inherited), env.store_token);
  const std::string host = store_bind_host(env.master_addr);
  const std::string& token = env.store_token;
  if (host != "127.0.0.1" &&
      (token.empty() || token.starts_with("torchrun:") || token.starts_with("slurm:")))
    throw std::runtime_error(
        "MASTER_ADDR=" + env.master_addr +
        " makes the rendezvous store listen on every interface, and its token would be " +
        (token.empty() ? "empty" : "'" + token + "', which anyone can guess") +
        ": set BAREYOLO_STORE_TOKEN to the same secret on every node (for example the output "
        "of `openssl rand -hex 16`)");
  return std::make_unique<StoreServer>(host, env.store_port(), token);
}

// Where this process can share memory with others: its host name and its IPC and PID
// namespaces (two containers may share a host name but not /dev/shm or each other's pids).
std::string memory_domain() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::string domain = host;
  for (const char* space : {"/proc/self/ns/ipc", "/proc/self/ns/pid"}) {
    std::error_code unreadable;
    domain += " " + std::filesystem::read_symlink(space, unreadable).string();
  }
  return domain;
}

// Backend auto, decided alike on every rank from what every rank published: NCCL when this
// build has it and each rank holds a GPU of its own; shared memory when every rank is a CPU rank
// in one memory domain; the TCP ring otherwise.
Backend agree_on_backend(Store& store, const LaunchEnv& env, const Device& device) {
  store.set("pg/device/" + std::to_string(env.rank), memory_domain() + "/" + device.str());
  bool distinct_gpus = nccl_compiled(), cpus_sharing_memory = true;
  std::vector<std::string> seen;
  for (int rank = 0; rank < env.world_size; ++rank) {
    std::string placed = store.get("pg/device/" + std::to_string(rank));
    const std::string domain = placed.substr(0, placed.rfind('/'));
    if (placed.ends_with("/cpu")) distinct_gpus = false;
    cpus_sharing_memory = cpus_sharing_memory && placed.ends_with("/cpu") &&
                          domain.find(":[") != std::string::npos &&
                          (seen.empty() || seen.front().starts_with(domain + "/"));
    for (const auto& other : seen) distinct_gpus = distinct_gpus && other != placed;
    seen.push_back(std::move(placed));
  }
  return distinct_gpus ? Backend::nccl : cpus_sharing_memory ? Backend::shm : Backend::tcp;
}

// Rank 0 writes a fresh token into `path` (atomically: a reader sees all of it or nothing);
// the others wait for it, as long as `wait` allows.
std::string share_local_token(const LaunchEnv& env, const std::string& path, JoinWait& wait) {
  if (env.rank == 0) {
    const std::string token = random_nonce() + random_nonce();
    try {  // the folder keeps it private
      const auto* bytes = reinterpret_cast<const uint8_t*>(token.data());
      write_file_atomically(path, {std::span<const uint8_t>(bytes, token.size())});
    } catch (const std::runtime_error& error) {
      throw std::runtime_error(std::string(error.what()) +
                               " (the job's store token; or set BAREYOLO_STORE_TOKEN)");
    }
    return token;
  }
  while (true) {
    std::error_code missing;
    if (std::filesystem::is_regular_file(path, missing)) {
      std::string token(64, '\0');
      const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      const ssize_t got = fd >= 0 ? ::read(fd, token.data(), token.size()) : -1;
      if (fd >= 0) ::close(fd);
      if (got == ssize_t(token.size())) return token;
    }
    wait.still_waiting_for([&] {
      return "rank 0 to write the job's store token to " + path +
             " (do all ranks run under one launcher on this machine? else set "
             "BAREYOLO_STORE_TOKEN)";
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// The ranks' progress (progress_board.h): bareyolo's launcher shared a board with its workers
// and beats for them; under any other launcher each rank beats into the store, and rank 0
// watches every rank's beats for stalls.
void watch(ProcessGroup& group, const ProcessGroupOptions& options) {
  group.peers = inherited_progress_board();
  if (group.peers) return;
  const LaunchEnv& env = group.env;
  const std::string host = env.world_size == 1 ? "127.0.0.1" : env.master_addr;
  const int port = env.world_size == 1 ? group.server->port() : env.store_port();
  // Short limits: a heartbeat that cannot reach the store skips a beat rather than block, and
  // a failing rank names its peers only if the store still answers.
  using namespace std::chrono_literals;
  group.heartbeat_store = std::make_unique<Store>(host, port, env.store_token, 10s);
  group.heartbeat_board = make_store_progress_board(*group.heartbeat_store, env.world_size);
  group.heartbeat = std::make_unique<Heartbeat>(*group.heartbeat_board, env.rank);
  group.peers_store = std::make_unique<Store>(host, port, env.store_token, 5s);
  group.store_board = make_store_progress_board(*group.peers_store, env.world_size);
  group.peers = group.store_board.get();
  if (env.rank == 0 && options.stall_timeout.count() > 0)
    group.stall_watch = std::make_unique<StallWatch>(
        StallWatch::Options{host, port, env.store_token, env.world_size, options.stall_timeout});
}

}  // namespace

bool derives_local_token(const LaunchEnv& env) {
  const bool agent_parent = env.launcher == Launcher::torchrun ||
                            env.launcher == Launcher::openmpi || env.launcher == Launcher::slurm;
  return agent_parent && !env.store_token_given && !env.spawned_by_bareyolo && env.world_size > 1 &&
         env.world_size == env.local_world_size;
}

std::string local_token_file(const LaunchEnv& env, long parent_pid) {
  const char* runtime = std::getenv("XDG_RUNTIME_DIR");
  const std::filesystem::path base =
      runtime && std::filesystem::is_directory(runtime) ? runtime : "/tmp";
  const std::filesystem::path folder = base / ("bareyolo-" + std::to_string(::getuid()));
  ::mkdir(folder.c_str(), 0700);
  struct stat info {};
  if (::lstat(folder.c_str(), &info) != 0 || !S_ISDIR(info.st_mode) || info.st_uid != ::getuid() ||
      (info.st_mode & 077) != 0)
    throw std::runtime_error(folder.string() +
                             " is not a folder only this user can read, so the job's store "
                             "token cannot be kept there: remove it, or set "
                             "BAREYOLO_STORE_TOKEN");
  return (folder / ("store-" + std::to_string(parent_pid) + "-" + std::to_string(env.store_port()) +
                    "-" + std::to_string(env.restart_count) + ".token"))
      .string();
}

ProcessGroup init_process_group(const LaunchEnv& env, const ProcessGroupOptions& options) {
  ProcessGroup group;
  group.env = env;
  if (env.world_size == 1 && options.backend != Backend::nccl) {
    group.comm = make_single_rank_communicator(options.backend.value_or(Backend::tcp));
    return group;
  }
  if (env.world_size == 1) {
    // One rank that asked for NCCL (the GPU check runs NCCL on one GPU this way): its store is
    // private, on a loopback port of its own.
    Fd socket = listen_tcp("127.0.0.1", 0);
    const int port = bound_port(socket.get());
    group.server = std::make_unique<StoreServer>(std::move(socket), env.store_token);
    group.store = std::make_unique<Store>("127.0.0.1", port, env.store_token, options.timeout);
  } else {
    JoinWait wait(env, options.rendezvous);
    std::string token_file;
    if (derives_local_token(env)) {
      token_file = local_token_file(env, long(::getppid()));
      group.env.store_token = share_local_token(env, token_file, wait);
    }
    if (env.rank == 0) group.server = serve_store(group.env);
    group.store = connect_to_store(env, group.env.store_token, options.timeout, wait);
    wait_for_every_rank(*group.store, env, wait);
    if (env.rank == 0 && !token_file.empty()) {  // every rank has joined: each has read it
      std::error_code ignored;
      std::filesystem::remove(token_file, ignored);
    }
  }

  const Backend backend =
      options.backend ? *options.backend : agree_on_backend(*group.store, env, options.device);
  std::unique_ptr<Communicator> comm;
  if (backend == Backend::nccl) {
    if (!options.device.is_cuda()) {
      throw std::runtime_error("rank " + std::to_string(env.rank) +
                               ": the NCCL backend needs a GPU, but this rank's device is " +
                               options.device.str() + " (use --backend tcp for CPU ranks)");
    }
    // NCCL moves device memory only; the step's few host values go through device scratch.
    comm = with_host_staging(make_nccl_communicator(*group.store, env.rank, env.world_size,
                                                    options.device.index, options.timeout),
                             cuda_device_staging(options.device.index));
  } else if (backend == Backend::shm) {
    if (!options.device.is_cpu()) {
      throw std::runtime_error("rank " + std::to_string(env.rank) +
                               ": the shm backend moves host memory, but this rank's device is " +
                               options.device.str() + " (use --backend tcp or nccl for GPU ranks)");
    }
    comm = make_shm_communicator(*group.store, env.rank, env.world_size, group.env.store_token,
                                 env.store_port(), options.timeout);
  } else {
    comm = make_tcp_ring_communicator(*group.store, env.rank, env.world_size, env.master_addr,
                                      group.env.store_token, options.timeout);
  }
  watch(group, options);
  auto watched = std::make_unique<WatchedCommunicator>(
      std::move(comm), desync_check_for(backend, std::getenv("BAREYOLO_DESYNC_CHECK")),
      group.peers);
  group.watched = watched.get();
  group.comm = std::move(watched);
  return group;
}

}  // namespace bareyolo::dist
