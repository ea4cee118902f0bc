// models/train/trainer.cpp — see trainer.h. Set-up first (Trainer's constructor): the
// configuration (the request, or the checkpoint's on --resume), data, model, the parameter
// arena, data parallelism, optimizer, EMA, schedule, the checkpoint's state, the outputs. Then
// the loop (Trainer::run, Trainer::train_epoch), which reads top to bottom:
//     batches: loader -> model.forward(train) -> YOLOv5's loss -> model.backward ->
//              [every `accumulate` batches] clip to norm 10 -> optimizer step -> EMA update
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
#include <set>

#include "data/dataset.h"                    // defines: read_dataset_yaml, open_split
#include "data/loader.h"                     // defines: Loader (threaded, deterministic)
#include "engine/atomic_file.h"              // defines: write_file_atomically
#include "engine/distributed/comm/gather.h"  // defines: allgather_strings
#include "engine/distributed/comm/traced_communicator.h"  // defines: dist::traced
#include "engine/distributed/ddp/data_parallel.h"         // defines: start_data_parallel, Reducer
#include "engine/distributed/launch/process_group.h"      // defines: ProcessGroup
#include "engine/optim/adamw.h"                           // defines: AdamW
#include "engine/optim/clip.h"                            // defines: clip_gradient_norm
#include "engine/optim/ema.h"                             // defines: ModelEma
#include "engine/optim/sgd.h"                             // defines: Sgd
#include "engine/parameter_arena.h"                       // defines: ParameterArena
#include "engine/trace.h"                                 // defines: trace::Range, trace::enable
#include "engine/trace_analysis.h"                        // defines: trace::step_shares
#include "kernels/cpu/winograd.h"                         // defines: cpu::set_winograd_use
#include "kernels/cuda/runtime/runtime.h"                 // defines: cuda::set_tf32
#include "kernels/route.h"                                // defines: ops::require_kernel
#include "models/loss/head_loss.h"          // defines: head_loss (YOLOv5's loss of the head)
#include "models/train/checkpointer.h"      // defines: Checkpointer (the snapshot step)
#include "models/train/early_stopping.h"    // defines: EarlyStopping
#include "models/train/epoch_validation.h"  // defines: validate_with_loss (sharded)
#include "models/train/image_caches.h"      // defines: use_image_caches (--cache)
#include "models/train/outputs/console.h"   // defines: console_logger
#include "models/train/outputs/progress.h"  // defines: progress_bar
#include "models/train/outputs/report.h"    // defines: report_writer
#include "models/train/run_dir.h"           // defines: run_dir_of_checkpoint
#include "models/train/step.h"              // defines: forward_backward (one rank's micro-batch)
#include "models/yolo/weights.h"            // defines: load_state

namespace bareyolo::models {

namespace {

using Clock = std::chrono::steady_clock;
using Log = std::function<void(const std::string&)>;

// The optimizer --optimizer names, over YOLOv5's three groups; weight_decay on group 1 only.
std::unique_ptr<Optimizer> make_optimizer(OptimizerKind kind, ParameterArena& arena, double lr0,
                                          double momentum, double weight_decay) {
  if (kind == OptimizerKind::sgd) return std::make_unique<Sgd>(arena, lr0, momentum, weight_decay);
  return std::make_unique<AdamW>(arena, lr0, momentum, weight_decay);
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The element-wise sum over ranks (the global batch's loss from each rank's share of it, say);
// `what` names the all-reduce in the trace.
void sum_over_ranks(dist::Communicator* comm, double* values, int count, const char* what) {
  const trace::Label label(what);
  if (comm) comm->allreduce(dist::CommBuffer::of(values, count), dist::ReduceOp::sum)->wait();
}

// The model's state entries re-pointed at `values` (the EMA's tensors, same order).
std::vector<StateEntry> with_values(std::vector<StateEntry> entries, std::vector<Tensor>& values) {
  for (size_t i = 0; i < entries.size(); ++i) {
    entries[i].value = &values[i];
    entries[i].grad = nullptr;
  }
  return entries;
}

// The request as the trainer takes it: resolved (resolved_request, checkpoint.h) in the run
// directory and with the batch plan the launch resolved (run_context.h).
TrainOptions checked_request(const TrainOptions& request, const RunContext& run,
                             const CheckpointInfo* resumed) {
  if (resumed) check_resolved(*resumed, request.resume, request);
  if (request.epochs < 1 || request.batch < 1 || request.nbs < 1)
    throw std::invalid_argument(
        "epochs, batch and nbs must be positive (got " + std::to_string(request.epochs) + ", " +
        std::to_string(request.batch) + ", " + std::to_string(request.nbs) + ")");
  if (run.run_dir.empty())
    throw std::invalid_argument("RunContext::run_dir is empty; the launch resolves it");
  const BatchPlan plan = plan_batch(request.batch, run.world_size, request.nbs);
  if (run.batch.global != plan.global || run.batch.per_rank != plan.per_rank ||
      run.batch.accumulate != plan.accumulate)
    throw std::invalid_argument(
        "RunContext::batch is not plan_batch(batch=" + std::to_string(request.batch) +
        ", world_size=" + std::to_string(run.world_size) + ", nbs=" + std::to_string(request.nbs) +
        "); the launch resolves it");
  TrainOptions options = request;
  options.run_dir = run.run_dir;
  return options;
}

// Every parameter and gradient in one flat buffer each (the optimizer, the EMA, the clipping
// and the reducer work on them in one pass), the --freeze layers outside the optimised range.
ParameterArena make_arena(const std::vector<StateEntry>& state, int freeze) {
  const std::vector<bool> frozen = frozen_entries(state, freeze);
  std::set<const Tensor*> frozen_values;
  for (size_t i = 0; i < state.size(); ++i)
    if (frozen[i]) frozen_values.insert(state[i].value);
  if (std::none_of(state.begin(), state.end(), [&](const StateEntry& e) {
        return e.trainable() && frozen_values.count(e.value) == 0;
      }))
    throw std::invalid_argument("--freeze " + std::to_string(freeze) +
                                " freezes every parameter; freeze fewer layers");
  return ParameterArena(state, {.frozen = [frozen_values](const StateEntry& e) {
                          return frozen_values.count(e.value) > 0;
                        }});
}

// The initial weights (--weights) loaded into `model` unless a checkpoint will overwrite them;
// its state entries.
std::vector<StateEntry> initial_state(DetectionModel& model, const TrainOptions& options,
                                      bool resuming) {
  if (!options.weights.empty() && !resuming)
    load_state(SafetensorsFile::load(options.weights), model.state(), options.weights);
  return model.state();
}

// YOLOv5: the image size a multiple of the largest stride (at least 32), at least two of it.
int training_image_size(int imgsz, const DetectionModel& model, bool rank0, const Log& log) {
  const int gs = std::max(int(model.strides().back()), 32);
  std::string note;
  const int size = stride_multiple_size(imgsz, gs, 2 * gs, &note);
  if (rank0 && !note.empty()) log("warning: " + note);
  return size;
}

class Trainer {
 public:
  Trainer(const TrainOptions& request, const RunContext& run, const Log& log);
  TrainSummary run();

 private:
  bool train_epoch(int epoch);  // true when --max-steps ended the run inside it
  std::optional<data::Batch> next_batch(data::Loader& loader, double& waited);
  // --trace: records while the optimizer step count is in [trace_begin, trace_end).
  void trace_if_in_window() const;
  void log_traced_epoch(int epoch, size_t first_event) const;
  void write_trace();
  EpochMetrics epoch_metrics(int epoch) const;
  void validate_epoch(int epoch, EpochMetrics& metrics);
  TrainStartInfo start_info() const;
  SafetensorsFile snapshot() const;
  bool sync_bn() const { return options_.sync_bn.value_or(true); }
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
  const data::DatasetConfig data_;
  data::OpenedSplit train_split_, val_split_;  // their datasets take the --cache image caches
  const int nc_;
  const ModelConfig model_config_;
  // The model and the loss live on this rank's device; the metrics are computed on the host.
  DetectionModel model_, ema_model_;
  const std::vector<StateEntry> state_, ema_state_;
  ParameterArena arena_;
  const int imgsz_;
  const data::DistributedSampler sampler_;
  const int64_t batches_;  // per epoch
  const Schedule schedule_;
  const std::unique_ptr<Optimizer> optimizer_;
  ModelEma ema_;
  const LossOptions loss_options_;
  const EarlyStopping stopping_;
  const CheckpointTensors tensors_;
  dist::Communicator* comm_ = nullptr;               // null: one process
  std::unique_ptr<dist::Communicator> traced_comm_;  // --trace: the group's, traced
  std::unique_ptr<dist::Reducer> reducer_;
  TrainingProgress progress_;
  std::vector<EpochMetrics> history_;
  std::vector<double> data_wait_per_rank_;  // the last epoch's, gathered from every rank
  std::vector<TrainCallbacks> callbacks_;   // rank 0's; none on the other ranks
  std::optional<Checkpointer> checkpoints_;
};

Trainer::Trainer(const TrainOptions& request, const RunContext& run, const Log& log)
    : log_(log),
      run_(run),
      resume_(request.resume.empty() ? std::nullopt
                                     : std::optional<Resume>(open_resume(request.resume))),
      options_(checked_request(request, run_, resume_ ? &resume_->info : nullptr)),
      data_(data::read_dataset_yaml(options_.data)),
      train_split_(data::open_split(data_, "train")),
      val_split_(data::open_split(data_, "val")),
      nc_(data_.num_classes()),
      model_config_(load_model_config(options_.cfg)),
      model_(model_config_, {.nc = nc_, .seed = options_.seed, .device = run_.device}),
      ema_model_(model_config_, {.nc = nc_, .seed = options_.seed, .device = run_.device}),
      state_(initial_state(model_, options_, resume_.has_value())),
      ema_state_(ema_model_.state()),
      arena_(make_arena(state_, options_.freeze)),
      imgsz_(training_image_size(options_.imgsz, model_, run_.rank == 0, log)),
      sampler_({.dataset_size = train_split_.dataset.size(),
                .global_batch = run_.batch.global,
                .world_size = run_.world_size,
                .rank = run_.rank,
                .seed = options_.seed}),
      batches_(sampler_.steps_per_epoch()),
      schedule_(options_.schedule, options_.epochs, batches_, run_.batch.global, options_.nbs),
      // Weight decay scaled by batch * accumulate / nbs, as YOLOv5 does.
      optimizer_(make_optimizer(
          options_.optimizer, arena_, options_.schedule.lr0, options_.schedule.momentum,
          options_.weight_decay * run_.batch.global * run_.batch.accumulate / options_.nbs)),
      ema_(arena_, state_, resume_ ? resume_->info.ema_updates : 0),
      loss_options_{scale_loss_gains(options_.loss, model_.num_levels(), nc_, imgsz_), nc_},
      stopping_{options_.patience},
      tensors_{with_values(state_, ema_.values()), state_, optimizer_->state()} {
  cuda::set_tf32(options_.tf32);  // steers GPU convolutions and GEMMs only
  // steers CPU convolutions only
  cpu::set_winograd_use(options_.winograd ? cpu::WinogradUse::kMeasuredRule
                                          : cpu::WinogradUse::kNever);
  model_.graph().set_mixed_precision(options_.amp);
  ops::require_kernel(optimizer_->kernel(), run_.device,
                      std::string("--optimizer ") + optimizer_name(options_.optimizer));
  const bool rank0 = run_.rank == 0;
  if (options_.amp && rank0)
    log("mixed precision (--amp): activations and their gradients in bf16 tensors, computed in "
        "fp32; fp32 weights, statistics and loss (docs/mixed_precision.md)");

  trace_if_in_window();  // a window from step 0 includes the start-up broadcasts

  // ---- data parallelism: identical start, SyncBN, the gradient reducer ----
  if (run_.group && run_.group->communicates()) {
    comm_ = run_.group->comm.get();
    if (!options_.trace.empty()) traced_comm_ = dist::traced(*comm_), comm_ = traced_comm_.get();
    if (rank0)
      log(std::string("communicator: ") + dist::to_string(comm_->backend()) + ", " +
          std::to_string(comm_->world_size()) + " rank(s)");
    const int per_rank = run_.batch.per_rank;
    if (!sync_bn() && per_rank < 16 && rank0)
      log("warning: BatchNorm runs unsynced on " + std::to_string(per_rank) +
          " images per rank (fewer than 16): its statistics are noisy; drop --no-sync-bn");
    reducer_ = dist::start_data_parallel(*comm_, arena_, state_, model_.graph(),
                                         {.sync_batchnorm = sync_bn(),
                                          .bucket_mb = options_.bucket_mb,
                                          .bf16_buckets = options_.bf16_grad_buckets});
  }

  // ---- --cache: the decoded images once per host, mapped by every rank ----
  use_image_caches({.mode = data::parse_cache_mode(options_.cache),
                    .imgsz = imgsz_,
                    .timeout_ms = int64_t(options_.timeout_s * 1000)},
                   {&train_split_, &val_split_}, run_.rank, comm_, log);

  // ---- the run's state: fresh, or everything the checkpoint holds ----
  if (resume_) {
    check_resume_fits(resume_->info, request.resume, options_, batches_);
    restore_checkpoint(resume_->file, tensors_, request.resume);
    optimizer_->set_steps(resume_->info.optimizer_updates);
    progress_ = resume_->info.progress;
    history_ = resume_->info.history;
    resume_->file = {};  // its tensors are copied; free the memory
  }

  // ---- outputs (rank 0): what a person sees, then the user's callbacks, then checkpoints ----
  if (rank0) {
    if (options_.show_progress) callbacks_.push_back(progress_bar(stdout));
    callbacks_.push_back(console_logger(log));
    callbacks_.push_back(report_writer());
  }
  checkpoints_.emplace(
      options_.run_dir,
      CheckpointPolicy{options_.save_steps, options_.save_period, options_.save_total_limit}, rank0,
      [this] { return snapshot(); },
      [this](const std::string& path) { fire(&TrainCallbacks::on_model_save, path); });
  if (rank0) {
    const std::filesystem::path run_dir(options_.run_dir);
    callbacks_.push_back(csv_logger((run_dir / "results.csv").string()));
    callbacks_.push_back(jsonl_logger((run_dir / "results.jsonl").string()));
    callbacks_.insert(callbacks_.end(), options_.callbacks.begin(), options_.callbacks.end());
  }
}

TrainStartInfo Trainer::start_info() const {
  return {.run_dir = options_.run_dir,
          .start_epoch = progress_.epoch,
          .epochs = options_.epochs,
          .history = history_,
          .cfg = options_.cfg,
          .parameters = arena_.parameters(),
          .images = train_split_.dataset.size(),
          .names = data_.names,
          .imgsz = imgsz_,
          .batch = run_.batch.global,
          .accumulate = run_.batch.accumulate,
          .optimizer = optimizer_name(options_.optimizer),
          .resumed = resume_.has_value(),
          .resume_batch = progress_.batches_done,
          .config_json = options_to_json(options_)};
}

SafetensorsFile Trainer::snapshot() const {
  return make_checkpoint(tensors_, {.progress = progress_,
                                    .ema_updates = ema_.updates(),
                                    .optimizer = optimizer_name(options_.optimizer),
                                    .optimizer_updates = optimizer_->steps(),
                                    .config_json = options_to_json(options_),
                                    .history = history_,
                                    .nc = nc_,
                                    .names = data_.names,
                                    .seed = options_.seed,
                                    .cfg = options_.cfg});
}

TrainSummary Trainer::run() {
  fire(&TrainCallbacks::on_train_start, start_info());
  TrainSummary summary{.run_dir = run_.run_dir, .rank0 = run_.rank == 0};
  bool stopped_early = false;
  for (int epoch = progress_.epoch; epoch < options_.epochs && !progress_.finished; ++epoch) {
    const size_t first_event = trace::event_count();
    const bool max_steps_reached = train_epoch(epoch);
    log_traced_epoch(epoch, first_event);
    if (max_steps_reached) break;  // --max-steps: last.safetensors continues mid-epoch
    fire(&TrainCallbacks::on_epoch_end, epoch);

    // ---- validate the EMA (always when this epoch may be the last); fitness; stop early? ----
    EpochMetrics metrics = epoch_metrics(epoch);
    const bool last_epoch = epoch + 1 == options_.epochs;
    if (options_.validate || last_epoch || stopping_.may_stop_after(epoch, progress_))
      validate_epoch(epoch, metrics);
    metrics.fitness = 0.1 * metrics.map50 + 0.9 * metrics.map50_95;
    const bool is_best = metrics.fitness >= progress_.best_fitness;  // YOLOv5 saves best on ties
    stopped_early = stopping_.update(epoch, metrics.fitness, progress_) && !last_epoch;
    history_.push_back(metrics);
    progress_ = {.epoch = epoch + 1,
                 .optimizer_steps = progress_.optimizer_steps,
                 .last_step_iteration = progress_.last_step_iteration,
                 .best_fitness = progress_.best_fitness,
                 .best_epoch = progress_.best_epoch,
                 .finished = stopped_early || last_epoch};
    ++summary.epochs_run;
    summary.last_map50 = metrics.map50, summary.last_map50_95 = metrics.map50_95;
    fire(&TrainCallbacks::on_fit_epoch_end, metrics);
    checkpoints_->after_epoch(epoch, is_best);  // snapshot
  }

  write_trace();

  // ---- the end: final weights when training finished ----
  if (progress_.finished) checkpoints_->final_weights(ema_state_, nc_, data_.names, options_.cfg);
  summary.finished = progress_.finished;
  summary.optimizer_steps = progress_.optimizer_steps;
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

// One epoch of training steps, from where a resumed run left off.
bool Trainer::train_epoch(int epoch) {
  std::vector<data::Step> plan = sampler_.plan_epoch(epoch, imgsz_);
  plan.erase(plan.begin(), plan.begin() + progress_.batches_done);
  data::Loader loader(train_split_.dataset, std::move(plan), epoch,
                      {.imgsz = imgsz_,
                       .augment = true,
                       .hyp = options_.augment,
                       .seed = options_.seed,
                       .workers = loader_workers()});
  fire(&TrainCallbacks::on_train_epoch_start,
       EpochStartInfo{epoch, options_.epochs, batches_, progress_.batches_done});
  optimizer_->zero_grad();  // YOLOv5 drops a partial accumulation at each epoch's start
  const auto epoch_start = Clock::now();
  const double seconds_before = progress_.train_seconds;
  double data_wait_seconds = 0;  // in loader.next(): the input pipeline's share of the steps
  while (std::optional<data::Batch> batch = next_batch(loader, data_wait_seconds)) {
    const int64_t iteration = batch->step + batches_ * epoch;
    const StepSettings settings = schedule_.at(iteration);
    apply(settings, *optimizer_);

    // ---- forward and backward; only an accumulation's last micro-batch communicates ----
    const bool boundary = iteration - progress_.last_step_iteration >= settings.accumulate;
    if (reducer_) reducer_->set_sync(boundary);
    const LossValues loss =
        forward_backward(model_, batch->images_tensor(run_.device), batch_labels(*batch),
                         loss_options_, {comm_, reducer_.get()});
    double items[4] = {loss.box, loss.obj, loss.cls, loss.total};
    sum_over_ranks(comm_, items, 4, "loss items");
    if (!std::isfinite(items[3]))
      throw std::runtime_error("the loss became " + std::to_string(items[3]) + " at epoch " +
                               std::to_string(epoch) + " batch " + std::to_string(batch->step) +
                               "; lower lr0 or check the labels");
    ++progress_.batches_done;
    for (int k = 0; k < 3; ++k)
      progress_.loss_mean[k] +=
          (items[k] - progress_.loss_mean[k]) / double(progress_.batches_done);

    // ---- the update: gradients averaged over the ranks, clipped, applied, averaged into EMA ----
    bool max_steps_reached = false;
    if (boundary) {
      const trace::Range traced(trace::Track::compute, "optimizer step");
      if (reducer_) reducer_->finish();
      clip_gradient_norm(arena_, 10.0);
      optimizer_->step();
      optimizer_->zero_grad();
      ema_.update();
      progress_.last_step_iteration = iteration;
      ++progress_.optimizer_steps;
      max_steps_reached = options_.max_steps > 0 && progress_.optimizer_steps >= options_.max_steps;
    }
    progress_.train_seconds = seconds_before + seconds_since(epoch_start);
    fire(&TrainCallbacks::on_train_batch_end,
         BatchEndInfo{
             .epoch = epoch,
             .batches_done = progress_.batches_done,
             .loss_mean = {progress_.loss_mean[0], progress_.loss_mean[1], progress_.loss_mean[2]},
             .instances = batch->num_targets(),
             .image_size = batch->width,
             .optimizer_steps = progress_.optimizer_steps});
    if (boundary) checkpoints_->after_step(progress_.optimizer_steps, max_steps_reached);
    if (max_steps_reached) return true;
  }
  data_wait_per_rank_.assign(size_t(run_.world_size), 0.0);
  data_wait_per_rank_[size_t(run_.rank)] =
      data_wait_seconds / std::max(1e-9, seconds_since(epoch_start));
  sum_over_ranks(comm_, data_wait_per_rank_.data(), run_.world_size, "data wait");
  return false;
}

// The next batch; the wait for it is added to `waited` and traced ("data wait"), with
// tracing switched for the step it belongs to.
std::optional<data::Batch> Trainer::next_batch(data::Loader& loader, double& waited) {
  trace_if_in_window();
  const trace::Range traced(trace::Track::loader, "data wait");
  const auto wait_start = Clock::now();
  std::optional<data::Batch> batch = loader.next();
  waited += seconds_since(wait_start);
  return batch;
}

void Trainer::trace_if_in_window() const {
  trace::enable(!options_.trace.empty() && progress_.optimizer_steps >= options_.trace_begin &&
                progress_.optimizer_steps < options_.trace_end);
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
  const std::vector<std::string> all =
      comm_ ? dist::allgather_strings(*comm_, mine) : std::vector<std::string>{mine};
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
  const StepSettings last = schedule_.at(batches_ * epoch + batches_ - 1);
  return {.epoch = epoch,
          .train_box = progress_.loss_mean[0],
          .train_obj = progress_.loss_mean[1],
          .train_cls = progress_.loss_mean[2],
          .lr0 = last.bias_lr,
          .lr1 = last.lr,
          .lr2 = last.lr,
          .epoch_seconds = progress_.train_seconds,
          .step_seconds = progress_.train_seconds / double(batches_),
          .data_wait_per_rank = data_wait_per_rank_,
          .data_wait = data_wait_per_rank_.empty() ? 0.0
                                                   : *std::max_element(data_wait_per_rank_.begin(),
                                                                       data_wait_per_rank_.end())};
}

// Sharded validation of the EMA weights: every rank scores its share of the batches with rank
// 0's model (the EMA parameters are the same on every rank; without SyncBN its BatchNorm
// statistics are not, so rank 0's are sent), rank 0 computes the metrics, every rank takes its
// numbers.
void Trainer::validate_epoch(int epoch, EpochMetrics& metrics) {
  const trace::Range traced(trace::Track::compute, "validation");
  for (size_t i = 0; i < ema_state_.size(); ++i) ema_state_[i].value->copy_from(ema_.values()[i]);
  if (comm_ && !sync_bn()) dist::broadcast_buffers(*comm_, ema_state_);
  const int shards = comm_ ? comm_->world_size() : 1;
  auto [result, numbers] =
      validate_with_loss(ema_model_, val_split_.dataset,
                         {.batch = std::max(1, run_.batch.per_rank * 2),
                          .imgsz = imgsz_,
                          .workers = loader_workers(),
                          .shard = shards > 1 ? run_.rank : 0,  // no communicator: validates alone
                          .shards = shards},
                         loss_options_, comm_);
  if (run_.rank == 0)
    fire(&TrainCallbacks::on_val_end,
         ValidationReport{epoch, result.metrics, result.images, result.labels});
  numbers.from_rank0(comm_);
  metrics.precision = numbers.precision, metrics.recall = numbers.recall;
  metrics.map50 = numbers.map50, metrics.map50_95 = numbers.map50_95;
  metrics.val_box = numbers.box, metrics.val_obj = numbers.obj, metrics.val_cls = numbers.cls;
  metrics.validated = true;
}

}  // namespace

std::vector<bool> frozen_entries(const std::vector<StateEntry>& state, int freeze_layers) {
  std::vector<bool> frozen(state.size(), false);
  for (size_t i = 0; i < state.size(); ++i)
    for (int k = 0; k < freeze_layers && !frozen[i]; ++k)
      frozen[i] = state[i].name.rfind("model." + std::to_string(k) + ".", 0) == 0;
  return frozen;
}

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
