// models/train/trainer.cpp — see trainer.h. Set-up first (Trainer's constructor): the
// configuration (the request, or the checkpoint's on --resume), data, models, the job's
// communicator, a new run's initial weights and AutoAnchor's anchors, the Solver (the step's
// arena, optimizer, EMA, schedule and reducer), the checkpoint's state, the outputs. Then the loop
// (Trainer::run, Trainer::train_epoch), which reads top to bottom:
//     batches: loader (samples, and the targets matched to the grids, on its threads)
//              -> solver.step (forward, YOLOv5's loss, backward; every `accumulate`
//              batches the update: clip, optimizer step, EMA) -> the previous step's loss read
//              (one step late: the host never waits for the step it just queued)
//              -> [snapshot] step checkpoints
//     epoch end: validate the EMA -> metrics, fitness, early stopping -> [snapshot] checkpoints
//   -> weights/final.safetensors when training finished.
// Everything a person sees (progress bar, log lines, report.html, results.csv/jsonl) is a
// callback that rank 0 registers (callbacks.h, outputs/); the loop only fires the hooks.
#include "models/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <utility>

#include "data/dataset.h"                    // defines: read_dataset_yaml, open_split
#include "data/image_upload.h"               // defines: ImageUploader (beside the compute)
#include "data/loader.h"                     // defines: Loader (threaded, deterministic)
#include "data/train_batches.h"              // defines: training_plan (--rect, --multi-scale)
#include "engine/atomic_file.h"              // defines: write_file_atomically
#include "engine/distributed/comm/gather.h"  // defines: allgather_strings
#include "engine/distributed/comm/traced_communicator.h"  // defines: dist::traced
#include "engine/distributed/ddp/data_parallel.h"         // defines: broadcast_buffers
#include "engine/distributed/launch/process_group.h"      // defines: ProcessGroup
#include "engine/trace.h"                                 // defines: trace::Range, trace::enable
#include "engine/trace_analysis.h"                        // defines: trace::step_shares
#include "kernels/step_graph.h"                           // defines: StepGraph::supported
#include "kernels/step_guard.h"                           // defines: step_guard::count
#include "models/eval/plots.h"                            // defines: write_val_batch_pictures
#include "models/loss/head_loss.h"                        // defines: TargetMatcher
#include "models/train/autoanchor.h"                      // defines: fit_run_anchors (AutoAnchor)
#include "models/train/checkpointer.h"           // defines: Checkpointer (the snapshot step)
#include "models/train/early_stopping.h"         // defines: EarlyStopping
#include "models/train/epoch_validation.h"       // defines: validate_with_loss (sharded)
#include "models/train/image_caches.h"           // defines: use_image_caches (--cache)
#include "models/train/outputs/console.h"        // defines: console_logger
#include "models/train/outputs/plots.h"          // defines: plots_writer
#include "models/train/outputs/progress.h"       // defines: progress_bar
#include "models/train/outputs/report.h"         // defines: report_writer
#include "models/train/outputs/settings_yaml.h"  // defines: write_settings_yamls
#include "models/train/outputs/tensorboard.h"    // defines: tensorboard_writer
#include "models/train/run_dir.h"                // defines: run_dir_of_checkpoint
#include "models/train/run_model.h"              // defines: run_model_config
#include "models/train/solver.h"                 // defines: Solver (the step and its state)
#include "models/yolo/weights.h"                 // defines: load_state

namespace bareyolo::models {

namespace {

// The collectives of the step of a job that `group` joins (none: one process, launched or not,
// that talks to nobody: job_communicator's rule).
StepCollectives step_collectives(const dist::ProcessGroup* group) {
  if (!group || !group->communicates()) return StepCollectives::none;
  return group->comm->records_in_cuda_graphs() ? StepCollectives::recordable
                                               : StepCollectives::unrecordable;
}

using Clock = std::chrono::steady_clock;
using Log = std::function<void(const std::string&)>;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The element-wise sum over ranks (every rank's share of the epoch's time waiting for data, say);
// `what` names the all-reduce in the trace and in its fingerprint.
void sum_over_ranks(dist::Communicator* comm, double* values, int count, const char* what) {
  const trace::Label label(what);
  if (comm) comm->allreduce(dist::CommBuffer::of(values, count), dist::ReduceOp::sum, what)->wait();
}

// A step whose loss the device may still be computing: the loop reads it one step late, after
// queuing the next, so that the host never waits for the step it has just queued.
struct UnreadStep {
  // The global batch's loss (StepOutcome::loss), its copy to the host queued right behind the
  // step: reading it waits for this step, not for the next one queued after it.
  std::unique_ptr<LossReadback> loss;
  int epoch = 0;
  data::Batch batch;  // kept for on_train_batch_end
  int64_t optimizer_steps = 0;
};

// --resume's checkpoint, opened once; nothing without --resume.
std::optional<Resume> open_resume_if_asked(const std::string& resume) {
  if (resume.empty()) return std::nullopt;
  return open_resume(resume);
}

// The request as the trainer takes it: resolved (resolved_request, checkpoint.h) in the run
// directory and with the batch plan the launch resolved (run_context.h), its --amp and
// --channels-last for the run's device (resolved_for, options.h).
TrainOptions checked_request(const TrainOptions& request, const RunContext& run,
                             const std::optional<Resume>& resume) {
  if (resume) check_resolved(resume->info, request.resume, request);
  if (request.epochs < 1 || request.batch < 1 || request.nbs < 1)
    throw std::invalid_argument(
        "epochs, batch and nbs must be positive (got " + std::to_string(request.epochs) + ", " +
        std::to_string(request.batch) + ", " + std::to_string(request.nbs) + ")");
  if (request.max_steps < 0)
    throw std::invalid_argument("max_steps " + std::to_string(request.max_steps) +
                                " must be >= 0 (0: no limit)");
  check_hyp(request);
  check_nosave(request);
  if (run.run_dir.empty())
    throw std::invalid_argument("RunContext::run_dir is empty; the launch resolves it");
  const BatchPlan plan = plan_batch(request.batch, run.world_size, request.nbs);
  if (run.batch.global != plan.global || run.batch.per_rank != plan.per_rank ||
      run.batch.accumulate != plan.accumulate)
    throw std::invalid_argument(
        "RunContext::batch is not plan_batch(batch=" + std::to_string(request.batch) +
        ", world_size=" + std::to_string(run.world_size) + ", nbs=" + std::to_string(request.nbs) +
        "); the launch resolves it");
  TrainOptions options = resolved_for(request, abilities_of(run.device));
  options.run_dir = run.run_dir;
  return options;
}

// The dataset's config and its two splits (their datasets take the --cache image caches).
struct TrainingData {
  data::DatasetConfig config;
  data::OpenedSplit train, val;
  int nc() const { return config.num_classes(); }
};
// --single-cls: both splits as one class (verified against the dataset's own classes first).
TrainingData open_training_data(const TrainOptions& options) {
  data::DatasetConfig config = data::read_dataset_yaml(options.data);
  data::OpenedSplit train = data::open_split(config, "train", {.max_pixels = options.max_pixels});
  data::OpenedSplit val = data::open_split(config, "val", {.max_pixels = options.max_pixels});
  if (options.single_cls) {
    config.names = data::single_class_names(config.names);
    train.dataset = data::as_single_class(train.dataset);
    val.dataset = data::as_single_class(val.dataset);
  }
  return {std::move(config), std::move(train), std::move(val)};
}

// `model` with the initial weights (--weights). As YOLOv5 fine-tunes: every tensor whose name
// and shape match is copied, the others (the class rows of another nc) keep their
// initialisation; anchors only when the model is the weights' own (a --cfg names its own
// anchors, the hyp file's `anchors` asks for new ones).
void load_initial_weights(DetectionModel& model, const TrainOptions& options, bool rank0,
                          const Log& log) {
  if (options.weights.empty()) return;
  const std::vector<StateEntry> state = model.state();
  const bool own_anchors = options.cfg.empty() && options.anchors == 0;
  const size_t transferred = transfer_state(load_weights_file(options.weights), state,
                                            options.weights, own_anchors ? "" : "anchor");
  if (rank0)
    log("Transferred " + std::to_string(transferred) + "/" + std::to_string(state.size()) +
        " items from " + options.weights);
}

// `model` as a new run starts training it: the initial weights, then the anchors AutoAnchor
// fits to the labels (autoanchor.h); a resumed run's checkpoint overwrites both.
DetectionModel& starting_model(DetectionModel& model, const TrainOptions& options,
                               const TrainingData& data, int imgsz, bool resuming,
                               const RunContext& run, dist::Communicator* comm, const Log& log) {
  if (resuming) return model;
  load_initial_weights(model, options, run.rank == 0, log);
  fit_run_anchors(model, data.train.dataset,
                  {.imgsz = imgsz, .anchor_t = options.loss.anchor_t, .seed = options.seed},
                  options.autoanchor, run.rank, comm, log);
  return model;
}

// The model yaml the run's weights carry: the run's, with the anchors the model trains with
// where they are not the yaml's own (AutoAnchor's, or those of --weights).
std::string weights_yaml(const ModelConfig& config, const DetectionModel& model) {
  const std::vector<std::vector<double>> anchors = model.pixel_anchors();
  return anchors == config.anchors ? config.yaml_text : yaml_text_with_anchors(config, anchors);
}

// YOLOv5's gs: the model's largest stride, at least 32.
int grid_stride(const DetectionModel& model) { return std::max(int(model.strides().back()), 32); }

// YOLOv5: the image size a multiple of the largest stride (at least 32), at least two of it.
int training_image_size(int imgsz, const DetectionModel& model, bool rank0, const Log& log) {
  const int gs = grid_stride(model);
  std::string note;
  const int size = stride_multiple_size(imgsz, gs, 2 * gs, &note);
  if (rank0 && !note.empty()) log("warning: " + note);
  return size;
}

// SyncBatchNorm when distributed: on unless --no-sync-bn (TrainOptions::sync_bn unset is on).
bool sync_bn(const TrainOptions& options) { return options.sync_bn.value_or(true); }

// The Solver's options from the run's: YOLOv5's schedule over the sampler's batches, the
// update rule, the loss for the model's head, the device switches, data parallelism.
SolverOptions solver_options(const TrainOptions& options, const RunContext& run,
                             int64_t batches_per_epoch, const LossOptions& loss) {
  return {.optimizer = options.optimizer,
          .schedule = options.schedule,
          .weight_decay = options.weight_decay,
          .freeze = options.freeze,
          .epochs = options.epochs,
          .batches_per_epoch = batches_per_epoch,
          .batch = run.batch.global,
          .nbs = options.nbs,
          .loss = loss,
          .tf32 = options.tf32,
          .winograd = options.winograd,
          .amp = mixed_precision(options),
          .cudnn_deterministic = options.cudnn_deterministic,
          .cuda_graph = records_cuda_graphs(options, run.device, StepGraph::supported(run.device),
                                            step_collectives(run.group))
                            ? options.cuda_graph
                            : CudaGraphMode::off,
          .channels_last = channels_last(options),
          .sync_bn = sync_bn(options),
          .bucket_mb = options.bucket_mb,
          .bf16_grad_buckets = options.bf16_grad_buckets};
}

class Trainer {
 public:
  Trainer(const TrainOptions& request, const RunContext& run, const Log& log);
  TrainSummary run();

 private:
  bool train_epoch(int epoch);  // true when --max-steps ended the run inside it
  // The unread step's loss into the epoch's running means, checked, and on_train_batch_end.
  void read_unread_step();
  std::optional<data::Batch> next_batch(data::Loader& loader, double& waited);
  dist::Communicator* job_communicator();
  // --trace: records while the optimizer step count is in [trace_begin, trace_end).
  void trace_if_in_window(int64_t optimizer_steps) const;
  void log_traced_epoch(int epoch, size_t first_event) const;
  void write_trace();
  std::unique_ptr<data::Loader> training_loader(int first) const;
  EpochMetrics epoch_metrics(int epoch) const;
  void validate_epoch(int epoch, EpochMetrics& metrics);
  TrainStartInfo start_info() const;
  SafetensorsFile snapshot();
  // Runs a Checkpointer call, its seconds added to checkpoint_seconds_.
  template <class Write>
  void timed_checkpoint(const Write& write) {
    const Clock::time_point start = Clock::now();
    write();
    checkpoint_seconds_ += seconds_since(start);
  }
  int loader_workers() const {
    return models::loader_workers(options_.workers, run_.device, run_.batch.per_rank);
  }
  template <class Hook, class... Args>
  void fire(Hook hook, const Args&... args) const {
    for (const TrainCallbacks& c : callbacks_)
      if (c.*hook) (c.*hook)(args...);
  }

  const Clock::time_point start_ = Clock::now();
  const Log log_;
  const RunContext run_;
  std::optional<Resume> resume_;
  const TrainOptions options_;
  TrainingData data_;
  const ModelConfig model_config_;
  // The model and the loss live on this rank's device; the metrics are computed on the host.
  DetectionModel model_, ema_model_;  // the one trained, and the one validated (EMA weights)
  const std::vector<StateEntry> ema_state_;
  const int imgsz_;
  const data::DistributedSampler sampler_;
  const int64_t batches_;  // per epoch
  const LossOptions loss_options_;
  std::unique_ptr<dist::Communicator> traced_comm_;  // --trace: the group's, traced
  dist::Communicator* const comm_;                   // null: one process
  Solver solver_;
  std::string weights_yaml_;  // the model yaml the checkpoints carry
  const EarlyStopping stopping_;
  TrainingProgress progress_;
  std::vector<EpochMetrics> history_;
  std::vector<double> data_wait_per_rank_;  // the last epoch's, gathered from every rank
  double host_waits_per_step_ = 0;          // the last epoch's, this rank's
  double checkpoint_seconds_ = 0;           // in the Checkpointer since the last epoch record
  std::vector<TrainCallbacks> callbacks_;   // rank 0's; none on the other ranks
  std::optional<Checkpointer> checkpoints_;
  std::optional<UnreadStep> unread_step_;  // the latest step, until its loss is read
  std::unique_ptr<data::Loader> loader_;   // of every training epoch, made at the first
  // Each batch's images to the device, the copy overlapping the step before (its two buffers
  // kept across epochs, as the loader is).
  data::ImageUploader uploader_{run_.device};
};

Trainer::Trainer(const TrainOptions& request, const RunContext& run, const Log& log)
    : log_(log),
      run_(run),
      resume_(open_resume_if_asked(request.resume)),
      options_(checked_request(request, run_, resume_)),
      data_(open_training_data(options_)),
      model_config_(run_model_config(options_)),
      model_(model_config_, {.nc = data_.nc(), .seed = options_.seed, .device = run_.device}),
      ema_model_(model_config_, {.nc = data_.nc(), .seed = options_.seed, .device = run_.device}),
      ema_state_(ema_model_.state()),
      imgsz_(training_image_size(options_.imgsz, model_, run_.rank == 0, log)),
      sampler_({.dataset_size = data_.train.dataset.size(),
                .global_batch = run_.batch.global,
                .world_size = run_.world_size,
                .rank = run_.rank,
                .seed = options_.seed,
                .shuffle = !options_.rect,  // YOLOv5: --rect trains in aspect-ratio order
                .order = data::training_order(data_.train.dataset, options_.rect)}),
      batches_(sampler_.steps_per_epoch()),
      loss_options_{scale_loss_gains(options_.loss, model_.num_levels(), data_.nc(), imgsz_),
                    data_.nc()},
      comm_(job_communicator()),
      solver_(
          starting_model(model_, options_, data_, imgsz_, resume_.has_value(), run_, comm_, log_),
          solver_options(options_, run_, batches_, loss_options_), comm_),
      stopping_{options_.patience} {
  const bool rank0 = run_.rank == 0;
  if (mixed_precision(options_) && rank0)
    log("mixed precision (--amp): activations and their gradients in bf16 tensors, computed in "
        "fp32; fp32 weights, statistics and loss (docs/mixed_precision.md)");

  // ---- --cache: the decoded images once per host, mapped by every rank ----
  use_image_caches({.mode = data::parse_cache_mode(options_.cache),
                    .imgsz = imgsz_,
                    .timeout_ms = int64_t(options_.timeout_s * 1000)},
                   {&data_.train, &data_.val}, run_.rank, comm_, log);

  // ---- the run's state: fresh, or everything the checkpoint holds ----
  if (resume_) {
    check_resume_fits(resume_->info, request.resume, options_, batches_);
    const std::optional<SavedLaunch>& launch = resume_->info.launch;
    if (rank0 && launch && launch->world_size != run_.world_size)
      log("note: the run was started on " + std::to_string(launch->world_size) +
          " rank(s) (--device " + launch->device + "), it continues on " +
          std::to_string(run_.world_size) +
          ": its numbers will differ in the last bits from a run that was not interrupted");
    solver_.restore(*resume_, request.resume);
    progress_ = resume_->info.progress;
    history_ = resume_->info.history;
    resume_->file = {};  // its tensors are copied; free the memory
  }
  weights_yaml_ = weights_yaml(model_config_, model_);

  // ---- outputs (rank 0): what a person sees, then the user's callbacks, then checkpoints ----
  if (rank0) {
    if (options_.show_progress) callbacks_.push_back(progress_bar(stdout));
    callbacks_.push_back(console_logger(log));
    // The pictures first: report.html embeds those drawn at the end.
    if (options_.plots) callbacks_.push_back(plots_writer(data_.train.dataset));
    callbacks_.push_back(report_writer());
    if (options_.tensorboard) callbacks_.push_back(tensorboard_writer());
  }
  checkpoints_.emplace(
      options_.run_dir,
      CheckpointPolicy{options_.save_steps, options_.save_period, options_.save_total_limit,
                       options_.nosave},
      rank0, [this] { return snapshot(); },
      [this](const std::string& path) { fire(&TrainCallbacks::on_model_save, path); });
  if (rank0) {
    write_settings_yamls(options_, options_.run_dir);  // hyp.yaml, opt.yaml: to diff runs
    const std::filesystem::path run_dir(options_.run_dir);
    callbacks_.push_back(csv_logger((run_dir / "results.csv").string()));
    callbacks_.push_back(jsonl_logger((run_dir / "results.jsonl").string()));
    callbacks_.insert(callbacks_.end(), options_.callbacks.begin(), options_.callbacks.end());
  }
}

// The job's communicator (null: one process), traced under --trace, and what a user should
// know of it; tracing starts here when its window opens at step 0, to show the start-up
// broadcasts.
dist::Communicator* Trainer::job_communicator() {
  trace_if_in_window(0);
  if (!run_.group || !run_.group->communicates()) return nullptr;
  dist::Communicator* comm = run_.group->comm.get();
  if (run_.group->watched)  // a failing collective leaves this rank's last ones here
    run_.group->watched->record_flights_in(
        (std::filesystem::path(options_.run_dir) / "flight").string());
  if (!options_.trace.empty()) traced_comm_ = dist::traced(*comm), comm = traced_comm_.get();
  if (run_.rank != 0) return comm;
  log_(std::string("communicator: ") + dist::to_string(comm->backend()) + ", " +
       std::to_string(comm->world_size()) + " rank(s)");
  const int per_rank = run_.batch.per_rank;
  if (!sync_bn(options_) && per_rank < 16)
    log_("warning: BatchNorm runs unsynced on " + std::to_string(per_rank) +
         " images per rank (fewer than 16): its statistics are noisy; drop --no-sync-bn");
  return comm;
}

TrainStartInfo Trainer::start_info() const {
  return {.run_dir = options_.run_dir,
          .start_epoch = progress_.epoch,
          .epochs = options_.epochs,
          .history = history_,
          .cfg = options_.cfg,
          .parameters = solver_.arena().parameter_count(),
          .images = data_.train.dataset.size(),
          .names = data_.config.names,
          .imgsz = imgsz_,
          .batch = run_.batch.global,
          .accumulate = run_.batch.accumulate,
          .optimizer = optimizer_name(options_.optimizer),
          .resumed = resume_.has_value(),
          .resume_batch = progress_.this_epoch.batches_done,
          .config_json = options_to_json(options_)};
}

SafetensorsFile Trainer::snapshot() {
  // A checkpoint holds every step taken, its loss counted: the host waits for the latest step
  // here, as it waits for the weights it copies.
  read_unread_step();
  return make_checkpoint(
      solver_.checkpoint_tensors(),
      {.progress = progress_,
       .solver = solver_.state(),
       .config_json = options_to_json(options_),
       .history = history_,
       .nc = data_.nc(),
       .names = data_.config.names,
       .seed = options_.seed,
       .cfg = options_.cfg,
       .yaml = weights_yaml_,
       .launch = SavedLaunch{options_.device.text, options_.nproc_per_node, run_.world_size,
                             mixed_precision(options_), options_.tf32, options_.winograd,
                             options_.bf16_grad_buckets, options_.cudnn_deterministic}});
}

TrainSummary Trainer::run() {
  fire(&TrainCallbacks::on_train_start, start_info());
  TrainSummary summary{.run_dir = run_.run_dir, .rank0 = run_.rank == 0};
  bool stopped_early = false;
  Clock::time_point last_record = Clock::now();  // of the last epoch record (EpochMetrics)
  for (int epoch = progress_.epoch; epoch < options_.epochs && !progress_.finished; ++epoch) {
    const size_t first_event = trace::event_count();
    const bool max_steps_reached = train_epoch(epoch);
    log_traced_epoch(epoch, first_event);
    if (max_steps_reached) break;  // --max-steps: last.safetensors continues mid-epoch
    // The checkpoint files asked for until here are reported before the epoch's hooks.
    timed_checkpoint([&] { checkpoints_->wait(); });
    fire(&TrainCallbacks::on_epoch_end, epoch);

    // ---- validate the EMA (every epoch, or the last); fitness; stop early? ----
    EpochMetrics metrics = epoch_metrics(epoch);
    const bool last_epoch = epoch + 1 == options_.epochs;
    if (options_.validate || last_epoch) {
      const Clock::time_point validation_start = Clock::now();
      validate_epoch(epoch, metrics);
      metrics.val_seconds = seconds_since(validation_start);
    }
    bool is_best = false;  // an epoch that was not validated has no fitness to compare
    if (metrics.validated) {
      metrics.fitness = 0.1 * metrics.map50 + 0.9 * metrics.map50_95;
      is_best = metrics.fitness >= progress_.best_fitness;  // YOLOv5 saves best on ties
      stopped_early = stopping_.update(epoch, metrics.fitness, progress_) && !last_epoch;
    }
    metrics.checkpoint_seconds = std::exchange(checkpoint_seconds_, 0.0);
    metrics.epoch_seconds = seconds_since(std::exchange(last_record, Clock::now()));
    history_.push_back(metrics);
    progress_.epoch = epoch + 1;
    progress_.this_epoch = {};  // the next epoch starts at its first batch
    progress_.finished = stopped_early || last_epoch;
    ++summary.epochs_run;
    summary.last_map50 = metrics.map50, summary.last_map50_95 = metrics.map50_95;
    fire(&TrainCallbacks::on_fit_epoch_end, metrics);
    timed_checkpoint([&] { checkpoints_->after_epoch(epoch, is_best, progress_.finished); });
  }

  checkpoints_->wait();  // every checkpoint on disk before the end reads them
  write_trace();
  solver_.save_algorithm_choices();  // with the shapes met after the first step (validation's)
  for (const std::string& note : solver_.take_notes()) log_("note: " + note);

  // ---- the end: final weights when training finished ----
  if (progress_.finished)
    checkpoints_->final_weights(ema_state_, data_.nc(), data_.config.names, options_.cfg,
                                weights_yaml_);
  summary.finished = progress_.finished;
  summary.optimizer_steps = solver_.optimizer_steps();
  summary.best_fitness = progress_.best_fitness;
  for (const EpochMetrics& m : history_)
    if (m.epoch == progress_.best_epoch)
      summary.best_map50 = m.map50, summary.best_map50_95 = m.map50_95;
  summary.seconds = seconds_since(start_);
  fire(&TrainCallbacks::on_train_end, TrainEndInfo{.run_dir = options_.run_dir,
                                                   .epochs_run = summary.epochs_run,
                                                   .finished = summary.finished,
                                                   .best_fitness = summary.best_fitness,
                                                   .optimizer_steps = summary.optimizer_steps,
                                                   .stopped_early = stopped_early,
                                                   .best_epoch = progress_.best_epoch,
                                                   .patience = options_.patience,
                                                   .trace = options_.trace});
  return summary;
}

// The loader of every epoch from `first` (from where a resumed run left off in it) to the last:
// it goes on into the next epoch's batches while the trainer ends one (loader.h).
std::unique_ptr<data::Loader> Trainer::training_loader(int first) const {
  const data::TrainBatchOptions batches{.imgsz = imgsz_,
                                        .stride = grid_stride(model_),
                                        .rect = options_.rect,
                                        .multi_scale = options_.multi_scale,
                                        .seed = options_.seed};
  const int64_t skipped = progress_.this_epoch.batches_done;
  auto plan = [&dataset = data_.train.dataset, &sampler = sampler_, batches, first,
               skipped](int64_t epoch) {
    std::vector<data::Step> steps = data::training_plan(dataset, sampler, epoch, batches);
    if (epoch == first) steps.erase(steps.begin(), steps.begin() + skipped);
    return steps;
  };
  return std::make_unique<data::Loader>(
      data_.train.dataset, data::EpochPlans{first, options_.epochs, plan},
      data::LoaderOptions{.imgsz = imgsz_,
                          .augment = true,
                          .hyp = options_.augment,
                          .rect = options_.rect,
                          .seed = options_.seed,
                          .workers = loader_workers(),
                          .match_targets = TargetMatcher(model_, solver_.options().loss)});
}

// One epoch of training steps, from where a resumed run left off.
bool Trainer::train_epoch(int epoch) {
  EpochProgress& done = progress_.this_epoch;
  if (!loader_) loader_ = training_loader(epoch);
  data::Loader& loader = *loader_;
  fire(&TrainCallbacks::on_train_epoch_start,
       EpochStartInfo{epoch, options_.epochs, batches_, done.batches_done});
  solver_.drop_accumulation();  // YOLOv5 drops a partial accumulation at each epoch's start
  const auto epoch_start = Clock::now();
  const double seconds_before = done.train_seconds;
  const double checkpoint_seconds_before = checkpoint_seconds_;
  double data_wait_seconds = 0;  // in loader.next(): the input pipeline's share of the steps
  const uint64_t host_waits_before = step_guard::count(step_guard::Event::host_wait);
  const int64_t steps_before = solver_.optimizer_steps();
  auto count_host_waits = [&] {  // per optimizer step of the epoch
    host_waits_per_step_ =
        double(step_guard::count(step_guard::Event::host_wait) - host_waits_before) /
        double(std::max<int64_t>(1, solver_.optimizer_steps() - steps_before));
  };
  while (std::optional<data::Batch> batch = next_batch(loader, data_wait_seconds)) {
    // ---- forward, loss, backward; at an accumulation's end the update (solver.h) ----
    const StepOutcome step = solver_.step(uploader_.images_tensor(*batch), batch->labels(),
                                          batch->step + batches_ * epoch, &*batch->matched);
    auto loss = std::make_unique<LossReadback>(step.loss);
    for (const std::string& note : solver_.take_notes()) log_("note: " + note);
    read_unread_step();  // the previous step's, while the device runs this one
    const int64_t steps = solver_.optimizer_steps();
    unread_step_ = UnreadStep{std::move(loss), epoch, std::move(*batch), steps};
    const bool max_steps_reached =
        step.updated && options_.max_steps > 0 && steps >= options_.max_steps;
    done.train_seconds = seconds_before + seconds_since(epoch_start) -
                         (checkpoint_seconds_ - checkpoint_seconds_before);
    if (step.updated) timed_checkpoint([&] { checkpoints_->after_step(steps, max_steps_reached); });
    if (max_steps_reached) {
      read_unread_step();
      count_host_waits();
      return true;
    }
  }
  read_unread_step();
  count_host_waits();
  data_wait_per_rank_.assign(size_t(run_.world_size), 0.0);
  data_wait_per_rank_[size_t(run_.rank)] =
      data_wait_seconds / std::max(1e-9, seconds_since(epoch_start));
  sum_over_ranks(comm_, data_wait_per_rank_.data(), run_.world_size, "data wait");
  return false;
}

void Trainer::read_unread_step() {
  if (!unread_step_) return;
  const UnreadStep step = std::move(*unread_step_);
  unread_step_.reset();
  const LossValues loss = step.loss->read();
  if (!std::isfinite(loss.total))
    throw std::runtime_error("the loss became " + std::to_string(loss.total) + " at epoch " +
                             std::to_string(step.epoch) + " batch " +
                             std::to_string(step.batch.step) + "; lower lr0 or check the labels");
  EpochProgress& done = progress_.this_epoch;
  ++done.batches_done;
  const double items[3] = {loss.box, loss.obj, loss.cls};
  for (int k = 0; k < 3; ++k)
    done.loss_mean[k] += (items[k] - done.loss_mean[k]) / double(done.batches_done);
  fire(&TrainCallbacks::on_train_batch_end,
       BatchEndInfo{.epoch = step.epoch,
                    .batches_done = done.batches_done,
                    .loss_mean = {done.loss_mean[0], done.loss_mean[1], done.loss_mean[2]},
                    .instances = step.batch.num_targets(),
                    .image_size = step.batch.input_width,
                    .optimizer_steps = step.optimizer_steps,
                    .batch = &step.batch});
}

// The next batch; the wait for it is added to `waited` and traced ("data wait"), with
// tracing switched for the step it belongs to.
std::optional<data::Batch> Trainer::next_batch(data::Loader& loader, double& waited) {
  trace_if_in_window(solver_.optimizer_steps());
  const trace::Range traced(trace::Track::loader, "data wait");
  const auto wait_start = Clock::now();
  std::optional<data::Batch> batch = loader.next();
  waited += seconds_since(wait_start);
  return batch;
}

void Trainer::trace_if_in_window(int64_t optimizer_steps) const {
  trace::enable(!options_.trace.empty() && optimizer_steps >= options_.trace_begin &&
                optimizer_steps < options_.trace_end);
}

// Rank 0's reading of its own trace of the epoch: how much of the gradient all-reduce time
// backward hid, and how long the loader kept it waiting.
void Trainer::log_traced_epoch(int epoch, size_t first_event) const {
  if (run_.rank != 0) return;
  const trace::StepShares shares = trace::step_shares(trace::events_since(first_event));
  if (shares.steps == 0) return;
  char line[200];
  std::snprintf(line, sizeof line,
                "trace: epoch %d, %d traced step(s): %.0f%% of the gradient all-reduce time "
                "hidden behind backward, loader waits %.1f%% of the time",
                epoch, shares.steps, 100 * shares.hidden_communication, 100 * shares.loader_wait);
  log_(line);
}

// Every rank's events to rank 0 (the collective runs untraced), which writes them as one
// Chrome trace.
void Trainer::write_trace() {
  if (options_.trace.empty()) return;
  trace::enable(false);
  const std::string mine = trace::chrome_trace_json({trace::take_events()});
  const std::vector<std::string> all = comm_ ? dist::allgather_strings(*comm_, mine, "trace gather")
                                             : std::vector<std::string>{mine};
  if (run_.rank != 0) return;
  std::vector<std::vector<trace::Event>> ranks;
  for (const std::string& theirs : all)
    ranks.push_back(trace::events_from_chrome_json(theirs).at(0));
  const std::string json = trace::chrome_trace_json(ranks);
  write_file_atomically(options_.trace,
                        {std::span(reinterpret_cast<const uint8_t*>(json.data()), json.size())});
  log_("trace: " + std::to_string(ranks.size()) + " rank(s) in " + options_.trace +
       " (open it in https://ui.perfetto.dev or chrome://tracing)");
}

// The epoch's training numbers: running loss means, the groups' lr at its last batch, times.
EpochMetrics Trainer::epoch_metrics(int epoch) const {
  const StepSettings last = solver_.schedule().at(batches_ * epoch + batches_ - 1);
  const EpochProgress& done = progress_.this_epoch;
  return {.epoch = epoch,
          .train_box = done.loss_mean[0],
          .train_obj = done.loss_mean[1],
          .train_cls = done.loss_mean[2],
          .lr0 = last.bias_lr,
          .lr1 = last.lr,
          .lr2 = last.lr,
          .train_seconds = done.train_seconds,
          .step_seconds = done.train_seconds / double(batches_),
          .data_wait_per_rank = data_wait_per_rank_,
          .data_wait = data_wait_per_rank_.empty() ? 0.0
                                                   : *std::max_element(data_wait_per_rank_.begin(),
                                                                       data_wait_per_rank_.end()),
          .host_waits = host_waits_per_step_};
}

// Sharded validation of the EMA weights: every rank scores its share of the batches with rank
// 0's model (the EMA parameters are the same on every rank; without SyncBN its BatchNorm
// statistics are not, so rank 0's are sent), rank 0 computes the metrics, every rank takes its
// numbers.
void Trainer::validate_epoch(int epoch, EpochMetrics& metrics) {
  const trace::Range traced(trace::Track::compute, "validation");
  for (size_t i = 0; i < ema_state_.size(); ++i)
    ema_state_[i].value->copy_from(solver_.ema_values()[i]);
  if (comm_ && !sync_bn(options_)) dist::broadcast_buffers(*comm_, ema_state_);
  const int shards = comm_ ? comm_->world_size() : 1;
  ValidationOptions validation{.batch = std::max(1, run_.batch.per_rank * 2),
                               .imgsz = imgsz_,
                               .workers = loader_workers(),
                               .shard = shards > 1 ? run_.rank : 0,  // no communicator: alone
                               .shards = shards};
  if (options_.plots && run_.rank == 0)  // rank 0's share starts with the first batch
    validation.on_first_batch = [this](const data::Batch& batch,
                                       const std::vector<std::vector<Detection>>& detections) {
      write_val_batch_pictures(options_.run_dir, batch, detections, data_.config.names);
    };
  auto [result, numbers] =
      validate_with_loss(ema_model_, data_.val.dataset, validation, loss_options_, comm_);
  if (run_.rank == 0)
    fire(&TrainCallbacks::on_val_end,
         ValidationReport{epoch, result.metrics, result.images, result.labels, result.confusion});
  numbers.from_rank0(comm_);
  metrics.precision = numbers.precision, metrics.recall = numbers.recall;
  metrics.map50 = numbers.map50, metrics.map50_95 = numbers.map50_95;
  metrics.val_box = numbers.box, metrics.val_obj = numbers.obj, metrics.val_cls = numbers.cls;
  metrics.validated = true;
}

}  // namespace

TrainSummary train(const TrainOptions& request, const RunContext& run,
                   const std::function<void(const std::string&)>& log) {
  return Trainer(request, run, log).run();
}

TrainSummary train(const TrainOptions& request,
                   const std::function<void(const std::string&)>& log) {
  const TrainOptions options = resolved_request(request);
  return train(
      options,
      RunContext{.run_dir = options.run_dir, .batch = plan_batch(options.batch, 1, options.nbs)},
      log);
}

}  // namespace bareyolo::models
