// models/train/trainer.cpp — see trainer.h. The run, top to bottom:
//   configuration (the request, or the checkpoint's on --resume) -> data, model, optimizer,
//   EMA (restored from the checkpoint on --resume) -> for each epoch:
//     batches: loader -> model.forward(train) -> YOLOv5's loss -> model.backward ->
//              [every `accumulate` batches] clip to norm 10 -> optimizer step -> EMA update
//              [--save-steps / --max-steps] checkpoint
//     epoch end: validate the EMA -> metrics, fitness, early stopping -> loggers, report ->
//                checkpoints (last, best, periodic)
//   -> weights/final.safetensors when training finished.
#include "models/train/trainer.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <set>
#include <sstream>

#include "data/dataset.h"                    // defines: read_dataset_yaml, open_split
#include "data/loader.h"                     // defines: Loader (threaded, deterministic batches)
#include "engine/distributed/ddp/reducer.h"  // defines: Reducer (averages gradients in buckets)
#include "engine/distributed/launch/process_group.h"  // defines: ProcessGroup (this rank's communicator)
#include "engine/optim/adamw.h"                       // defines: AdamW
#include "engine/optim/clip.h"                        // defines: clip_gradient_norm
#include "engine/optim/ema.h"                         // defines: ModelEma
#include "engine/optim/sgd.h"                         // defines: Sgd
#include "engine/parameter_arena.h"                   // defines: ParameterArena
#include "kernels/cuda/runtime/runtime.h"             // defines: cuda::set_tf32
#include "kernels/route.h"                            // defines: ops::require_kernel
#include "models/eval/validate.h"                     // defines: validate, detect
#include "models/loss/head_loss.h"          // defines: head_loss (YOLOv5's loss of the head)
#include "models/train/checkpoint.h"        // defines: make_checkpoint, restore_checkpoint, ...
#include "models/train/outputs/progress.h"  // defines: ProgressBar
#include "models/train/outputs/report.h"    // defines: write_report_html, validation_table
#include "models/train/run_dir.h"           // defines: run_dir_of_checkpoint
#include "models/train/step.h"              // defines: forward_backward (one rank's micro-batch)
#include "models/yolo/weights.h"            // defines: load_state

namespace bareyolo::models {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Rank 0 alone writes files, prints, draws the progress bar and fires callbacks: every side
// effect of the trainer goes through this gate, so the other ranks compute and stay silent.
class RankZero {
 public:
  explicit RankZero(int rank) : active_(rank == 0) {}
  template <class SideEffect>
  void operator()(SideEffect&& side_effect) const {
    if (active_) side_effect();
  }

 private:
  bool active_;
};

// The optimizer --optimizer names, over YOLOv5's three groups; weight_decay on group 1 only.
std::unique_ptr<Optimizer> make_optimizer(OptimizerKind kind, ParameterArena& arena, double lr0,
                                          double momentum, double weight_decay) {
  if (kind == OptimizerKind::sgd) return std::make_unique<Sgd>(arena, lr0, momentum, weight_decay);
  return std::make_unique<AdamW>(arena, lr0, momentum, weight_decay);
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::vector<LabelRow> batch_labels(const data::Batch& batch) {
  std::vector<LabelRow> labels;
  for (int64_t r = 0; r < batch.num_targets(); ++r) labels.push_back(batch.label(r));
  return labels;
}

// Rank 0's `values` on every rank (rank 0 validates; the others follow its decisions).
void from_rank0(dist::Communicator* comm, std::vector<double>& values) {
  if (comm) comm->broadcast(dist::CommBuffer::of(values.data(), int64_t(values.size())), 0)->wait();
}

// The sum over ranks of each rank's share of the loss: the global batch's loss.
void sum_over_ranks(dist::Communicator* comm, double* values, int count) {
  if (comm) comm->allreduce(dist::CommBuffer::of(values, count), dist::ReduceOp::sum)->wait();
}

struct Validation {
  ValidationResult result;
  double loss[3] = {0, 0, 0};  // box, obj, cls: mean over batches, as YOLOv5's val
};

// YOLOv5's training-time validation of `model`, with the val losses of the same forward.
Validation validate_with_loss(DetectionModel& model, const data::Dataset& dataset,
                              const ValidationOptions& options, const LossOptions& loss_options) {
  Validation validation;
  int64_t batches = 0;
  // The loss, decode and NMS run where the head is: from a GPU only three sums and the kept
  // detections come back.
  auto predict = [&](const data::Batch& batch) {
    const std::vector<Tensor>& head =
        model.forward(batch.images_tensor(model.device()), Mode::eval);
    const LossValues loss =
        head_loss(model, head, batch_labels(batch), loss_options, batch.size).values;
    ++batches;
    validation.loss[0] += loss.box, validation.loss[1] += loss.obj, validation.loss[2] += loss.cls;
    return detect(head, model, options.nms);
  };
  validation.result = validate(dataset, options, predict, int(model.strides().back()));
  for (double& l : validation.loss) l /= double(std::max<int64_t>(batches, 1));
  return validation;
}

// The model's state entries re-pointed at `values` (the EMA's tensors, same order).
std::vector<StateEntry> with_values(std::vector<StateEntry> entries, std::vector<Tensor>& values) {
  for (size_t i = 0; i < entries.size(); ++i) {
    entries[i].value = &values[i];
    entries[i].grad = nullptr;
  }
  return entries;
}

// The options the run uses: the request, or on resume the checkpoint's configuration with
// the request's max_steps, rank, callbacks and display (checkpoint.h says what is saved).
TrainOptions resolve_options(const TrainOptions& request, const CheckpointInfo* resumed) {
  TrainOptions options = request;
  if (resumed) {
    options_from_json(resumed->config_json, options);
    options.run_dir = run_dir_of_checkpoint(request.resume);
  }
  if (options.run_dir.empty())
    throw std::invalid_argument("TrainOptions::run_dir is empty; resolve_run_dir gives one");
  if (options.epochs < 1 || options.batch < 1 || options.nbs < 1)
    throw std::invalid_argument(
        "epochs, batch and nbs must be positive (got " + std::to_string(options.epochs) + ", " +
        std::to_string(options.batch) + ", " + std::to_string(options.nbs) + ")");
  return options;
}

fs::path weights_path(const TrainOptions& options, const std::string& file) {
  return fs::path(options.run_dir) / "weights" / file;
}

}  // namespace

std::vector<bool> frozen_entries(const std::vector<StateEntry>& state, int freeze_layers) {
  std::vector<bool> frozen(state.size(), false);
  for (size_t i = 0; i < state.size(); ++i)
    for (int k = 0; k < freeze_layers && !frozen[i]; ++k)
      frozen[i] = state[i].name.rfind("model." + std::to_string(k) + ".", 0) == 0;
  return frozen;
}

TrainSummary train(const TrainOptions& request, const std::function<void(const std::string&)>& log,
                   dist::ProcessGroup* group) {
  const auto start = Clock::now();

  // ---- configuration: the request, or the checkpoint's when resuming ----
  std::optional<SafetensorsFile> checkpoint;
  std::optional<CheckpointInfo> resumed;
  if (!request.resume.empty()) {
    checkpoint = SafetensorsFile::load(request.resume);
    resumed = read_checkpoint_info(*checkpoint, request.resume);
    if (resumed->progress.finished)
      throw std::invalid_argument(request.resume + ": this run already finished (" +
                                  std::to_string(resumed->history.size()) +
                                  " epochs); nothing "
                                  "to resume. Start a new run with --weights " +
                                  request.resume);
  }
  const TrainOptions options = resolve_options(request, resumed ? &*resumed : nullptr);
  const RankZero rank0(options.rank);
  cuda::set_tf32(options.tf32);  // steers GPU convolutions and GEMMs only

  // ---- data and model ----
  const data::DatasetConfig config = data::read_dataset_yaml(options.data);
  const data::OpenedSplit train_split = data::open_split(config, "train");
  const data::OpenedSplit val_split = data::open_split(config, "val");
  const int nc = config.num_classes();
  const ModelConfig model_config = load_model_config(options.cfg);
  // The model and the loss live on this rank's device; the metrics are computed on the host.
  const Device device = options.device_of_rank;
  DetectionModel model(model_config, {.nc = nc, .seed = options.seed, .device = device});
  DetectionModel ema_model(model_config, {.nc = nc, .seed = options.seed, .device = device});
  if (!options.weights.empty() && !checkpoint)
    load_state(SafetensorsFile::load(options.weights), model.state(), options.weights);
  const std::vector<StateEntry> state = model.state();
  const std::vector<bool> frozen = frozen_entries(state, options.freeze);
  std::set<const Tensor*> frozen_values;
  for (size_t i = 0; i < state.size(); ++i)
    if (frozen[i]) frozen_values.insert(state[i].value);
  // Every parameter and gradient moves into one flat buffer each (the optimizer, the EMA, the
  // clipping and the reducer work on them in one pass).
  ParameterArena arena(
      state, {.frozen = [&](const StateEntry& e) { return frozen_values.count(e.value) > 0; }});
  if (arena.optimised() == 0)
    throw std::invalid_argument("--freeze " + std::to_string(options.freeze) +
                                " freezes every parameter; freeze fewer layers");

  // ---- data parallelism: identical start, SyncBN, the gradient reducer ----
  dist::Communicator* comm =
      group && group->communicates() ? group->comm.get() : nullptr;  // null: one process
  std::optional<dist::Reducer> reducer;
  if (comm) {
    rank0([&] {
      log(std::string("communicator: ") + dist::to_string(comm->backend()) + ", " +
          std::to_string(comm->world_size()) + " rank(s)");
    });
    dist::broadcast_state(*comm, arena, state);
    const bool sync_bn = options.sync_bn.value_or(true);
    if (sync_bn) model.set_sync_batchnorm(comm);
    const int per_rank = options.batch / options.world_size;
    if (!sync_bn && per_rank < 16)
      rank0([&] {
        log("warning: BatchNorm runs unsynced on " + std::to_string(per_rank) +
            " images per rank (fewer than 16): its statistics are noisy; drop --no-sync-bn");
      });
    reducer.emplace(arena, model.graph(), *comm,
                    dist::ReducerOptions{.bucket_mb = options.bucket_mb});
  }
  const DataParallel parallel{comm, reducer ? &*reducer : nullptr};

  // YOLOv5: image size a multiple of the largest stride (at least 2 strides).
  const int gs = std::max(int(model.strides().back()), 32);
  const int imgsz = std::max((options.imgsz + gs - 1) / gs * gs, 2 * gs);
  const data::DistributedSampler sampler({.dataset_size = train_split.dataset.size(),
                                          .global_batch = options.batch,
                                          .world_size = options.world_size,
                                          .rank = options.rank,
                                          .seed = options.seed});
  const int64_t batches = sampler.steps_per_epoch();
  const Schedule schedule(options.schedule, options.epochs, batches, options.batch, options.nbs);
  // Weight decay scaled by batch * accumulate / nbs, as YOLOv5 does.
  const double decay = options.weight_decay * options.batch * schedule.accumulate() / options.nbs;
  const std::unique_ptr<Optimizer> optimizer = make_optimizer(
      options.optimizer, arena, options.schedule.lr0, options.schedule.momentum, decay);
  ops::require_kernel(optimizer->kernel(), device,
                      std::string("--optimizer ") + optimizer_name(options.optimizer));
  ModelEma ema(arena, state, resumed ? resumed->ema_updates : 0);
  const LossOptions loss_options{scale_loss_gains(options.loss, model.num_levels(), nc, imgsz), nc};
  const std::vector<StateEntry> ema_state = ema_model.state();

  // ---- the run's state: fresh, or everything the checkpoint holds ----
  const CheckpointTensors tensors{with_values(state, ema.values()), state, optimizer->state()};
  TrainingProgress progress;
  std::vector<EpochMetrics> history;
  if (checkpoint) {
    if (resumed->optimizer != optimizer_name(options.optimizer))
      throw std::invalid_argument(request.resume + ": saved by " + resumed->optimizer +
                                  ", but "
                                  "its configuration says " +
                                  optimizer_name(options.optimizer));
    restore_checkpoint(*checkpoint, tensors, request.resume);
    optimizer->set_steps(resumed->optimizer_updates);
    progress = resumed->progress;
    history = resumed->history;
    if (progress.batches_done > batches || progress.epoch >= options.epochs)
      throw std::invalid_argument(
          request.resume + ": saved at epoch " + std::to_string(progress.epoch) + " batch " +
          std::to_string(progress.batches_done) + ", but this dataset gives " +
          std::to_string(batches) + " batches per epoch for " + std::to_string(options.epochs) +
          " epochs; was the dataset changed since? Start a new run with --weights instead");
    checkpoint.reset();  // its tensors are copied; free the memory
  }

  // ---- outputs (rank 0): run directory, loggers, checkpoints ----
  std::vector<TrainCallbacks> callbacks;
  rank0([&] {
    fs::create_directories(fs::path(options.run_dir) / "weights");
    callbacks.push_back(csv_logger((fs::path(options.run_dir) / "results.csv").string()));
    callbacks.push_back(jsonl_logger((fs::path(options.run_dir) / "results.jsonl").string()));
    callbacks.insert(callbacks.end(), options.callbacks.begin(), options.callbacks.end());
  });
  auto fire = [&](auto hook, const auto&... args) {
    rank0([&] {
      for (const TrainCallbacks& c : callbacks)
        if (c.*hook) (c.*hook)(args...);
    });
  };
  const std::string config_json = options_to_json(options);
  // Writes the current state to each of `files` (under weights/) atomically.
  auto save_checkpoints = [&](const std::vector<std::string>& files) {
    rank0([&] {
      if (files.empty()) return;
      const SafetensorsFile file =
          make_checkpoint(tensors, {.progress = progress,
                                    .ema_updates = ema.updates(),
                                    .optimizer = optimizer_name(options.optimizer),
                                    .optimizer_updates = optimizer->steps(),
                                    .config_json = config_json,
                                    .history = history,
                                    .nc = nc,
                                    .names = config.names,
                                    .seed = options.seed,
                                    .cfg = options.cfg});
      for (const std::string& name : files) {
        const std::string path = weights_path(options, name).string();
        file.save(path);
        fire(&TrainCallbacks::on_model_save, path);
      }
      if (options.save_total_limit > 0)
        prune_periodic_checkpoints(weights_path(options, "").string(), options.save_total_limit);
    });
  };

  fire(&TrainCallbacks::on_train_start,
       TrainStartInfo{options.run_dir, progress.epoch, options.epochs, history});
  rank0([&] {
    std::ostringstream line;
    line << (resumed ? "resuming " : "training ") << options.cfg << " (" << model.parameter_count()
         << " parameters) on " << train_split.dataset.size() << " images, " << nc << " classes, "
         << imgsz << " px, batch " << options.batch << ", accumulate " << schedule.accumulate()
         << ", " << optimizer_name(options.optimizer) << ", " << options.epochs << " epochs -> "
         << options.run_dir;
    if (resumed)
      line << " (from epoch " << progress.epoch + 1 << ", batch " << progress.batches_done << ")";
    log(line.str());
  });

  TrainSummary summary;
  summary.run_dir = options.run_dir;
  summary.rank0 = options.rank == 0;
  bool max_steps_reached = false;
  for (int epoch = progress.epoch; epoch < options.epochs; ++epoch) {
    // ---- the epoch's batches, from where a resumed run left off ----
    std::vector<data::Step> plan = sampler.plan_epoch(epoch, imgsz);
    plan.erase(plan.begin(), plan.begin() + progress.batches_done);
    data::Loader loader(train_split.dataset, std::move(plan), epoch,
                        {.imgsz = imgsz,
                         .augment = true,
                         .hyp = options.augment,
                         .seed = options.seed,
                         .workers = loader_workers(options)});
    std::optional<ProgressBar> bar;
    rank0([&] {
      if (!options.show_progress) return;
      std::printf("%s\n", ProgressBar::header().c_str());
      bar.emplace(stdout, is_terminal(stdout),
                  std::to_string(epoch + 1) + "/" + std::to_string(options.epochs), batches,
                  progress.batches_done);
    });
    optimizer->zero_grad();  // YOLOv5 drops a partial accumulation at each epoch's start
    const auto epoch_start = Clock::now();
    const double seconds_before = progress.train_seconds;
    while (std::optional<data::Batch> batch = loader.next()) {
      const int64_t iteration = batch->step + batches * epoch;
      const StepSettings settings = schedule.at(iteration);
      apply(settings, *optimizer);

      // Only the last micro-batch of an accumulation communicates (no_sync on the others).
      const bool boundary = iteration - progress.last_step_iteration >= settings.accumulate;
      if (reducer) reducer->set_sync(boundary);
      const LossValues loss = forward_backward(model, batch->images_tensor(device),
                                               batch_labels(*batch), loss_options, parallel);
      double items[4] = {loss.box, loss.obj, loss.cls, loss.total};
      sum_over_ranks(comm, items, 4);
      if (!std::isfinite(items[3]))
        throw std::runtime_error("the loss became " + std::to_string(items[3]) + " at epoch " +
                                 std::to_string(epoch) + " batch " + std::to_string(batch->step) +
                                 "; lower lr0 or check the labels");
      ++progress.batches_done;
      for (int k = 0; k < 3; ++k)
        progress.loss_mean[k] += (items[k] - progress.loss_mean[k]) / double(progress.batches_done);

      std::vector<std::string> step_checkpoints;
      if (boundary) {
        if (reducer) reducer->finish();  // every gradient is now the mean over the ranks
        clip_gradient_norm(arena, 10.0);
        optimizer->step();
        optimizer->zero_grad();
        ema.update();
        progress.last_step_iteration = iteration;
        ++progress.optimizer_steps;
        const bool periodic =
            options.save_steps > 0 && progress.optimizer_steps % options.save_steps == 0;
        max_steps_reached = options.max_steps > 0 && progress.optimizer_steps >= options.max_steps;
        if (periodic)
          step_checkpoints.push_back("step" + std::to_string(progress.optimizer_steps) +
                                     ".safetensors");
        if (periodic || max_steps_reached) step_checkpoints.push_back("last.safetensors");
      }
      progress.train_seconds = seconds_before + seconds_since(epoch_start);
      if (bar)
        bar->update(progress.batches_done,
                    {progress.loss_mean[0], progress.loss_mean[1], progress.loss_mean[2],
                     batch->num_targets(), batch->width});
      save_checkpoints(step_checkpoints);
      if (max_steps_reached) break;
    }
    if (bar) bar->finish();
    if (max_steps_reached) break;  // mid-epoch: last.safetensors continues from here
    fire(&TrainCallbacks::on_epoch_end, epoch);

    // ---- validate the EMA; fitness and early stopping (YOLOv5's EarlyStopping) ----
    const bool patience_ran_out =
        options.patience > 0 && epoch - progress.best_epoch >= options.patience;
    const bool final_epoch = epoch + 1 == options.epochs || patience_ran_out;
    const StepSettings last_settings = schedule.at(batches * epoch + batches - 1);
    EpochMetrics metrics{.epoch = epoch,
                         .train_box = progress.loss_mean[0],
                         .train_obj = progress.loss_mean[1],
                         .train_cls = progress.loss_mean[2],
                         .lr0 = last_settings.bias_lr,
                         .lr1 = last_settings.lr,
                         .lr2 = last_settings.lr,
                         .epoch_seconds = progress.train_seconds,
                         .step_seconds = progress.train_seconds / double(batches)};
    // Rank 0 validates; the others take its metrics, so that best, patience and the stop
    // decision are the same on every rank and all leave the loop together.
    std::optional<Validation> validation;
    if (options.validate || final_epoch) {
      rank0([&] {
        for (size_t i = 0; i < ema_state.size(); ++i)
          ema_state[i].value->copy_from(ema.values()[i]);
        validation =
            validate_with_loss(ema_model, val_split.dataset,
                               {.batch = std::max(1, options.batch / options.world_size * 2),
                                .imgsz = imgsz,
                                .workers = loader_workers(options)},
                               loss_options);
      });
      std::vector<double> shared(7, 0.0);
      if (validation) {
        const DetectionMetrics& m = validation->result.metrics;
        shared = {m.mean_precision,    m.mean_recall,      m.map50, m.map50_95, validation->loss[0],
                  validation->loss[1], validation->loss[2]};
      }
      from_rank0(comm, shared);
      metrics.precision = shared[0], metrics.recall = shared[1];
      metrics.map50 = shared[2], metrics.map50_95 = shared[3];
      metrics.val_box = shared[4], metrics.val_obj = shared[5], metrics.val_cls = shared[6];
      metrics.validated = true;
    }
    metrics.fitness = 0.1 * metrics.map50 + 0.9 * metrics.map50_95;
    const bool is_best = metrics.fitness >= progress.best_fitness;  // YOLOv5 saves best on ties
    if (metrics.fitness > progress.best_fitness) {                  // EarlyStopping: strict
      progress.best_fitness = metrics.fitness;
      progress.best_epoch = epoch;
    }
    const bool stop_early = options.patience > 0 && epoch - progress.best_epoch >= options.patience;
    history.push_back(metrics);
    progress = {.epoch = epoch + 1,
                .optimizer_steps = progress.optimizer_steps,
                .last_step_iteration = progress.last_step_iteration,
                .best_fitness = progress.best_fitness,
                .best_epoch = progress.best_epoch,
                .finished = stop_early || epoch + 1 == options.epochs};
    ++summary.epochs_run;
    summary.last_map50 = metrics.map50, summary.last_map50_95 = metrics.map50_95;

    // ---- report the epoch, then checkpoints ----
    rank0([&] {
      if (validation)
        log(validation_table(validation->result.metrics, validation->result.images,
                             validation->result.labels, config.names));
      std::ostringstream line;
      line.precision(4);
      line << "epoch " << epoch + 1 << "/" << options.epochs << "  box " << metrics.train_box
           << "  obj " << metrics.train_obj << "  cls " << metrics.train_cls << "  mAP50 "
           << metrics.map50 << "  mAP50-95 " << metrics.map50_95 << "  (" << seconds_since(start)
           << " s)";
      log(line.str());
      write_report_html((fs::path(options.run_dir) / "report.html").string(), history,
                        "bareyolo train: " + options.run_dir, config_json);
    });
    fire(&TrainCallbacks::on_fit_epoch_end, metrics);
    std::vector<std::string> files = {"last.safetensors"};
    if (is_best) files.push_back("best.safetensors");
    if (options.save_period > 0 && (epoch + 1) % options.save_period == 0)
      files.push_back("epoch" + std::to_string(epoch + 1) + ".safetensors");
    save_checkpoints(files);
    if (stop_early && epoch + 1 < options.epochs)
      rank0([&] {
        log("stopping early: no improvement in the last " + std::to_string(options.patience) +
            " epochs (best at epoch " + std::to_string(progress.best_epoch + 1) + ")");
      });
    if (progress.finished) break;
  }

  // ---- the end: final weights when training finished ----
  if (progress.finished)
    rank0([&] {
      const std::string best = weights_path(options, "best.safetensors").string();
      load_state(SafetensorsFile::load(best), ema_state, best);
      const std::string final_path = weights_path(options, "final.safetensors").string();
      make_weights_file(ema_state, nc, config.names, options.cfg).save(final_path);
      fire(&TrainCallbacks::on_model_save, final_path);
    });
  else
    rank0([&] {
      log("stopped after " + std::to_string(progress.optimizer_steps) + " optimizer steps " +
          "(--max-steps); continue with --resume " +
          weights_path(options, "last.safetensors").string());
    });
  summary.finished = progress.finished;
  summary.optimizer_steps = progress.optimizer_steps;
  summary.best_fitness = progress.best_fitness;
  for (const EpochMetrics& m : history)
    if (m.epoch == progress.best_epoch)
      summary.best_map50 = m.map50, summary.best_map50_95 = m.map50_95;
  summary.seconds = seconds_since(start);
  fire(&TrainCallbacks::on_train_end,
       TrainEndInfo{options.run_dir, summary.epochs_run, summary.finished, summary.best_fitness});
  return summary;
}

}  // namespace bareyolo::models
