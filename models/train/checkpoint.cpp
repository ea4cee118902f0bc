// models/train/checkpoint.cpp — see checkpoint.h.
#include "models/train/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <stdexcept>

#include "engine/json_numbers.h"
#include "models/train/run_dir.h"
#include "models/yolo/weights.h"

namespace bareyolo::models {

namespace {

namespace fs = std::filesystem;

// Optimizer buffers as state entries saved flat ([numel]): their shape is their parameter's.
std::vector<StateEntry> optimizer_entries(const CheckpointTensors& tensors) {
  std::vector<StateEntry> entries;
  for (const auto& [name, tensor] : tensors.optimizer)
    entries.push_back({name, tensor, nullptr, {tensor->numel()}});
  return entries;
}

void add_common_metadata(SafetensorsFile& file, int nc, const std::vector<std::string>& names,
                         const std::string& cfg, const std::string& yaml) {
  file.metadata()["format"] = "bareyolo";
  if (!cfg.empty()) file.metadata()["cfg"] = cfg;     // the model yaml the weights belong to
  if (!yaml.empty()) file.metadata()["yaml"] = yaml;  // and its text
  file.metadata()["nc"] = std::to_string(nc);
  std::string joined;
  for (const std::string& n : names) joined += (joined.empty() ? "" : "\n") + n;
  file.metadata()["names"] = joined;  // one per line
}

// The "progress" entry: the trainer's position and the Solver's step counters, one object.
nlohmann::json progress_json(const TrainingProgress& p, const SolverState& s) {
  const EpochProgress& e = p.this_epoch;
  return {{"epoch", p.epoch},
          {"batches_done", e.batches_done},
          {"optimizer_steps", s.optimizer_steps},
          {"last_step_iteration", s.last_step_iteration},
          {"loss_mean", {e.loss_mean[0], e.loss_mean[1], e.loss_mean[2]}},
          {"train_seconds", e.train_seconds},
          {"best_fitness", p.best_fitness},
          {"best_epoch", p.best_epoch},
          {"validations_since_best", p.validations_since_best},
          {"finished", p.finished}};
}

// parse_progress's validations_since_best when the checkpoint predates it.
constexpr int kCountFromHistory = -1;

void parse_progress(const nlohmann::json& j, TrainingProgress& p, SolverState& s) {
  EpochProgress& e = p.this_epoch;
  auto whole = [&](const char* key, auto& target) {
    read_whole_number(j.at(key), target, std::string("progress '") + key + "'");
  };
  whole("epoch", p.epoch);
  whole("batches_done", e.batches_done);
  whole("optimizer_steps", s.optimizer_steps);
  whole("last_step_iteration", s.last_step_iteration);
  for (int k = 0; k < 3; ++k) j.at("loss_mean").at(size_t(k)).get_to(e.loss_mean[k]);
  j.at("train_seconds").get_to(e.train_seconds);
  j.at("best_fitness").get_to(p.best_fitness);
  whole("best_epoch", p.best_epoch);
  p.validations_since_best = kCountFromHistory;
  if (j.contains("validations_since_best"))
    whole("validations_since_best", p.validations_since_best);
  j.at("finished").get_to(p.finished);
}

// --resume of a run that finished: the refusal and what to do instead. Extending a finished
// run is not offered (as in YOLOv5): its learning-rate schedule has ended, and its stripped
// checkpoint holds no optimizer state; more training is a new run from its weights.
[[noreturn]] void refuse_finished_run(const std::string& path, size_t epochs) {
  throw std::invalid_argument(path + ": this run already finished (" + std::to_string(epochs) +
                              " epochs); nothing to resume. To train further, start a new run "
                              "from its weights: --weights " +
                              path);
}

}  // namespace

SafetensorsFile make_weights_file(const std::vector<StateEntry>& weights, int nc,
                                  const std::vector<std::string>& names, const std::string& cfg,
                                  const std::string& yaml) {
  SafetensorsFile file;
  add_state(file, weights);
  add_common_metadata(file, nc, names, cfg, yaml);
  return file;
}

SafetensorsFile make_checkpoint(const CheckpointTensors& tensors, const CheckpointInfo& info) {
  SafetensorsFile file = make_weights_file(tensors.ema, info.nc, info.names, info.cfg, info.yaml);
  add_state(file, tensors.model, kTrainingModelPrefix);
  add_state(file, optimizer_entries(tensors), kOptimizerPrefix);
  std::map<std::string, std::string>& meta = file.metadata();
  meta["checkpoint"] = "1";
  meta["progress"] = progress_json(info.progress, info.solver).dump();
  meta["sampler"] = nlohmann::json{{"epoch", info.progress.epoch},
                                   {"batch", info.progress.this_epoch.batches_done}}
                        .dump();
  meta["rng"] =
      nlohmann::json{{"seed", info.seed}, {"streams", "SampleRng(seed, epoch, sample position)"}}
          .dump();
  meta["ema_updates"] = std::to_string(info.solver.ema_updates);
  meta["optimizer"] = info.solver.optimizer;
  meta["optimizer_steps"] = std::to_string(info.solver.optimizer_updates);
  meta["config"] = info.config_json;
  nlohmann::json history = nlohmann::json::array();
  for (const EpochMetrics& m : info.history)
    history.push_back(nlohmann::json::parse(epoch_metrics_json(m)));
  meta["history"] = history.dump();
  if (info.launch)
    meta["launch"] = nlohmann::json{{"device", info.launch->device},
                                    {"nproc_per_node", info.launch->nproc_per_node},
                                    {"world_size", info.launch->world_size},
                                    {"amp", info.launch->amp},
                                    {"tf32", info.launch->tf32},
                                    {"winograd", info.launch->winograd},
                                    {"bf16_grad_buckets", info.launch->bf16_grad_buckets},
                                    {"cudnn_deterministic", info.launch->cudnn_deterministic}}
                         .dump();
  return file;
}

SafetensorsFile stripped_checkpoint(const SafetensorsFile& checkpoint, const std::string& source) {
  const CheckpointInfo info = read_checkpoint_info(checkpoint, source);
  SafetensorsFile weights;
  for (const TensorRecord& record : checkpoint.records())
    if (record.name.rfind(kTrainingModelPrefix, 0) != 0 &&
        record.name.rfind(kOptimizerPrefix, 0) != 0)
      weights.add(record);
  const std::map<std::string, std::string>& meta = checkpoint.metadata();
  add_common_metadata(weights, info.nc, info.names, meta.count("cfg") ? meta.at("cfg") : "",
                      meta.count("yaml") ? meta.at("yaml") : "");
  weights.metadata()["finished_epochs"] = std::to_string(info.history.size());
  return with_float_dtype(weights, DType::f16);
}

CheckpointInfo read_checkpoint_info(const SafetensorsFile& file, const std::string& source) {
  const std::map<std::string, std::string>& meta = file.metadata();
  if (!meta.count("checkpoint") && meta.count("finished_epochs"))
    refuse_finished_run(source, size_t(file.metadata_integer("finished_epochs", source)));
  if (!meta.count("checkpoint"))
    throw std::invalid_argument(source +
                                " holds weights only, not a training checkpoint; "
                                "resume from a run's weights/last.safetensors, or start a new "
                                "run with --weights " +
                                source);
  auto field = [&](const char* key) -> const std::string& {
    if (!meta.count(key)) throw std::invalid_argument(std::string("no '") + key + "' entry");
    return meta.at(key);
  };
  CheckpointInfo info;
  try {
    parse_progress(nlohmann::json::parse(field("progress")), info.progress, info.solver);
    info.solver.ema_updates = file.metadata_integer("ema_updates", source);
    info.solver.optimizer = field("optimizer");
    info.solver.optimizer_updates = file.metadata_integer("optimizer_steps", source);
    info.config_json = field("config");
    for (const nlohmann::json& m : nlohmann::json::parse(field("history")))
      info.history.push_back(parse_epoch_metrics_json(m.dump()));
    if (info.progress.validations_since_best == kCountFromHistory)
      info.progress.validations_since_best =
          int(std::count_if(info.history.begin(), info.history.end(), [&](const EpochMetrics& m) {
            return m.validated && m.epoch > info.progress.best_epoch;
          }));
    field("nc");
    info.nc = metadata_nc(file, source);  // in 1..kMaxClasses
    field("names");
    info.names = metadata_names(file);
    read_whole_number(nlohmann::json::parse(field("rng")).at("seed"), info.seed, "rng 'seed'");
    if (meta.count("launch")) {
      const nlohmann::json launch = nlohmann::json::parse(meta.at("launch"));
      SavedLaunch saved;
      launch.at("device").get_to(saved.device);
      read_whole_number(launch.at("nproc_per_node"), saved.nproc_per_node,
                        "launch 'nproc_per_node'");
      read_whole_number(launch.at("world_size"), saved.world_size, "launch 'world_size'");
      launch.at("amp").get_to(saved.amp);
      launch.at("tf32").get_to(saved.tf32);
      launch.at("winograd").get_to(saved.winograd);
      launch.at("bf16_grad_buckets").get_to(saved.bf16_grad_buckets);
      if (launch.contains("cudnn_deterministic"))
        launch.at("cudnn_deterministic").get_to(saved.cudnn_deterministic);
      info.launch = saved;
    }
  } catch (const std::exception& e) {
    throw std::invalid_argument(source + ": damaged checkpoint metadata (" + e.what() + ")");
  }
  return info;
}

void restore_checkpoint(const SafetensorsFile& file, const CheckpointTensors& tensors,
                        const std::string& source) {
  // Every name of the three groups is checked before anything is copied (load_state then
  // checks shapes, group by group), so a checkpoint of another model changes nothing.
  std::vector<std::pair<const std::vector<StateEntry>*, std::string>> groups;
  const std::vector<StateEntry> optimizer = optimizer_entries(tensors);
  groups.emplace_back(&tensors.ema, "");
  groups.emplace_back(&tensors.model, kTrainingModelPrefix);
  groups.emplace_back(&optimizer, kOptimizerPrefix);
  for (const auto& [entries, prefix] : groups)
    for (const StateEntry& e : *entries)
      if (!file.contains(prefix + e.name))
        throw std::invalid_argument(source + ": missing '" + prefix + e.name +
                                    "' (a checkpoint of another model, nc, optimizer or "
                                    "--freeze?)");
  for (const auto& [entries, prefix] : groups) load_state(file, *entries, source, prefix);
}

namespace {
// What `file` (a checkpoint at `path`, or its metadata alone) holds, refused when its run
// already finished.
CheckpointInfo resumable_info(const SafetensorsFile& file, const std::string& path) {
  CheckpointInfo info = read_checkpoint_info(file, path);
  if (info.progress.finished) refuse_finished_run(path, info.history.size());
  return info;
}
}  // namespace

Resume open_resume(const std::string& path) {
  Resume resume{SafetensorsFile::load(path), {}};
  resume.info = resumable_info(resume.file, path);
  return resume;
}

// The checkpoint's configuration on `options`, with the changes a resume may make.
void apply_saved_configuration(const CheckpointInfo& info, const std::string& source,
                               TrainOptions& options) {
  const ResumeChanges changes = options.resume_changes;
  options_from_json(info.config_json, options);
  if (changes.epochs && *changes.epochs < options.epochs)
    throw std::invalid_argument(source + ": epochs " + std::to_string(*changes.epochs) +
                                " is fewer than the run's " + std::to_string(options.epochs) +
                                "; a resumed run keeps its epochs or takes more");
  options.epochs = changes.epochs.value_or(options.epochs);
  options.workers = changes.workers.value_or(options.workers);
}

TrainOptions resolved_request(const TrainOptions& request) {
  if (request.resume.empty()) return request;
  TrainOptions options = request;
  // The configuration only: the tensors are the trainer's to load, once.
  const CheckpointInfo info =
      resumable_info(SafetensorsFile::load_metadata(request.resume), request.resume);
  apply_saved_configuration(info, request.resume, options);
  const bool names_devices = request.device.text != "auto" || request.nproc_per_node > 0;
  if (info.launch && !names_devices) {
    options.device = info.launch->device;
    options.nproc_per_node = info.launch->nproc_per_node;
  }
  if (info.launch) {
    options.amp = info.launch->amp;
    options.tf32 = info.launch->tf32;
    options.winograd = info.launch->winograd;
    options.bf16_grad_buckets = info.launch->bf16_grad_buckets;
    options.cudnn_deterministic = info.launch->cudnn_deterministic;
  }
  options.run_dir = run_dir_of_checkpoint(request.resume);
  return options;
}

void check_resolved(const CheckpointInfo& info, const std::string& source,
                    const TrainOptions& options) {
  TrainOptions saved = options;
  apply_saved_configuration(info, source, saved);
  saved.run_dir = options.run_dir;
  if (options_to_json(saved) != options_to_json(options))
    throw std::invalid_argument(source +
                                ": the options differ from the checkpoint's configuration; "
                                "resolve the request with resolved_request() (checkpoint.h)");
}

void check_resume_fits(const CheckpointInfo& info, const std::string& source,
                       const TrainOptions& options, int64_t batches_per_epoch) {
  const std::string optimizer = optimizer_name(options.optimizer);
  if (info.solver.optimizer != optimizer)
    throw std::invalid_argument(source + ": saved by " + info.solver.optimizer +
                                ", but its configuration says " + optimizer);
  const TrainingProgress& saved = info.progress;
  if (saved.this_epoch.batches_done > batches_per_epoch || saved.epoch >= options.epochs)
    throw std::invalid_argument(
        source + ": saved at epoch " + std::to_string(saved.epoch) + " batch " +
        std::to_string(saved.this_epoch.batches_done) + ", but this dataset gives " +
        std::to_string(batches_per_epoch) + " batches per epoch for " +
        std::to_string(options.epochs) +
        " epochs; was the dataset changed since? Start a new run with --weights instead");
}

std::vector<std::string> prune_periodic_checkpoints(const std::string& weights_dir, int keep) {
  std::vector<std::string> removed;
  if (keep <= 0 || !fs::is_directory(weights_dir)) return removed;
  static const std::regex periodic(R"((epoch|step)[0-9]+\.safetensors)");
  std::vector<std::pair<fs::file_time_type, fs::path>> found;
  for (const fs::directory_entry& entry : fs::directory_iterator(weights_dir))
    if (entry.is_regular_file() && std::regex_match(entry.path().filename().string(), periodic))
      found.emplace_back(entry.last_write_time(), entry.path());
  std::sort(found.begin(), found.end());
  for (size_t i = 0; i + size_t(keep) < found.size(); ++i) {
    fs::remove(found[i].second);
    removed.push_back(found[i].second.string());
  }
  return removed;
}

}  // namespace bareyolo::models
