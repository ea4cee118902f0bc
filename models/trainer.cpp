// models/trainer.cpp — see trainer.h. The step, top to bottom:
//   loader -> images tensor -> model.forward(train) -> build_targets (labels only) ->
//   yolo_loss (+ head gradients) -> model.backward -> [every `accumulate` batches]
//   clip to norm 10 -> SGD (groups' lr/momentum from the schedule) -> zero_grad -> EMA.
#include "models/trainer.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "data/dataset.h"
#include "data/loader.h"
#include "engine/optim/ema.h"
#include "engine/optim/sgd.h"
#include "models/head_loss.h"
#include "models/validate.h"
#include "models/weights.h"

namespace bareyolo::models {

namespace {

namespace fs = std::filesystem;

std::vector<LabelRow> batch_labels(const data::Batch& batch) {
  std::vector<LabelRow> labels;
  for (int64_t r = 0; r < batch.num_targets(); ++r) {
    const float* row = batch.targets.data() + r * 6;
    labels.push_back({int(row[0]), row[1], row[2], row[3], row[4], row[5]});
  }
  return labels;
}

// Forward, loss and backward of one batch; returns the loss (box, obj, cls as YOLOv5
// reports them).
LossValues train_batch(DetectionModel& model, const data::Batch& batch,
                       const LossOptions& loss_options) {
  const std::vector<Tensor>& head = model.forward(batch.images_tensor(), Mode::train);
  HeadLoss loss = head_loss(model, head, batch_labels(batch), loss_options, batch.size);
  model.backward(loss.gradients);
  return loss.values;
}

void save_weights(const std::vector<StateEntry>& state, const std::string& path, int nc,
                  const std::vector<std::string>& names) {
  SafetensorsFile file;
  add_state(file, state);
  file.metadata()["format"] = "bareyolo";
  file.metadata()["nc"] = std::to_string(nc);
  std::string joined;
  for (const std::string& n : names) joined += (joined.empty() ? "" : "\n") + n;
  file.metadata()["names"] = joined;  // one per line
  file.save(path);
}

}  // namespace

TrainSummary train(const TrainOptions& options,
                   const std::function<void(const std::string&)>& log) {
  const auto start = std::chrono::steady_clock::now();
  const data::DatasetConfig config = data::read_dataset_yaml(options.data);
  const data::OpenedSplit train_split = data::open_split(config, "train");
  const data::OpenedSplit val_split = data::open_split(config, "val");
  const int nc = config.num_classes();
  const ModelConfig model_config = load_model_config(options.cfg);
  DetectionModel model(model_config, {.nc = nc, .seed = options.seed});
  DetectionModel ema_model(model_config, {.nc = nc, .seed = options.seed});
  if (!options.weights.empty())
    load_state(SafetensorsFile::load(options.weights), model.state(), options.weights);
  const std::vector<StateEntry> state = model.state(), ema_state = ema_model.state();

  // YOLOv5: image size a multiple of the largest stride (at least 2 strides).
  const int gs = std::max(int(model.strides().back()), 32);
  const int imgsz = std::max((options.imgsz + gs - 1) / gs * gs, 2 * gs);
  const data::DistributedSampler sampler(
      {.dataset_size = train_split.dataset.size(), .global_batch = options.batch,
       .seed = options.seed});
  const int64_t batches = sampler.steps_per_epoch();
  const Schedule schedule(options.schedule, options.epochs, batches, options.batch, options.nbs);
  // Weight decay scaled by batch * accumulate / nbs, as YOLOv5 does.
  const double decay =
      options.weight_decay * options.batch * schedule.accumulate() / options.nbs;
  Sgd sgd(state, options.schedule.lr0, options.schedule.momentum, decay);
  ModelEma ema(state);
  const LossOptions loss_options{scale_loss_gains(options.loss, model.num_levels(), nc, imgsz), nc};

  fs::create_directories(fs::path(options.run_dir) / "weights");
  std::ofstream csv(fs::path(options.run_dir) / "results.csv");
  csv << "epoch,train/box_loss,train/obj_loss,train/cls_loss,metrics/precision,metrics/recall,"
         "metrics/mAP_0.5,metrics/mAP_0.5:0.95,x/lr0,x/lr1,x/lr2\n";
  log("training " + options.cfg + " (" + std::to_string(model.parameter_count()) +
      " parameters) on " + std::to_string(train_split.dataset.size()) + " images, " +
      std::to_string(nc) + " classes, " + std::to_string(imgsz) + " px, batch " +
      std::to_string(options.batch) + ", accumulate " + std::to_string(schedule.accumulate()) +
      ", " + std::to_string(options.epochs) + " epochs -> " + options.run_dir);

  TrainSummary summary;
  int64_t last_step_iteration = -1, best_epoch = 0;
  summary.best_fitness = -1;
  for (int epoch = 0; epoch < options.epochs; ++epoch) {
    data::Loader loader(train_split.dataset, sampler.plan_epoch(epoch, imgsz), epoch,
                        {.imgsz = imgsz, .augment = true, .hyp = options.augment,
                         .seed = options.seed, .workers = options.workers});
    sgd.zero_grad();  // YOLOv5 drops a partial accumulation at each epoch's start
    double mean[3] = {0, 0, 0};
    int64_t seen = 0;
    StepSettings settings{};
    bool stop = false;
    while (std::optional<data::Batch> batch = loader.next()) {
      const int64_t iteration = batch->step + batches * epoch;
      settings = schedule.at(iteration);
      sgd.groups()[Sgd::kBiases].lr = settings.bias_lr;
      for (int g : {Sgd::kWeights, Sgd::kNormWeights}) sgd.groups()[size_t(g)].lr = settings.lr;
      for (SgdGroup& g : sgd.groups()) g.momentum = settings.momentum;

      const LossValues loss = train_batch(model, *batch, loss_options);
      if (!std::isfinite(loss.total))
        throw std::runtime_error("the loss became " + std::to_string(loss.total) +
                                 " at epoch " + std::to_string(epoch) + " batch " +
                                 std::to_string(batch->step) + "; lower lr0 or check the labels");
      const double items[3] = {loss.box, loss.obj, loss.cls};
      ++seen;
      for (int k = 0; k < 3; ++k) mean[k] += (items[k] - mean[k]) / double(seen);

      if (iteration - last_step_iteration >= settings.accumulate) {
        clip_gradient_norm(state, 10.0);
        sgd.step();
        sgd.zero_grad();
        ema.update(state);
        last_step_iteration = iteration;
        ++summary.optimizer_steps;
        if (options.max_steps > 0 && summary.optimizer_steps >= options.max_steps) {
          stop = true;
          break;
        }
      }
    }
    // Validate the EMA weights.
    const bool last_epoch = stop || epoch + 1 == options.epochs;
    for (size_t i = 0; i < ema_state.size(); ++i) ema_state[i].value->copy_from(ema.values()[i]);
    DetectionMetrics metrics;
    if (options.validate || last_epoch) {
      ValidationOptions val;
      val.batch = options.batch * 2;
      val.imgsz = imgsz;
      val.workers = options.workers;
      metrics = validate(ema_model, val_split.dataset, val).metrics;
    }
    const double fitness = 0.1 * metrics.map50 + 0.9 * metrics.map50_95;
    summary.epochs_run = epoch + 1;
    summary.last_map50 = metrics.map50;
    summary.last_map50_95 = metrics.map50_95;
    save_weights(ema_state, (fs::path(options.run_dir) / "weights" / "last.safetensors").string(),
                 nc, config.names);
    if (fitness > summary.best_fitness) {  // strict, as YOLOv5's EarlyStopping
      summary.best_fitness = fitness;
      summary.best_map50 = metrics.map50;
      summary.best_map50_95 = metrics.map50_95;
      best_epoch = epoch;
      save_weights(ema_state,
                   (fs::path(options.run_dir) / "weights" / "best.safetensors").string(), nc,
                   config.names);
    }
    csv << epoch << ',' << mean[0] << ',' << mean[1] << ',' << mean[2] << ','
        << metrics.mean_precision << ',' << metrics.mean_recall << ',' << metrics.map50 << ','
        << metrics.map50_95 << ',' << settings.bias_lr << ',' << settings.lr << ','
        << settings.lr << '\n';
    csv.flush();
    std::ostringstream line;
    line.precision(4);
    line << "epoch " << epoch + 1 << "/" << options.epochs << "  box " << mean[0] << "  obj "
         << mean[1] << "  cls " << mean[2] << "  mAP50 " << metrics.map50 << "  mAP50-95 "
         << metrics.map50_95 << "  ("
         << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()
         << " s)";
    log(line.str());
    if (stop || epoch - best_epoch >= options.patience) break;
  }
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

}  // namespace bareyolo::models
