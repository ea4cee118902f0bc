// models/train/launch.cpp — see launch.h.
#include "models/train/launch.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <thread>

#include "data/dataset.h"
#include "data/sampler.h"
#include "engine/distributed/launch/device_spec.h"
#include "engine/distributed/launch/launcher.h"
#include "engine/distributed/launch/process_group.h"
#include "kernels/devices.h"
#include "kernels/step_graph.h"
#include "models/train/autobatch.h"
#include "models/train/checkpoint.h"
#include "models/train/elastic.h"
#include "models/train/rank_agreement.h"
#include "models/train/run_dir.h"
#include "models/train/run_lock.h"
#include "models/train/run_model.h"
#include "models/train/step.h"
#include "models/yolo/model_config.h"

namespace bareyolo::models {

namespace {

using Log = std::function<void(const std::string&)>;

int cores() { return std::max(1, int(std::thread::hardware_concurrency())); }

std::optional<dist::Backend> backend_of(const std::string& name) {
  if (name == "auto") return std::nullopt;
  if (name == "tcp") return dist::Backend::tcp;
  if (name == "shm") return dist::Backend::shm;
  if (name == "nccl") return dist::Backend::nccl;
  throw std::invalid_argument("--backend " + name + " is not one of auto, tcp, shm, nccl");
}

// A timeout flag's seconds (--timeout, --rendezvous-timeout) as a duration.
std::chrono::milliseconds duration_of(const char* flag, double seconds) {
  constexpr double kLongestSeconds = 1e9;  // 31 years: far beyond any wait, and no overflow
  if (!(seconds > 0 && seconds <= kLongestSeconds))
    throw std::invalid_argument(std::string(flag) + " " + std::to_string(seconds) +
                                " must be a positive number of seconds, at most 1e9");
  return std::chrono::milliseconds(int64_t(seconds * 1000));
}

std::chrono::milliseconds timeout_of(const TrainOptions& options) {
  return duration_of("--timeout", options.timeout_s);
}

// --stall-timeout; 0: no stall watch.
std::chrono::milliseconds stall_timeout_of(const TrainOptions& options) {
  if (options.stall_timeout_s == 0) return std::chrono::milliseconds(0);
  return duration_of("--stall-timeout", options.stall_timeout_s);
}

// The devices and rank count the options ask for on this machine.
dist::DeviceSpec device_spec(const TrainOptions& options, int gpus) {
  int nproc = options.nproc_per_node;
  if (nproc <= 0)
    nproc =
        options.device.text == "auto" && gpus == 0 ? default_cpu_ranks(cores(), options.batch) : 1;
  return dist::DeviceSpec::parse(options.device.text, gpus, nproc);
}

// `--batch -1` becomes a global batch for `world` ranks. AutoBatch measures GPU memory once,
// on the first GPU: in a probe child when this process must stay free of CUDA (it forks the
// workers), in this process when it is a launched rank 0. On the CPU there is no memory limit
// worth probing, so it takes YOLOv5's default 16.
void resolve_autobatch(TrainOptions& options, const dist::DeviceSpec& spec, int world,
                       bool probe_in_child, const Log& log) {
  if (options.batch != -1) return;
  std::string message;
  if (spec.kind == dist::DeviceKind::cpu) {
    options.batch = global_autobatch(std::max(1, 16 / world), world, options.nbs, &message);
    log("AutoBatch measures GPU memory; on the CPU it uses YOLOv5's default 16: " + message);
    return;
  }
  const int gpu = spec.cuda_indices.front();
  const int per_device =
      probe_in_child
          ? dist::run_in_probe_child([&] { return probe_autobatch(options, gpu, log); },
                                     "the AutoBatch memory probe", std::chrono::minutes(10))
          : probe_autobatch(options, gpu, log);
  options.batch = global_autobatch(per_device, world, options.nbs, &message);
  log(message);
}

// What the process that owns the run (one process, or the parent of spawned workers) checks
// before any worker starts, and where the outputs go: a new run's directory (a resumed run's
// is the checkpoint's, set by resolved_request). The splits' problems are logged (--strict:
// refused). Returns whether it created the directory.
bool prepare_run(TrainOptions& options, int world_size, const Log& log) {
  data::require_divisible_batch(options.batch, world_size);
  if (!options.resume.empty()) return false;
  const data::DatasetConfig data = data::read_dataset_yaml(options.data);
  for (const char* split : {"train", "val"}) {
    const data::OpenedSplit opened =
        data::open_split(data, split, {.max_pixels = options.max_pixels});
    const data::SplitReport& report = opened.verification.report;
    const std::vector<std::string> lines = data::problem_lines(split, report);
    for (const std::string& line : lines) log(line);
    if (options.strict && !lines.empty())
      throw std::invalid_argument("--strict: the " + std::string(split) + " split of " +
                                  options.data + " has " + std::to_string(report.problems.size()) +
                                  " problem(s), the first: " + report.problems[0].to_string());
  }
  run_model_config(options);  // the model yaml is read (and checked) before anything starts
  if (!options.run_dir.empty()) return std::filesystem::create_directories(options.run_dir);
  bool created = false;
  options.run_dir = resolve_run_dir(options.project, options.name, options.exist_ok, &created);
  return created;
}

// The run directory as the job's owner holds it: locked for the job's life (run_lock.h), and
// removed again when this start created it and failed before anything but the lock was
// written into it, so that the next run is not numbered past an empty directory.
class OwnedRunDir {
 public:
  OwnedRunDir(const std::string& path, bool created, const Log& log)
      : path_(path), created_(created), lock_(path), exceptions_(std::uncaught_exceptions()) {
    if (!lock_.previous_owner().empty())
      log("took over the lock of " + path + " from a job that did not end cleanly (" +
          lock_.previous_owner() + ")");
  }
  ~OwnedRunDir() {
    if (!created_ || std::uncaught_exceptions() == exceptions_) return;
    namespace fs = std::filesystem;
    std::error_code error;
    for (const fs::directory_entry& entry : fs::directory_iterator(path_, error))
      if (entry.path().filename() != RunDirLock::kFileName) return;  // the run wrote something
    if (error) return;
    fs::remove(fs::path(path_) / RunDirLock::kFileName, error);
    fs::remove(path_, error);
  }
  OwnedRunDir(const OwnedRunDir&) = delete;
  OwnedRunDir& operator=(const OwnedRunDir&) = delete;

 private:
  std::string path_;
  bool created_;
  RunDirLock lock_;
  int exceptions_;
};

// torchrun restarted this job (TORCHELASTIC_RESTART_COUNT > 0): the run its first start
// recorded (elastic.h), continued from its newest checkpoint; a new run when none was recorded.
TrainOptions continue_torchrun_job(TrainOptions options, const dist::LaunchEnv& env,
                                   const Log& log) {
  const std::string job =
      "torchrun restart " + std::to_string(env.restart_count) + " of job " + env.elastic_run_id;
  const std::optional<std::string> run = find_elastic_run(options.project, env.elastic_run_id);
  if (!run) {
    log(job + ": no run under " + options.project + " records this job; starting a new run");
    return options;
  }
  options.run_dir = *run;
  std::string position;
  options = continue_run(options, &position);
  log(job + ": continuing " + position);
  return options;
}

// One rank of a launched job: join it, agree on the run directory, train.
TrainSummary train_rank(TrainOptions options, const dist::DeviceSpec& spec, const Log& log) {
  const dist::LaunchEnv env = dist::read_launch_env(dist::process_environment());
  Device device = Device::cpu();
  if (spec.kind == dist::DeviceKind::cuda)
    device = Device::cuda(size_t(env.local_rank) < spec.cuda_indices.size()
                              ? spec.cuda_indices[size_t(env.local_rank)]
                              : env.local_rank);
  dist::ProcessGroup group = dist::init_process_group(
      env,
      {.backend = backend_of(options.backend),
       .rendezvous = {.timeout = duration_of("--rendezvous-timeout", options.rendezvous_timeout_s)},
       .timeout = timeout_of(options),
       .device = device,
       .stall_timeout = stall_timeout_of(options)});
  // Ranks started otherwise than by one bareyolo launcher compare their configurations, before
  // anything is written (rank_agreement.h); ranks forked by one share its command line, and
  // compare only what their devices resolve from it (an unset --amp on GPUs of two models).
  const bool forks_of_one_launcher =
      env.spawned_by_bareyolo && env.world_size == env.local_world_size;
  if (group.world_size() > 1)
    agree_on_configuration(*group.store, group.rank(), group.world_size(),
                           forks_of_one_launcher ? device_configuration(options, device)
                                                 : rank_configuration(options, device));
  // Rank 0 decides where the run goes (it alone creates directories) and, after a torchrun
  // restart, which checkpoint it continues from; the others are told. So does AutoBatch,
  // probed on rank 0 alone. Under an external launcher rank 0 owns the run directory (locks
  // it); bareyolo's own launcher holds it for its workers.
  constexpr const char* kRunDirKey = "bareyolo/run_dir";
  constexpr const char* kBatchKey = "bareyolo/batch";
  constexpr const char* kResumeKey = "bareyolo/resume";
  const bool torchrun_job = env.launcher == dist::Launcher::torchrun && !env.elastic_run_id.empty();
  std::optional<OwnedRunDir> owned;
  if (group.rank() == 0) {
    if (torchrun_job && env.restart_count > 0) options = continue_torchrun_job(options, env, log);
    resolve_autobatch(options, spec, group.world_size(), false, log);
    const bool created = prepare_run(options, group.world_size(), log);
    if (!env.spawned_by_bareyolo) owned.emplace(options.run_dir, created, log);
    if (torchrun_job) record_elastic_run(options.run_dir, env.elastic_run_id);
    if (group.store) {  // a job of one rank (WORLD_SIZE=1) has nobody to tell, and no store
      group.store->set(kResumeKey, options.resume);
      group.store->set(kBatchKey, std::to_string(options.batch));
      group.store->set(kRunDirKey, options.run_dir);
    }
  } else {
    options.resume = group.store->get(kResumeKey);
    options = resolved_request(options);  // rank 0's checkpoint's configuration, as rank 0's
    options.batch = std::stoi(group.store->get(kBatchKey));
    options.run_dir = group.store->get(kRunDirKey);
  }
  return train(options,
               RunContext{.run_dir = options.run_dir,
                          .rank = group.rank(),
                          .world_size = group.world_size(),
                          .device = device,
                          .group = &group,
                          .batch = plan_batch(options.batch, group.world_size(), options.nbs)},
               log);
}

nlohmann::json summary_json(const TrainSummary& s) {
  return {{"best_fitness", s.best_fitness},
          {"best_map50", s.best_map50},
          {"best_map50_95", s.best_map50_95},
          {"last_map50", s.last_map50},
          {"last_map50_95", s.last_map50_95},
          {"epochs_run", s.epochs_run},
          {"optimizer_steps", s.optimizer_steps},
          {"seconds", s.seconds},
          {"finished", s.finished},
          {"run_dir", s.run_dir},
          {"rank0", s.rank0}};
}

TrainSummary summary_from_json(const nlohmann::json& j) {
  TrainSummary s;
  s.best_fitness = j.at("best_fitness");
  s.best_map50 = j.at("best_map50");
  s.best_map50_95 = j.at("best_map50_95");
  s.last_map50 = j.at("last_map50");
  s.last_map50_95 = j.at("last_map50_95");
  s.epochs_run = j.at("epochs_run");
  s.optimizer_steps = j.at("optimizer_steps");
  s.seconds = j.at("seconds");
  s.finished = j.at("finished");
  s.run_dir = j.at("run_dir");
  s.rank0 = j.at("rank0");
  return s;
}

// Where a stopped job can be continued from, for the line that ends it.
std::string where_to_continue(const std::string& run_dir) {
  if (run_dir.empty()) return "node 0 holds the run's checkpoints";
  const std::string last = last_checkpoint(run_dir);
  if (!std::filesystem::is_regular_file(last))
    return "no checkpoint of " + run_dir + " was written yet";
  return "its last checkpoint, " + last + ", is intact: continue with --resume " + last;
}

// How a launch that did not succeed ends: a person's SIGINT or SIGTERM is no worker's failure.
[[noreturn]] void throw_launch_end(const dist::LaunchEnd& end, const std::string& run_dir) {
  if (end.interrupted_by != 0 && end.failure.empty())
    throw TrainingInterrupted(end.interrupted_by,
                              "training stopped: the launcher was asked to stop by " +
                                  dist::signal_name(end.interrupted_by) +
                                  " and stopped every worker; " + where_to_continue(run_dir));
  throw std::runtime_error("training stopped: a worker failed (see the message above); " +
                           where_to_continue(run_dir));
}

// One start of the job's workers: rank 0's summary, or nothing when the launch failed (`end`
// says how). Rank 0 sends its summary back through a pipe (a few hundred bytes: it fits the
// pipe's buffer, so rank 0 never blocks on it).
std::optional<TrainSummary> launch_job(const TrainOptions& options, const dist::DeviceSpec& spec,
                                       const dist::LaunchPlan& plan, const Log& log,
                                       dist::LaunchEnd& end) {
  int summary_pipe[2];
  if (::pipe(summary_pipe) != 0) throw std::runtime_error("cannot create a pipe for the workers");
  const int status = dist::launch_workers(
      plan,
      [&](int local_rank) {
        ::close(summary_pipe[0]);
        const TrainSummary summary = train_rank(options, spec, log);
        if (local_rank == 0) {
          const std::string text = summary_json(summary).dump();
          if (::write(summary_pipe[1], text.data(), text.size()) != ssize_t(text.size()))
            throw std::runtime_error("rank 0 could not report its summary to the launcher");
        }
        return 0;
      },
      &end);
  ::close(summary_pipe[1]);
  std::string text;
  char chunk[4096];
  for (ssize_t got; (got = ::read(summary_pipe[0], chunk, sizeof chunk)) > 0;)
    text.append(chunk, size_t(got));
  ::close(summary_pipe[0]);
  if (status != 0) return std::nullopt;
  return summary_from_json(nlohmann::json::parse(text));
}

// More ranks than one (or --max-restarts) and no launcher: fork them, and after a worker's
// failure start the job again from the run's newest checkpoint, at most --max-restarts times
// (elastic.h).
TrainSummary spawn_ranks(TrainOptions options, const dist::DeviceSpec& spec, const Log& log) {
  if (options.max_restarts > 0 && options.nnodes > 1)
    throw std::invalid_argument(
        "--max-restarts restarts the workers of one machine; with --nnodes " +
        std::to_string(options.nnodes) +
        " every machine's launcher would have to restart together: launch each node under "
        "torchrun --max-restarts instead");
  // Node 0's launcher checks, creates and locks the run directory; rank 0 tells the other
  // nodes.
  std::optional<OwnedRunDir> owned;
  if (options.node_rank == 0) {
    const bool created = prepare_run(options, spec.ranks * options.nnodes, log);
    owned.emplace(options.run_dir, created, log);
  }
  dist::LaunchPlan plan;
  plan.nproc = spec.ranks;
  plan.cuda_indices = spec.cuda_indices;
  plan.nnodes = options.nnodes;
  plan.node_rank = options.node_rank;
  plan.master_addr = options.master_addr;
  plan.master_port = options.master_port;
  plan.stall_timeout = stall_timeout_of(options);
  // Every node's workers must present the same store token: several nodes share it through
  // the environment (BAREYOLO_STORE_TOKEN), one node makes up a random one.
  if (const char* token = std::getenv(dist::kStoreTokenVariable); token && options.nnodes > 1)
    plan.store_token = token;
  log("starting " + std::to_string(spec.ranks) + " ranks on " + spec.describe() +
      (options.nnodes > 1 ? " (node " + std::to_string(options.node_rank) + " of " +
                                std::to_string(options.nnodes) + ")"
                          : "") +
      (options.run_dir.empty() ? "" : " -> " + options.run_dir));
  for (int restart = 1;; ++restart) {
    dist::LaunchEnd end;
    if (std::optional<TrainSummary> summary = launch_job(options, spec, plan, log, end))
      return *summary;
    if (end.interrupted_by != 0 || end.failure.empty() || restart > options.max_restarts)
      throw_launch_end(end, options.run_dir);
    std::string position;
    options = continue_run(options, &position);
    log("restart " + std::to_string(restart) + " of " + std::to_string(options.max_restarts) +
        " after " + end.failure + ": continuing " + position);
  }
}

}  // namespace

int default_cpu_ranks(int cores, int batch) {
  int ranks = std::clamp(cores, 1, 8);
  while (ranks > 1 && batch > 0 && batch % ranks != 0) --ranks;
  return ranks;
}

TrainSummary run_training(const TrainOptions& request, const Log& log) {
  TrainOptions options = resolved_request(request);  // on resume, the checkpoint's configuration
  check_nosave(options);  // before a launcher would restart workers that refuse it
  const dist::LaunchEnv env = dist::read_launch_env(dist::process_environment());
  // A launched worker may touch CUDA (it is the process that trains); the parent of a spawn
  // must not, so it counts GPUs in a probe child.
  const int gpus = env.launched() ? usable_gpu_count() : dist::count_gpus_without_initializing();
  dist::DeviceSpec spec = device_spec(options, gpus);
  if (!env.launched()) resolve_autobatch(options, spec, spec.ranks, true, log);
  if (options.batch > 0 && options.nproc_per_node <= 0 && options.device.text == "auto" &&
      gpus == 0)
    spec = device_spec(options, gpus);  // the CPU rank count follows the resolved batch
  // --cuda-graph on where it cannot be: refused now, before any worker or file.
  const Device device =
      spec.kind == dist::DeviceKind::cuda ? Device::cuda(spec.cuda_indices[0]) : Device::cpu();
  // (Which backend --backend auto takes is settled when the ranks meet: on a GPU, NCCL, whose
  // collectives are recordable; the Solver refuses any that are not.)
  const std::optional<dist::Backend> backend = backend_of(options.backend);
  const bool communicates = (env.launched() ? env.world_size : spec.ranks * options.nnodes) > 1 ||
                            backend == dist::Backend::nccl;
  records_cuda_graphs(
      options, device, StepGraph::supported(device),
      !communicates ? StepCollectives::none
      : spec.kind == dist::DeviceKind::cuda && (!backend || *backend == dist::Backend::nccl)
          ? StepCollectives::recordable
          : StepCollectives::unrecordable);

  if (env.launched()) {
    if (options.max_restarts > 0)
      throw std::invalid_argument(std::string("--max-restarts restarts bareyolo's own workers; ") +
                                  dist::to_string(env.launcher) +
                                  " launched this process: use its restarts (torchrun "
                                  "--max-restarts; the restarted job continues the run itself)");
    if (env.rank == 0)
      log(std::string("launched by ") + dist::to_string(env.launcher) + ": rank 0 of " +
          std::to_string(env.world_size) +
          " (the launcher owns the processes; --device picks each rank's device, no spawn)");
    return train_rank(options, spec, log);
  }
  // One rank with --max-restarts is a job of one worker: only a launcher can restart it.
  if (spec.wants_spawn(env) || options.nnodes > 1 || options.max_restarts > 0)
    return spawn_ranks(options, spec, log);
  // One process that asked for NCCL gets a real one-rank NCCL communicator: the whole
  // data-parallel path (broadcast, SyncBN, buckets) then runs through NCCL on one GPU.
  std::optional<dist::ProcessGroup> nccl;
  if (backend_of(options.backend) == dist::Backend::nccl)
    nccl = dist::init_process_group(
        env, {.backend = dist::Backend::nccl, .timeout = timeout_of(options), .device = device});
  const bool created = prepare_run(options, 1, log);
  const OwnedRunDir owned(options.run_dir, created, log);
  return train(options,
               RunContext{.run_dir = options.run_dir,
                          .device = device,
                          .group = nccl ? &*nccl : nullptr,
                          .batch = plan_batch(options.batch, 1, options.nbs)},
               log);
}

}  // namespace bareyolo::models
